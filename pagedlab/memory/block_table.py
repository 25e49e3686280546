"""One sequence's map from logical KV blocks to physical ones.

Position ``p`` of a sequence lives in logical block ``p // block_size`` at offset
``p % block_size``; the table says which physical block that logical block is.

Invariants (checked by the property tests):

- ``num_slots == len(blocks) * block_size`` and ``num_slots - block_size < num_tokens <=
  num_slots`` (only the last block has empty slots), or both are 0;
- appending never moves a position that was already written: ``slot(p)`` is the same
  before and after, except that a shared, partly filled last block is first copied
  (copy-on-write) so that the block being written always has ref count 1;
- the table holds exactly one reference to each of its blocks, and ``free()`` drops them;
- every method either succeeds or raises with nothing changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.events import Event


class CopyOnWrite(NamedTuple):
    """Copy the KV data of physical block ``src`` into ``dst`` before writing."""

    src: int
    dst: int


class BlockTable:
    """A sequence's block table over ``allocator``; starts empty (0 tokens, no blocks)."""

    __slots__ = (
        "_alloc",
        "_refcounts",
        "_listeners",
        "_block_size",
        "_blocks",
        "_num_tokens",
        "_freed",
        "id",
    )

    def __init__(self, allocator: BlockAllocator) -> None:
        self._alloc = allocator
        # The allocator's own ref-count list and listener list (never rebound), read on the
        # fast path of append_tokens without going through the allocator object.
        self._refcounts = allocator._refcounts
        self._listeners = allocator._listeners
        self._block_size = allocator.block_size
        self._blocks: list[int] = []
        self._num_tokens = 0
        self._freed = False
        self.id = allocator._new_table_id()

    # --- what the table says ----------------------------------------------------------------
    @property
    def allocator(self) -> BlockAllocator:
        return self._alloc

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def blocks(self) -> list[int]:
        """Physical block of logical block ``i``, in logical order (a copy)."""
        return list(self._blocks)

    @property
    def num_tokens(self) -> int:
        return self._num_tokens

    @property
    def num_slots(self) -> int:
        return len(self._blocks) * self._block_size

    @property
    def freed(self) -> bool:
        return self._freed

    def slot(self, pos: int) -> tuple[int, int]:
        """(physical block, offset) of position ``pos``, 0-based."""
        pos = check_int(pos, "pos")
        if not 0 <= pos < self._num_tokens:
            raise ValueError(f"position {pos} is outside [0, {self._num_tokens})")
        return self._blocks[pos // self._block_size], pos % self._block_size

    def slot_mapping(self) -> list[int]:
        """Flat slot ``block * block_size + offset`` of every position, in order."""
        size = self._block_size
        return [self._blocks[p // size] * size + p % size for p in range(self._num_tokens)]

    # --- changing it --------------------------------------------------------------------------
    def append_tokens(self, n: int = 1) -> CopyOnWrite | None:
        """Make room for ``n`` more positions; atomic.

        Returns the copy-on-write the caller's KV storage must perform before writing, or
        None. Raises OutOfBlocksError (too few free blocks) or ValueError with nothing changed.
        """
        if n == 1 and n.__class__ is int:
            return self.append_token()
        return self._append_slow(check_int(n, "n", minimum=1))

    def append_token(self) -> CopyOnWrite | None:
        """``append_tokens(1)``: the decode step's hot path, with nothing to validate."""
        tokens = self._num_tokens
        if tokens % self._block_size:
            # Room in the last block, and only this table holds it: just count.
            if self._refcounts[self._blocks[-1]] == 1:
                self._num_tokens = tokens + 1
                if self._listeners:
                    self._emit_writes(tokens, 1)
                return None
        elif tokens and self._alloc._free:
            # The last block is full: open a new one; nothing to copy, nothing moves.
            self._blocks.append(self._alloc._allocate(self.id))
            self._num_tokens = tokens + 1
            if self._listeners:
                self._emit_writes(tokens, 1)
            return None
        return self._append_slow(1)

    def _append_slow(self, n: int) -> CopyOnWrite | None:
        self._check_live("append to")
        alloc, size, blocks = self._alloc, self._block_size, self._blocks
        room = len(blocks) * size - self._num_tokens
        copy_last = room > 0 and alloc._refcounts[blocks[-1]] > 1
        new_blocks = -(-(n - room) // size) if n > room else 0
        needed = new_blocks + copy_last
        if needed > alloc.num_free:
            raise OutOfBlocksError(
                f"appending {n} token(s) to table {self.id} needs {needed} free block(s), "
                f"but only {alloc.num_free} of {alloc.num_blocks} are free"
            )
        copy = None
        if copy_last:
            copy = CopyOnWrite(blocks[-1], alloc._allocate(self.id))
            if alloc._listeners:
                alloc.emit(Event("copy", copy.dst, 1, table=self.id, src=copy.src))
            alloc._release(copy.src, self.id)
            blocks[-1] = copy.dst
        blocks += alloc._allocate_many(new_blocks, self.id)
        if alloc._listeners:
            self._emit_writes(self._num_tokens, n)
        self._num_tokens += n
        return copy

    def _emit_writes(self, first: int, count: int) -> None:
        size, emit = self._block_size, self._alloc.emit
        for pos in range(first, first + count):
            block = self._blocks[pos // size]
            emit(Event("write", block, self._alloc._refcounts[block], self.id, pos, pos % size))

    def fork(self) -> BlockTable:
        """A new table that shares every block of this one (each ref count + 1)."""
        self._check_live("fork")
        child = BlockTable(self._alloc)
        for block in self._blocks:
            self._alloc._share(block, child.id)
        child._blocks = list(self._blocks)
        child._num_tokens = self._num_tokens
        return child

    def hold_prefix(self, blocks: Sequence[int]) -> None:
        """Start an empty table on full, already written ``blocks`` (a prefix-cache hit).

        Each block is shared if held elsewhere, or taken back off the free list with its
        contents if nobody holds it. The table then holds ``len(blocks) * block_size`` tokens.
        """
        self._check_live("hold a prefix in")
        if self._blocks:
            raise ValueError(f"table {self.id} already holds blocks {self._blocks}")
        checked = [self._alloc._check_block(b) for b in blocks]
        if len(set(checked)) != len(checked):
            raise ValueError(f"blocks {list(blocks)} repeat a block")
        for block in checked:
            if self._alloc._refcounts[block]:
                self._alloc._share(block, self.id)
            else:
                self._alloc._reuse(block, self.id)
        self._blocks = checked
        self._num_tokens = len(checked) * self._block_size

    def free(self) -> None:
        """Drop this table's reference to each block, last block first; the table is done.

        Freed blocks join the back of the free list tail first, so the tail is handed out
        again before the beginning: a prefix cache keeps a sequence's shared start longest.
        """
        self._check_live("free")
        self._alloc._release_many(self._blocks[::-1], self.id)
        self._blocks = []
        self._num_tokens = 0
        self._freed = True

    def _check_live(self, action: str) -> None:
        if self._freed:
            raise ValueError(f"cannot {action} table {self.id}: it was already freed")

    def __repr__(self) -> str:
        return f"BlockTable(id={self.id}, blocks={self._blocks}, num_tokens={self._num_tokens})"
