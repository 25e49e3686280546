"""A pool of fixed-size KV blocks with a free list, reference counts and their holders.

The allocator knows nothing about sequences: it hands out physical block ids, counts how
many holders each one has, and takes a block back when the last holder lets go. A holder is
either an :class:`Owner` (a ``BlockTable`` makes one and passes it to every call) or
anonymous (``owner=None``: a learner calling ``allocate`` / ``share`` / ``free`` directly).

Invariants (checked by the property tests):

- every block is either on the free list with ref count 0, or off it with ref count >= 1;
- the ref count of a block is the number of its holders; an owner holds a block at most once;
- ``num_free`` is the length of the free list;
- the free list is a queue: ``allocate`` takes from the front. Without ``free_order`` the
  front starts at block 0, so a fresh pool hands out 0, 1, 2, ...; ``free_order`` stages a
  scene (the paper's blocks 4 then 1);
- every method either succeeds or raises with nothing changed.

Where a block whose ref count reaches 0 joins the queue is the ``free_rule``:

- ``"fifo"``: at the back, always (the default; vLLM V1's queue before it split them);
- ``"vllm-v1"``: vLLM V1's ``BlockPool.free_blocks`` (``vllm/v1/core/block_pool.py`` at
  commit c59cb79): a block without a hash (a request's partly filled last block; every
  block when prefix caching is off) goes to the *front* and is reused first; a hashed block
  (full, registered by a prefix cache: ``mark_hashed``) goes to the back, kept longest for
  a cache hit. ``free_many(blocks)`` is ``free_blocks(blocks)``: the unhashed ones form one
  run at the front and the hashed ones one run at the back, each in the order given; a
  table frees its last block first, as vLLM's ``SingleTypeKVCacheManager.free`` does.

``allocate`` drops the hash mark of the block it hands out (vLLM evicts the hash there);
``reuse`` keeps it. vLLM also takes block 0 off its queue at start-up as a *null block*, a
placeholder that is never handed out; pagedlab reserves none, so block 0 is a block like
any other (the seed hands it to request A).

Misuse through this layer is recorded, not hidden: an anonymous ``free`` of a block that no
anonymous holder holds drops an owner's reference (a block freed behind a table's back; of
several owners, the most recent one's). That owner's ``lost`` list names the block, so its
table refuses its next operation instead of writing into a block somebody else may be handed.

An owner's ``fast`` flag is what lets ``BlockTable.append_token`` skip asking the allocator:
:meth:`BlockAllocator.grant` sets it when the owner alone holds its last block and nobody
listens; the allocator clears it whenever one of the owner's blocks gains a holder or loses
the owner's reference, and whenever a listener comes or goes.

``allocate``, ``free``, ``share`` and ``reuse`` are O(1) (O(holders) for a shared block).
Events (``pagedlab.memory.events``) are only built while somebody listens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from pagedlab.checks import ArgumentTypeError, check_int
from pagedlab.memory.events import Event, EventSource
from pagedlab.memory.owner import (
    Owner,
    check_block,
    check_blocks,
    check_named_owner,
    check_owner,
    permutation,
)

MAX_NUM_BLOCKS = 2**20
"""Largest pool: 1,048,576 blocks (about 140 MiB of bookkeeping; block ids fit int32)."""

FreeRule = Literal["fifo", "vllm-v1"]
FREE_RULES: tuple[FreeRule, ...] = ("fifo", "vllm-v1")
"""Where a block whose ref count reaches 0 joins the free queue (see the module docstring)."""

MAX_SLOTS = 2**31 - 1
"""``num_blocks * block_size`` bound: flat slot ids ``block * block_size + offset`` are int32."""


class OutOfBlocksError(RuntimeError):
    """The pool has fewer free blocks than an operation needs; nothing was changed."""


class BlockAllocator(EventSource):
    """Physical KV blocks ``0 .. num_blocks - 1``, each holding ``block_size`` positions."""

    __slots__ = (
        "_num_blocks",
        "_block_size",
        "_rule",
        "_free",
        "_refcounts",
        "_holders",
        "_hashed",
        "_owners",
    )

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        free_order: Sequence[int] | None = None,
        free_rule: FreeRule = "fifo",
    ) -> None:
        super().__init__()
        self._rule = check_free_rule(free_rule)
        num_blocks = check_int(num_blocks, "num_blocks", minimum=1, maximum=MAX_NUM_BLOCKS)
        block_size = check_int(block_size, "block_size", minimum=1)
        if num_blocks * block_size > MAX_SLOTS:
            raise ValueError(
                f"num_blocks * block_size = {num_blocks} * {block_size} slots exceeds "
                f"2**31 - 1 (flat slot ids are int32)"
            )
        self._num_blocks, self._block_size = num_blocks, block_size
        order = range(num_blocks) if free_order is None else permutation(free_order, num_blocks)
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(order)
        self._refcounts = [0] * num_blocks
        # holders of each block: one holder (an Owner, or None: anonymous) while the ref
        # count is 1; a list of them while it is 2 or more; None while the block is free.
        self._holders: list[Any] = [None] * num_blocks
        self._hashed: set[int] = set()  # blocks that still hold the KV a prefix cache hashed
        self._owners = 0

    # --- sizes and state ---------------------------------------------------------------
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
        return list(self._refcounts)

    def refcount(self, block: int) -> int:
        return self._refcounts[check_block(block, self._num_blocks)]

    def holds(self, owner: Owner, block: int) -> bool:
        """Whether ``owner`` holds a reference to ``block``."""
        owner = check_named_owner(owner)
        return self._holds(owner, check_block(block, self._num_blocks))

    def can_allocate(self, count: int = 1) -> bool:
        """Whether ``allocate_many(count)`` would succeed (the pure check beside it)."""
        return check_int(count, "count", minimum=0) <= len(self._free)

    def is_hashed(self, block: int) -> bool:
        """Whether ``block`` carries a prefix-cache hash (``mark_hashed``, not yet handed out)."""
        return check_block(block, self._num_blocks) in self._hashed

    def mark_hashed(self, block: int) -> None:
        """Record that the held ``block`` is full and hashed (a prefix cache registered it).

        Under ``free_rule="vllm-v1"`` it then joins the back of the free queue when freed. The
        mark goes when ``allocate`` hands the block out again (vLLM evicts its hash there) or
        ``unmark_hashed`` drops it; ``reuse`` keeps it (the contents are still there).
        """
        block = check_block(block, self._num_blocks)
        if self._refcounts[block] == 0:
            raise ValueError(f"block {block} is free: only a held block can be hashed")
        self._hashed.add(block)

    def unmark_hashed(self, block: int) -> None:
        """Drop ``block``'s hash mark, if it has one (a prefix cache forgot it)."""
        self._hashed.discard(check_block(block, self._num_blocks))

    def new_owner(self) -> Owner:
        """A new holder; ids count up from 0 (they are the ``BlockTable.id`` of each table)."""
        self._owners += 1
        return Owner(self._owners - 1)

    # --- holders ------------------------------------------------------------------------
    def _holds(self, owner: Owner | None, block: int) -> bool:
        count = self._refcounts[block]
        if count == 0:
            return False
        held = self._holders[block]
        return held is owner if count == 1 else owner in held

    def _revoke(self, block: int) -> None:
        """Clear the fast flag of every owner holding ``block``."""
        held = self._holders[block]
        for owner in held if self._refcounts[block] > 1 else (held,):
            if owner is not None:
                owner.fast = False

    def _listeners_changed(self) -> None:
        for block in range(self._num_blocks):
            if self._refcounts[block]:
                self._revoke(block)

    # --- taking --------------------------------------------------------------------------
    def allocate(self, owner: Owner | None = None) -> int:
        """Take the block at the front of the free list for ``owner``; its ref count is 1."""
        if owner is not None and owner.__class__ is not Owner:
            check_owner(owner)
        free = self._free
        if not free:
            raise OutOfBlocksError(f"no free block: all {self._num_blocks} blocks are in use")
        block = free.popitem(last=False)[0]
        self._hashed.discard(block)  # new contents: the old hash (if any) is evicted
        self._refcounts[block] = 1
        self._holders[block] = owner
        if self._listeners:
            self._emit(Event("allocate", block, 1, table=None if owner is None else owner.id))
        return block

    def allocate_many(self, count: int, owner: Owner | None = None) -> list[int]:
        """``count`` blocks from the front of the free list, in order; all or nothing."""
        count = check_int(count, "count", minimum=0)
        owner = check_owner(owner)
        if count > len(self._free):
            raise OutOfBlocksError(
                f"{count} block(s) needed but only {len(self._free)} of {self._num_blocks} are free"
            )
        return [self.allocate(owner) for _ in range(count)]

    def share(self, block: int, owner: Owner | None = None) -> None:
        """One more holder for an allocated ``block`` (a fork, or a prefix-cache hit)."""
        block = check_block(block, self._num_blocks)
        owner = check_owner(owner)
        if self._refcounts[block] == 0:
            raise ValueError(f"block {block} is free and cannot be shared; reuse() takes it back")
        if owner is not None and self._holds(owner, block):
            raise ValueError(f"table {owner.id} already holds block {block}")
        self._add_holder(block, owner)

    def reuse(self, block: int, owner: Owner | None = None) -> None:
        """Take the free ``block`` off the free list with its contents intact (prefix caching)."""
        block = check_block(block, self._num_blocks)
        owner = check_owner(owner)
        if self._refcounts[block] != 0:
            raise ValueError(f"block {block} is not free (ref count {self._refcounts[block]})")
        self._take_back(block, owner)

    def hold(self, blocks: Sequence[int], owner: Owner | None = None) -> None:
        """One more reference to each of ``blocks`` (distinct): shared if held, taken back with
        its contents if free. All or nothing (a fork, or a table starting on cached blocks)."""
        owner = check_owner(owner)
        checked = check_blocks(blocks, self._num_blocks)
        if owner is not None:
            for block in checked:
                if self._holds(owner, block):
                    raise ValueError(f"table {owner.id} already holds block {block}")
        for block in checked:
            if self._refcounts[block]:
                self._add_holder(block, owner)
            else:
                self._take_back(block, owner)

    def _add_holder(self, block: int, owner: Owner | None) -> None:
        self._revoke(block)
        count = self._refcounts[block]
        held = self._holders[block]
        self._holders[block] = [held, owner] if count == 1 else [*held, owner]
        self._refcounts[block] = count + 1
        if self._listeners:
            self._emit(Event("share", block, count + 1, table=None if owner is None else owner.id))

    def _take_back(self, block: int, owner: Owner | None) -> None:
        del self._free[block]
        self._refcounts[block] = 1
        self._holders[block] = owner
        if self._listeners:
            self._emit(Event("reuse", block, 1, table=None if owner is None else owner.id))

    # --- giving back ---------------------------------------------------------------------
    def free(self, block: int, owner: Owner | None = None) -> None:
        """Drop one reference to ``block``; at 0 it joins the back of the free list.

        Without ``owner``, an anonymous reference is dropped; if the block has none, the
        reference of its most recent owner is (misuse, recorded in that owner's ``lost``).
        """
        block = check_block(block, self._num_blocks)
        owner = check_owner(owner)
        self._check_held(block, owner)
        self._release(block, owner)

    def free_many(self, blocks: Sequence[int], owner: Owner | None = None) -> None:
        """Drop one reference to each of ``blocks`` (distinct), in order; all or nothing."""
        owner = check_owner(owner)
        checked = check_blocks(blocks, self._num_blocks)
        refcounts, holders = self._refcounts, self._holders
        for block in checked:
            if refcounts[block] != 1 or holders[block] is not owner:
                self._check_held(block, owner)
        if owner is not None:
            owner.fast = False  # its last block may be among these: grant() again to write
        if self._rule == "vllm-v1":
            checked = self._v1_order(checked)
        if self._listeners or owner is None or self._rule != "fifo":
            for block in checked:
                self._release(block, owner)
            return
        free = self._free
        for block in checked:  # the common case: a table frees blocks only it holds
            if refcounts[block] == 1:
                refcounts[block] = 0
                holders[block] = None
                free[block] = None
            else:
                self._release(block, owner)

    def _v1_order(self, blocks: list[int]) -> list[int]:
        """``blocks`` in the order that, freed one at a time, builds vLLM V1's queue.

        vLLM puts the unhashed blocks that reach 0 at the front as one run, in the order
        given (``prepend_n``), and the rest at the back in the order given (``append_n``).
        Freeing the unhashed ones last and in reverse, each to the front, builds the same run.
        """
        fresh = {b for b in blocks if self._refcounts[b] == 1 and b not in self._hashed}
        return [b for b in blocks if b not in fresh] + [b for b in reversed(blocks) if b in fresh]

    def _enqueue(self, block: int) -> None:
        """Put ``block``, whose ref count just reached 0, on the free queue by the free rule."""
        self._free[block] = None
        if self._rule == "vllm-v1" and block not in self._hashed:
            self._free.move_to_end(block, last=False)  # no hash: nothing worth keeping

    def copy_on_write(self, block: int, owner: Owner) -> int:
        """Give ``owner`` a private copy of the shared ``block``: a new block from the front of
        the free list replaces ``block`` among the owner's references. Returns the new block;
        the caller's KV storage must copy ``block`` into it. OutOfBlocksError if none is free."""
        block = check_block(block, self._num_blocks)
        owner = check_named_owner(owner)
        if not self._holds(owner, block):
            raise ValueError(f"block {block} is not held by table {owner.id}")
        if self._refcounts[block] < 2:
            raise ValueError(f"block {block} is not shared (ref count 1): write it in place")
        if not self._free:
            raise OutOfBlocksError(
                f"copy-on-write of block {block} needs a free block, but all "
                f"{self._num_blocks} are in use"
            )
        dst = self.allocate(owner)
        if self._listeners:
            self._emit(Event("copy", dst, 1, table=owner.id, src=block))
        self._release(block, owner)
        return dst

    def _check_held(self, block: int, owner: Owner | None) -> None:
        if self._refcounts[block] == 0:
            raise ValueError(f"block {block} is already free")
        if owner is not None and not self._holds(owner, block):
            raise ValueError(f"block {block} is not held by table {owner.id}")

    def _release(self, block: int, owner: Owner | None) -> None:
        """Drop ``owner``'s reference to the held ``block`` (checked by the caller)."""
        count = self._refcounts[block]
        held = self._holders[block]
        loser: Any = owner
        if count == 1:
            if held is not owner:  # anonymous free of an owner's block
                loser = held
            self._holders[block] = None
            self._enqueue(block)
        else:
            if owner in held:
                held.remove(owner)
            else:  # anonymous free, no anonymous holder: the most recent owner loses it
                loser = held.pop()
            if count == 2:
                self._holders[block] = held[0]
        self._refcounts[block] = count - 1
        if loser is not owner:
            loser.lost.append(block)
            loser.fast = False
        if self._listeners:
            kind: Literal["free", "release"] = "free" if count == 1 else "release"
            self._emit(Event(kind, block, count - 1, table=None if owner is None else owner.id))

    # --- for the fast path of block tables -----------------------------------------------
    def grant(self, owner: Owner, block: int) -> bool:
        """Set ``owner.fast`` if ``owner`` alone holds ``block`` and nobody listens; returns it.

        While it stays set, the owner may write into ``block`` in place and allocate new
        blocks for itself without checking ref counts or reporting writes (see the module
        docstring for what clears it).
        """
        owner = check_named_owner(owner)
        block = check_block(block, self._num_blocks)
        owner.fast = (
            not self._listeners
            and not owner.lost
            and self._refcounts[block] == 1
            and self._holders[block] is owner
        )
        return owner.fast

    def note_writes(
        self, owner: Owner | None, blocks: Sequence[int], first: int, count: int
    ) -> None:
        """Report that ``owner`` wrote positions ``first .. first + count - 1`` of a table
        whose logical blocks are ``blocks``: one ``write`` event each, only while somebody
        listens (otherwise it returns at once and builds nothing)."""
        if not self._listeners:
            return
        owner = check_owner(owner)
        first = check_int(first, "first", minimum=0)
        count = check_int(count, "count", minimum=0)
        size = self._block_size
        if first + count > len(blocks) * size:
            raise ValueError(
                f"positions up to {first + count - 1} do not fit in {len(blocks)} block(s)"
            )
        table = None if owner is None else owner.id
        for pos in range(first, first + count):
            block = check_block(blocks[pos // size], self._num_blocks)
            self._emit(Event("write", block, self._refcounts[block], table, pos, pos % size))

    def __repr__(self) -> str:
        rule = "" if self._rule == "fifo" else f", free_rule={self._rule!r}"
        return (
            f"BlockAllocator(num_blocks={self._num_blocks}, block_size={self._block_size}"
            f"{rule}, num_free={self.num_free})"
        )


def check_free_rule(free_rule: object) -> FreeRule:
    """``free_rule`` if it is one of :data:`FREE_RULES`."""
    if not isinstance(free_rule, str):
        raise ArgumentTypeError(f"free_rule must be one of {FREE_RULES}, got {free_rule!r}")
    for rule in FREE_RULES:
        if free_rule == rule:
            return rule
    raise ValueError(f"free_rule must be one of {FREE_RULES}, got {free_rule!r}")
