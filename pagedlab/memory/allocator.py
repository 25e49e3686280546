"""A pool of fixed-size KV blocks with a free list and reference counts.

The allocator knows nothing about sequences: it hands out physical block ids, counts how
many block tables hold each one, and takes a block back when the last holder lets go.

Invariants (checked by the property tests):

- every block is either on the free list with ref count 0, or off it with ref count >= 1;
- ``num_free`` is the length of the free list;
- the free list is a queue: ``allocate`` takes from the front, a block whose ref count
  reaches 0 joins the back. Without ``free_order`` the front starts at block 0, so a fresh
  pool hands out 0, 1, 2, ...; ``free_order`` stages a scene (the paper's blocks 4 then 1);
- every method either succeeds or raises with nothing changed.

``allocate``, ``free``, ``share`` and ``reuse`` are O(1). Events (``pagedlab.memory.events``) are
only built while somebody listens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from pagedlab.checks import check_int
from pagedlab.memory.events import Event, EventSource


class OutOfBlocksError(RuntimeError):
    """The pool has fewer free blocks than an operation needs; nothing was changed."""


class BlockAllocator(EventSource):
    """Physical KV blocks ``0 .. num_blocks - 1``, each holding ``block_size`` positions."""

    def __init__(
        self, num_blocks: int, block_size: int, free_order: Sequence[int] | None = None
    ) -> None:
        super().__init__()
        self._num_blocks = check_int(num_blocks, "num_blocks", minimum=1)
        self._block_size = check_int(block_size, "block_size", minimum=1)
        order = range(self._num_blocks) if free_order is None else self._permutation(free_order)
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(order)
        self._refcounts = [0] * self._num_blocks
        self._tables_made = 0

    def _permutation(self, free_order: Sequence[int]) -> list[int]:
        try:
            order = [check_int(b, "free_order entry") for b in free_order]
        except (TypeError, ValueError):
            raise ValueError(
                f"free_order must be a permutation of range({self._num_blocks}), got {free_order!r}"
            ) from None
        if sorted(order) != list(range(self._num_blocks)):
            raise ValueError(
                f"free_order must be a permutation of range({self._num_blocks}), got {free_order!r}"
            )
        return order

    # --- sizes -------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def num_free(self) -> int:
        return len(self._free)

    def free_list(self) -> list[int]:
        """Free blocks in the order ``allocate`` will hand them out."""
        return list(self._free)

    def refcounts(self) -> list[int]:
        """Ref count of every block, indexed by physical block id (a copy)."""
        return list(self._refcounts)

    def refcount(self, block: int) -> int:
        return self._refcounts[self._check_block(block)]

    def _check_block(self, block: object) -> int:
        number = check_int(block, "block")
        if not 0 <= number < self._num_blocks:
            raise ValueError(f"block {number} is out of range [0, {self._num_blocks})")
        return number

    # --- taking and giving back ----------------------------------------------------------
    def allocate(self) -> int:
        """Take the block at the front of the free list; its ref count becomes 1."""
        return self._allocate(None)

    def _allocate(self, table: int | None) -> int:
        if not self._free:
            raise OutOfBlocksError(f"no free block: all {self._num_blocks} blocks are in use")
        block = self._free.popitem(last=False)[0]
        self._refcounts[block] = 1
        if self._listeners:
            self.emit(Event("allocate", block, 1, table=table))
        return block

    def _allocate_many(self, count: int, table: int | None) -> list[int]:
        """``count`` blocks from the front of the free list, in order; all or nothing."""
        if count > len(self._free):
            raise OutOfBlocksError(
                f"{count} block(s) needed but only {len(self._free)} of {self._num_blocks} are free"
            )
        return [self._allocate(table) for _ in range(count)]

    def free(self, block: int) -> None:
        """Drop one reference to ``block``; at 0 it joins the back of the free list."""
        self._release(self._check_block(block), None)

    def _release(self, block: int, table: int | None) -> None:
        count = self._refcounts[block]
        if count == 0:
            raise ValueError(f"block {block} is already free")
        self._refcounts[block] = count - 1
        if count == 1:
            self._free[block] = None
        if self._listeners:
            self.emit(Event("free" if count == 1 else "release", block, count - 1, table=table))

    def _release_many(self, blocks: list[int], table: int | None) -> None:
        """Drop one reference to each of ``blocks`` (distinct), in order; all or nothing."""
        refcounts = self._refcounts
        if 0 in map(refcounts.__getitem__, blocks):
            held = [b for b in blocks if refcounts[b] == 0]
            raise ValueError(f"block {held[0]} is already free")
        if self._listeners:
            for block in blocks:
                self._release(block, table)
            return
        free = self._free
        for block in blocks:
            count = refcounts[block] - 1
            refcounts[block] = count
            if not count:
                free[block] = None

    def share(self, block: int) -> None:
        """One more holder for an allocated ``block`` (a fork, or a prefix-cache hit)."""
        self._share(self._check_block(block), None)

    def _share(self, block: int, table: int | None) -> None:
        if self._refcounts[block] == 0:
            raise ValueError(f"block {block} is free and cannot be shared; reuse() takes it back")
        self._refcounts[block] += 1
        if self._listeners:
            self.emit(Event("share", block, self._refcounts[block], table=table))

    def reuse(self, block: int) -> None:
        """Take the free ``block`` off the free list with its contents intact (prefix caching)."""
        self._reuse(self._check_block(block), None)

    def _reuse(self, block: int, table: int | None) -> None:
        if self._refcounts[block] != 0:
            raise ValueError(f"block {block} is not free (ref count {self._refcounts[block]})")
        del self._free[block]
        self._refcounts[block] = 1
        if self._listeners:
            self.emit(Event("reuse", block, 1, table=table))

    def _new_table_id(self) -> int:
        self._tables_made += 1
        return self._tables_made - 1

    def __repr__(self) -> str:
        return (
            f"BlockAllocator(num_blocks={self._num_blocks}, block_size={self._block_size}, "
            f"num_free={self.num_free})"
        )
