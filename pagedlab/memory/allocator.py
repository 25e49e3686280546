"""A pool of fixed-size KV blocks: a free queue, and who holds each block.

The allocator knows nothing about sequences: it hands out block ids, keeps each block's
holders (its ref count is their number) and takes a block back when the last holder lets go.
A holder is an :class:`Owner` (a ``BlockTable`` passes its own) or anonymous (``owner=None``).
Invariants (the property tests): a block is on the free queue with ref count 0, or off it
with ref count >= 1; an owner holds a block at most once; ``allocate`` takes the front of the
queue (0, 1, 2, ... of a fresh pool, unless ``free_order`` stages a scene); every public method
is one guard (``_check_*``) that raises before anything moves, then the mechanism (``_take``,
``_release``, which a self-guarding ``BlockTable`` calls directly).

Where a block reaching ref count 0 joins the queue is the ``free_rule``: ``"fifo"`` at the
back; ``"vllm-v1"`` as vLLM V1's ``BlockPool.free_blocks`` (``vllm/v1/core/block_pool.py``):
a block without a hash (``mark_hashed`` by a prefix cache) to the *front*, a hashed one to the
back, kept longest for a hit; ``allocate`` drops the mark. vLLM also reserves block 0 as a
*null block*; pagedlab does not. Events are built only for kinds somebody listens to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Literal, cast

from pagedlab.ground.checks import Refused, check_choice, check_int
from pagedlab.memory.events import Event, EventKind, EventSource
from pagedlab.memory.owner import (
    Owner,
    check_block,
    check_blocks,
    check_named_owner,
    check_owner,
    check_pool,
    permutation,
)

FreeRule = Literal["fifo", "vllm-v1"]
FREE_RULES: tuple[FreeRule, ...] = ("fifo", "vllm-v1")


class OutOfBlocksError(RuntimeError, Refused):
    """The pool has fewer free blocks than an operation needs; nothing was changed."""


class BlockAllocator(EventSource):
    """Physical KV blocks ``0 .. num_blocks - 1``, each holding ``block_size`` positions."""

    __slots__ = ("_num_blocks", "_block_size", "_rule", "_free", "holders", "_hashed", "_owners")

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        free_order: Sequence[int] | None = None,
        free_rule: FreeRule = "fifo",
    ) -> None:
        super().__init__()
        self._num_blocks, self._block_size = check_pool(num_blocks, block_size)
        self._rule = cast(FreeRule, check_choice(free_rule, "free_rule", FREE_RULES))
        order = range(num_blocks) if free_order is None else permutation(free_order, num_blocks)
        self._free: deque[int] = deque(order)  # the free queue, front first
        # holders[b]: who holds block b, most recent last; its length is b's ref count. Read
        # it freely (a table asks whether its last block is shared); only _take, share, hold,
        # _take_back and _release change it.
        self.holders: list[list[Owner | None]] = [[] for _ in range(num_blocks)]
        self._hashed: set[int] = set()  # blocks that still hold the KV a prefix cache hashed
        self._owners = 0

    # --- the mechanism: take, share, copy, give back ---------------------------------------
    def allocate(self, owner: Owner | None = None) -> int:
        """Take the block at the front of the free queue for ``owner``; its ref count is 1."""
        self._check_can_take(1, owner)
        return self._take(1, owner)[0]

    def share(self, block: int, owner: Owner | None = None) -> None:
        """One more holder for an allocated ``block`` (a fork, or a prefix-cache hit)."""
        block = self._check_shareable(block, owner)
        self.holders[block].append(owner)
        if "share" in self.listening:
            self._tell("share", block, owner)

    def copy_on_write(self, block: int, owner: Owner) -> int:
        """Give ``owner`` a private copy of the shared ``block`` (a new block from the front
        of the free queue, returned: the caller's KV storage copies ``block`` into it)."""
        block = self._check_copyable(block, owner)
        copy = self._take(1, owner)[0]
        if "copy" in self.listening:
            self._tell("copy", copy, owner, src=block)
        self._release([block], owner)
        return copy

    def free(self, block: int, owner: Owner | None = None) -> None:
        """Drop one reference to ``block`` (``owner``'s, else see ``_release``); at 0 it joins
        the free queue by the free rule."""
        self._release([self._check_held(block, owner)], owner)

    def free_many(self, blocks: Sequence[int], owner: Owner | None = None) -> None:
        """Drop one reference to each of ``blocks`` (distinct), in order; all or nothing
        (vLLM's ``free_blocks``: under "vllm-v1" one run at each end, each in the order given)."""
        self._release(self._check_each(blocks, owner, self._check_holding), owner)

    def _take(self, count: int, owner: Owner | None) -> list[int]:
        """``count`` blocks from the front of the free queue, for a caller that checked they are."""
        taken = []
        for _ in range(count):
            block = self._free.popleft()
            self._hashed.discard(block)  # new contents: the old hash (if any) is evicted
            self.holders[block].append(owner)
            taken.append(block)
            if "allocate" in self.listening:
                self._tell("allocate", block, owner)
        return taken

    def _release(
        self, blocks: list[int], owner: Owner | None, evict_first: Collection[int] = ()
    ) -> None:
        """The mechanism of ``free_many``, for a caller that checked ``owner`` holds each block.

        An anonymous drop with no anonymous holder left takes the most recent owner's reference
        (a block freed behind a table's back): the owner records it in ``lost``, and its table
        refuses from then on. A block reaching 0 joins the *front* if in ``evict_first``
        (vLLM's ``free_blocks(evict_first=True)``) or unhashed under "vllm-v1", else the back;
        the front ones go last and in reverse, building vLLM's front run in the order given.
        """
        unhashed = set(blocks) - self._hashed if self._rule == "vllm-v1" else set()
        first = unhashed.union(evict_first)
        front = {b for b in blocks if len(self.holders[b]) == 1 and b in first}
        blocks = [b for b in blocks if b not in front] + [b for b in blocks[::-1] if b in front]
        for block in blocks:
            holders = self.holders[block]
            try:
                holders.remove(owner)
            except ValueError:  # owner is None, and only tables hold the block
                holders.pop().lost.append(block)  # type: ignore[union-attr]
            if holders:
                if "release" in self.listening:
                    self._tell("release", block, owner)
                continue
            if block in front:
                self._free.appendleft(block)  # nothing worth keeping here: reused first
            else:
                self._free.append(block)  # the back of the queue
            if "free" in self.listening:
                self._tell("free", block, owner)

    def _tell(
        self, kind: EventKind, block: int, owner: Owner | None, src: int | None = None
    ) -> None:
        """Tell the listeners of ``kind`` (callers first ask whether anybody listens)."""
        table = None if owner is None else owner.id
        self._emit(Event(kind, block, len(self.holders[block]), table, src=src))

    # --- blocks taken back with their contents -----------------------------------------------
    def reuse(self, block: int, owner: Owner | None = None) -> None:
        """Take the free ``block`` off the free queue with its contents intact (prefix caching)."""
        block = self._check_free(block, owner)
        self._take_back(block, owner)

    def hold(self, blocks: Sequence[int], owner: Owner | None = None) -> None:
        """One more reference to each of ``blocks`` (distinct): shared if held, taken back with
        its contents if free; all or nothing."""
        for block in self._check_each(blocks, owner, self._check_not_holding):
            if self.holders[block]:
                self.holders[block].append(owner)
                if "share" in self.listening:
                    self._tell("share", block, owner)
            else:
                self._take_back(block, owner)

    def _take_back(self, block: int, owner: Owner | None) -> None:
        self._free.remove(block)  # a scan of the queue: only a prefix-cache hit does it
        self.holders[block].append(owner)
        if "reuse" in self.listening:
            self._tell("reuse", block, owner)

    # --- hash marks: which blocks a prefix cache hashed --------------------------------------
    def mark_hashed(self, block: int) -> None:
        """Mark the held ``block`` hashed (a prefix cache registered it) until ``allocate``
        hands it out again or ``unmark_hashed``."""
        self._hashed.add(self._check_held(block, None))

    def unmark_hashed(self, block: int) -> None:
        """Drop ``block``'s hash mark, if it has one (a prefix cache forgot it)."""
        self._hashed.discard(check_block(block, self._num_blocks))

    def is_hashed(self, block: int) -> bool:
        """Whether ``block`` carries a prefix-cache hash (``mark_hashed``, not yet handed out)."""
        return check_block(block, self._num_blocks) in self._hashed

    # --- what the pool says ------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def free_rule(self) -> FreeRule:
        return self._rule

    @property
    def num_free(self) -> int:
        return len(self._free)

    def free_list(self) -> list[int]:
        """Free blocks in the order ``allocate`` will hand them out."""
        return list(self._free)

    def refcounts(self) -> list[int]:
        """Ref count of every block, indexed by physical block id (a copy)."""
        return [len(holders) for holders in self.holders]

    def refcount(self, block: int) -> int:
        return len(self.holders[check_block(block, self._num_blocks)])

    def can_allocate(self, count: int = 1) -> bool:
        """Whether ``count`` blocks are free (the pure check beside ``allocate``)."""
        return check_int(count, "count", minimum=0) <= len(self._free)

    def new_owner(self) -> Owner:
        """A new holder; ids count up from 0 (they are the ``BlockTable.id`` of each table)."""
        self._owners += 1
        return Owner(self._owners - 1)

    def note_writes(
        self, owner: Owner | None, blocks: Sequence[int], first: int, count: int
    ) -> None:
        """One ``write`` event per position ``first .. first + count - 1`` that ``owner`` wrote
        into a table of ``blocks`` (none while nobody listens to writes)."""
        if "write" not in self.listening:
            return
        owner, size = check_owner(owner), self._block_size
        first, count = check_int(first, "first", minimum=0), check_int(count, "count", minimum=0)
        if first + count > len(blocks) * size:
            raise ValueError(f"positions up to {first + count - 1} do not fit in {blocks}")
        table = None if owner is None else owner.id
        for pos in range(first, first + count):
            block = check_block(blocks[pos // size], self._num_blocks)
            self._emit(Event("write", block, len(self.holders[block]), table, pos, pos % size))

    # --- the guards: each raises (naming the value) before anything changes -----------------
    def _check_can_take(self, count: int, owner: object) -> None:
        check_owner(owner)
        if count > len(self._free):
            free, total = len(self._free), self._num_blocks
            raise OutOfBlocksError(f"{count} block(s) needed but only {free} of {total} are free")

    def _check_shareable(self, block: object, owner: object) -> int:
        block, owner = check_block(block, self._num_blocks), check_owner(owner)
        if not self.holders[block]:
            raise ValueError(f"block {block} is free and cannot be shared; reuse() takes it back")
        self._check_not_holding(block, owner)
        return block

    def _check_copyable(self, block: object, owner: object) -> int:
        block, owner = check_block(block, self._num_blocks), check_named_owner(owner)
        if owner not in self.holders[block]:
            raise ValueError(f"block {block} is not held by table {owner.id}")
        if len(self.holders[block]) < 2:
            raise ValueError(f"block {block} is not shared (ref count 1): write it in place")
        if not self._free:
            raise OutOfBlocksError(
                f"copy-on-write of block {block} needs a free block, but all "
                f"{self._num_blocks} are in use"
            )
        return block

    def _check_held(self, block: object, owner: object) -> int:
        block = check_block(block, self._num_blocks)
        self._check_holding(block, check_owner(owner))
        return block

    def _check_each(
        self, blocks: object, owner: object, check: Callable[[int, Owner | None], None]
    ) -> list[int]:
        owner = check_owner(owner)
        checked = check_blocks(blocks, self._num_blocks)
        for block in checked:
            check(block, owner)
        return checked

    def _check_holding(self, block: int, owner: Owner | None) -> None:
        if not self.holders[block]:
            raise ValueError(f"block {block} is already free")
        if owner is not None and owner not in self.holders[block]:
            raise ValueError(f"block {block} is not held by table {owner.id}")

    def _check_free(self, block: object, owner: object) -> int:
        block = check_block(block, self._num_blocks)
        check_owner(owner)
        if self.holders[block]:
            raise ValueError(f"block {block} is not free (ref count {self.refcount(block)})")
        return block

    def _check_not_holding(self, block: int, owner: Owner | None) -> None:
        if owner is not None and owner in self.holders[block]:
            raise ValueError(f"table {owner.id} already holds block {block}")

    def __repr__(self) -> str:
        rule = "" if self._rule == "fifo" else f", free_rule={self._rule!r}"
        return (
            f"BlockAllocator(num_blocks={self._num_blocks}, block_size={self._block_size}"
            f"{rule}, num_free={self.num_free})"
        )
