"""One sequence's map from logical KV blocks to physical ones: position ``p`` lives in logical
block ``p // block_size`` at offset ``p % block_size``; the table says which physical block.

Invariants (the property tests): ``num_slots == len(blocks) * block_size`` and only the last
block has empty slots; appending never moves a written position, except that a shared, partly
filled last block is first copied (copy-on-write), so the block written has ref count 1; the
table holds one reference to each of its blocks (as its allocator ``Owner``); every method
succeeds or raises with nothing changed; a table whose block was freed behind its back
refuses every later operation (a ValueError naming the block) instead of writing into a block
the pool may hand to another sequence. :func:`blocks_to_append` is the one "how many free
blocks does an append need" formula (table, prefix cache, beam search).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

from pagedlab.ground.checks import ceil_div, check_int, slot_mapping
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.owner import items_of


class CopyOnWrite(NamedTuple):
    """Copy the KV data of physical block ``src`` into ``dst`` before writing."""

    src: int
    dst: int


class BlockTable:
    """A sequence's block table over ``allocator``; starts empty (0 tokens, no blocks)."""

    __slots__ = ("_alloc", "_owner", "_block_size", "_blocks", "_num_tokens", "_freed")

    def __init__(self, allocator: BlockAllocator) -> None:
        if not isinstance(allocator, BlockAllocator):
            raise TypeError(
                f"BlockTable needs a BlockAllocator to take blocks from, got {allocator!r}"
            )
        self._alloc = allocator
        self._owner = allocator.new_owner()
        self._block_size = allocator.block_size
        self._blocks: list[int] = []
        self._num_tokens = 0
        self._freed = False

    # --- the mechanism: append, fork, free ----------------------------------------------------
    def append_tokens(self, n: int = 1) -> CopyOnWrite | None:
        """Make room for ``n`` more positions; atomic. Returns the copy-on-write the caller's
        KV storage must perform before writing, or None."""
        if type(n) is not int or n < 1:  # a plain count >= 1 needs no converting
            n = check_int(n, "n", minimum=1)
        if self._owner.lost:  # (a freed table has no room: _take_blocks refuses it)
            self.check_usable("append to")
        alloc, room = self._alloc, -self._num_tokens % self._block_size  # room: empty slots
        copy = None
        if n > room or len(alloc.holders[self._blocks[-1]]) > 1:
            copy = self._take_blocks(n, room)  # new blocks, or the last one is shared
        if alloc.listening:  # one write event per position, for a listener of writes only
            alloc.note_writes(self._owner, self._blocks, self._num_tokens, n)
        self._num_tokens += n
        return copy

    def _take_blocks(self, n: int, room: int) -> CopyOnWrite | None:
        """The blocks ``append_tokens(n)`` takes: a private copy of a shared, partly filled last
        block, then new blocks for the tokens beyond its ``room``; refused before any is taken."""
        if self._freed:
            self.check_usable("append to")
        alloc, size = self._alloc, self._block_size
        copy_last = room > 0 and len(alloc.holders[self._blocks[-1]]) > 1
        new_blocks = ceil_div(n - room, size) if n > room else 0
        if copy_last + new_blocks > alloc.num_free:
            free, total, needed = alloc.num_free, alloc.num_blocks, copy_last + new_blocks
            raise OutOfBlocksError(
                f"appending {n} token(s) to table {self.id} needs {needed} free block(s), "
                f"but only {free} of {total} are free"
            )
        copy = None
        if copy_last:  # write into a private copy; what the others read stays put
            src = self._blocks[-1]
            self._blocks[-1] = alloc.copy_on_write(src, self._owner)
            copy = CopyOnWrite(src, self._blocks[-1])
        # the guard above is the allocator's (enough free blocks; the owner is the table's)
        self._blocks += alloc._take(new_blocks, self._owner)
        return copy

    def append_token(self) -> CopyOnWrite | None:
        """``append_tokens(1)``: the decode step."""
        return self.append_tokens(1)

    def fork(self) -> BlockTable:
        """A new table that shares every block of this one (each ref count + 1)."""
        self.check_usable("fork")
        child = BlockTable(self._alloc)
        self._alloc.hold(self._blocks, child._owner)
        child._blocks = list(self._blocks)
        child._num_tokens = self._num_tokens
        return child

    def free(self, evict_first: Collection[int] = ()) -> None:
        """Drop this table's reference to each block, last block first (as vLLM frees a
        request: a prefix cache evicts the tail before the more shared beginning); the table is
        done. Blocks in ``evict_first`` reaching ref count 0 join the *front* even if hashed
        (vLLM's ``free_blocks(evict_first=True)``: another tier holds their K/V)."""
        self.check_usable("free")  # the allocator's guard: the table holds each block once
        self._alloc._release(self._blocks[::-1], self._owner, evict_first)
        self._blocks = []
        self._num_tokens = 0
        self._freed = True

    def hold_prefix(self, blocks: Sequence[int]) -> None:
        """Start an empty table on full, already written ``blocks`` (a prefix-cache hit), each
        shared if held, else taken back with its contents; ``len(blocks) * block_size`` tokens."""
        checked = self._check_prefix(blocks)
        self._alloc.hold(checked, self._owner)  # checks range and repeats; all or nothing
        self._blocks = checked
        self._num_tokens = len(checked) * self._block_size

    # --- what the table says ------------------------------------------------------------------
    @property
    def id(self) -> int:
        """The table's number in its allocator (0, 1, 2, ... in the order tables were made)."""
        return self._owner.id

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

    @property
    def lost(self) -> list[int]:
        """Blocks of this table that were freed behind its back (empty while it is healthy)."""
        return list(self._owner.lost)

    def slot(self, pos: int) -> tuple[int, int]:
        """(physical block, offset) of position ``pos``, 0-based."""
        pos = self._check_position(pos)
        return self._blocks[pos // self._block_size], pos % self._block_size

    def slot_mapping(self) -> list[int]:
        """Flat slot ``block * block_size + offset`` of every position, in order."""
        if self._owner.lost:
            self.check_usable("read")
        return slot_mapping(self._blocks, 0, self._num_tokens, self._block_size)

    def blocks_needed(self, n: int = 1) -> int:
        """Free blocks ``append_tokens(n)`` needs now (new blocks plus a copy-on-write)."""
        n = check_int(n, "n", minimum=1)
        self.check_usable("append to")
        shared = bool(self._blocks) and self._alloc.refcount(self._blocks[-1]) > 1
        return blocks_to_append(self._num_tokens, n, self._block_size, shared)

    def can_append(self, n: int = 1) -> bool:
        """Whether ``append_tokens(n)`` would succeed; changes nothing."""
        return self.blocks_needed(n) <= self._alloc.num_free

    # --- the guards: each raises (naming the value) before anything changes -----------------
    def check_usable(self, action: str = "use") -> None:
        """Raise ValueError if the table was freed or lost a block behind its back."""
        if self._freed:
            raise ValueError(f"cannot {action} table {self.id}: it was already freed")
        lost = self._owner.lost
        if lost:
            block = lost[0]
            state = (
                f"block {block} is already free"
                if self._alloc.refcount(block) == 0
                else f"block {block} now has other holders"
            )
            raise ValueError(
                f"cannot {action} table {self.id}: block {block} was freed behind its back "
                f"(BlockAllocator.free({block}) dropped the table's reference; {state}), so the "
                f"table no longer holds it; make a new table"
            )

    def _check_position(self, pos: object) -> int:
        pos = check_int(pos, "pos")
        if not 0 <= pos < self._num_tokens:
            raise ValueError(f"position {pos} is outside [0, {self._num_tokens})")
        if self._owner.lost:
            self.check_usable("read")
        return pos

    def _check_prefix(self, blocks: object) -> list[int]:
        checked = [check_int(b, "block") for b in items_of(blocks, "blocks", "block ids")]
        self.check_usable("hold a prefix in")
        if self._blocks:
            raise ValueError(f"table {self.id} already holds blocks {self._blocks}")
        return checked

    def __repr__(self) -> str:
        return f"BlockTable(id={self.id}, blocks={self._blocks}, num_tokens={self._num_tokens})"


def blocks_to_append(
    num_tokens: int, n: int, block_size: int, last_block_shared: bool = False
) -> int:
    """Free blocks that appending ``n`` tokens to a table of ``num_tokens`` needs: new blocks
    beyond the last block's empty slots, plus its copy if partly filled and shared."""
    num_tokens = check_int(num_tokens, "num_tokens", minimum=0)
    n = check_int(n, "n", minimum=0)
    block_size = check_int(block_size, "block_size", minimum=1)
    if not isinstance(last_block_shared, bool):
        raise TypeError(f"last_block_shared must be a bool, got {last_block_shared!r}")
    room = -num_tokens % block_size  # empty slots in the last block
    new_blocks = ceil_div(n - room, block_size) if n > room else 0  # beyond the room
    return new_blocks + (1 if n and room and last_block_shared else 0)
