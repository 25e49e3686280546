"""Partial prefix hits with copy-on-write, as vLLM 0.34 does for hybrid models only.

vLLM 0.34.0 matches prompts ``prefix_match_unit`` tokens at a time (``vllm/config/cache.py:
202-215``, the hash block size, dividing every group's block size), so a hit may end *inside*
a block, **only** for a hybrid model with a Mamba group in "align" mode
(``kv_cache_coordinator.py:694-702``, ``kv_cache_utils.py:758-797``); an ordinary model's
``UnitaryKVCacheCoordinator`` asserts ``hash_block_size == block_size``
(``kv_cache_coordinator.py:573``). The block a partial hit ends inside holds another request's
tokens after the shared ones, so ``_apply_cow`` (``single_type_kv_cache_manager.py:460-480``)
gives the request a private copy, queues ``KVCacheBlockCopy(src, dst)`` for the worker, and
keeps *both* blocks referenced until the copy has run. (The attention side only: the Mamba
state at the boundary is not modelled.)

Here, on a real :class:`BlockAllocator`: every ``unit`` boundary of an admitted prompt is an
entry (a chained hash of the tokens up to it -> the block holding the token before it).
:meth:`PartialPrefixCache.admit` holds the full blocks of the longest match and, if it ends
inside a block, takes that block as a hit and moves the request onto a private copy
(``allocator.copy_on_write``); :meth:`finish_step` is the worker having run the copies.
``prefix_match_unit=None``: the block size (vLLM's default). The last prompt token is always
computed. Invariants: an entry's block holds the tokens its key was made from (an
``allocate`` event forgets its entries); a refused call changes nothing; between
:meth:`admit` and :meth:`finish_step` every pending copy's ``src`` and ``dst`` are held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.events import Event
from pagedlab.memory.owner import Owner
from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash


class BlockCopy(NamedTuple):
    """One copy the worker runs before the step's forward (vLLM's ``KVCacheBlockCopy``)."""

    src: int
    dst: int


@dataclass(frozen=True)
class PartialAdmission:
    """One request started on the cache: its blocks, what hit, and the copy it needs."""

    request: int  # the owner id its blocks are held under
    blocks: list[int]
    hit_tokens: int  # a multiple of prefix_match_unit, at most len(tokens) - 1
    shared_blocks: list[int]  # full blocks held as hits (shared, no copy)
    copy: BlockCopy | None  # the partly matched block, copied into the request's own
    computed_tokens: int


class PartialPrefixCache:
    """Prefix hits at every ``prefix_match_unit`` tokens over a real allocator's blocks."""

    def __init__(self, allocator: BlockAllocator, prefix_match_unit: int | None = None) -> None:
        if not isinstance(allocator, BlockAllocator):
            raise TypeError(f"PartialPrefixCache needs a BlockAllocator, got {allocator!r}")
        size = allocator.block_size
        unit = size if prefix_match_unit is None else check_int(
            prefix_match_unit, "prefix_match_unit", minimum=1, maximum=size
        )  # fmt: skip
        if size % unit:
            raise ValueError(
                f"prefix_match_unit {unit} must divide the block size {size} (as vLLM requires)"
            )
        self._alloc, self._unit = allocator, unit
        self._entry: dict[str, int] = {}  # key at a boundary -> block holding the token before it
        self._keys: dict[int, set[str]] = {}  # block -> its keys
        self._owners: dict[int, Owner] = {}  # request -> owner
        self._tables: dict[int, list[int]] = {}
        self._pending: list[tuple[Owner, BlockCopy]] = []
        allocator.subscribe(self._forget, ("allocate",))

    @property
    def prefix_match_unit(self) -> int:
        return self._unit

    @property
    def pending_copies(self) -> list[BlockCopy]:
        """Copies queued for the worker this step (``take_kv_cache_block_copies``)."""
        return [copy for _, copy in self._pending]

    def _forget(self, event: Event) -> None:  # the block gets new contents
        for key in self._keys.pop(event.block, ()):
            del self._entry[key]

    def _keys_of(self, ids: list[int], upto: int) -> list[str]:
        keys, parent = [], ROOT_HASH
        for end in range(self._unit, upto + 1, self._unit):
            parent = chain_hash(parent, ids[end - self._unit : end])
            keys.append(parent)
        return keys

    def lookup(self, tokens: Sequence[int]) -> tuple[int, list[int]]:
        """(matched tokens, the blocks they lie in); changes nothing. A match is a multiple
        of the unit, at most ``len(tokens) - 1``, and reads each logical block from one block."""
        ids = [check_int(t, "token id") for t in tokens]
        if not ids:
            raise ValueError("tokens must hold at least one token id, got none")
        size, matched = self._alloc.block_size, 0
        blocks: list[int] = []
        for k, key in enumerate(self._keys_of(ids, len(ids) - 1), start=1):
            block = self._entry.get(key)
            end = k * self._unit
            index = (end - 1) // size
            if block is None or (index < len(blocks) and blocks[index] != block):
                break
            if index == len(blocks):
                blocks.append(block)
            matched = end
        return matched, blocks

    def blocks_to_admit(self, tokens: Sequence[int]) -> int:
        """Free blocks :meth:`admit` needs: new ones plus hits it takes back off the queue."""
        matched, blocks = self.lookup(tokens)
        taken_back = sum(1 for b in blocks if self._alloc.refcount(b) == 0)
        size = self._alloc.block_size
        return taken_back + ceil_div(len(tokens), size) - matched // size

    def admit(self, tokens: Sequence[int]) -> PartialAdmission:
        """Start a request on its longest match; atomic (OutOfBlocksError changes nothing)."""
        ids = [check_int(t, "token id") for t in tokens]
        matched, hits = self.lookup(ids)
        needed = self.blocks_to_admit(ids)
        if needed > self._alloc.num_free:
            raise OutOfBlocksError(
                f"admitting {len(ids)} tokens needs {needed} free block(s), "
                f"{self._alloc.num_free} free"
            )
        size, alloc = self._alloc.block_size, self._alloc
        owner = alloc.new_owner()
        full = matched // size
        alloc.hold(hits, owner)  # every matched block is a hit: shared, or taken back
        blocks, copy = list(hits[:full]), None
        if matched % size:
            src = hits[full]
            keeper = alloc.new_owner()
            alloc.share(src, keeper)  # the source keeps the hit's reference until the copy ran
            dst = alloc.copy_on_write(src, owner)  # the request moves onto a private block
            alloc.share(dst, keeper)  # the copy's extra reference
            copy = BlockCopy(src, dst)
            self._pending.append((keeper, copy))
            blocks.append(dst)
        while len(blocks) * size < len(ids):
            blocks.append(alloc.allocate(owner))
        self._owners[owner.id], self._tables[owner.id] = owner, blocks
        self._register(ids, blocks)
        return PartialAdmission(owner.id, list(blocks), matched, list(hits[:full]), copy,
                                len(ids) - matched)  # fmt: skip

    def _register(self, ids: list[int], blocks: list[int]) -> None:
        """An entry at every unit boundary of ``ids`` not cached yet (``cache_partial_block``)."""
        for k, key in enumerate(self._keys_of(ids, len(ids)), start=1):
            if key not in self._entry:
                block = blocks[(k * self._unit - 1) // self._alloc.block_size]
                self._entry[key] = block
                self._keys.setdefault(block, set()).add(key)

    def finish_step(self) -> list[BlockCopy]:
        """The worker ran this step's copies: drop the references kept for them."""
        done = self.pending_copies
        for keeper, copy in self._pending:
            self._alloc.free_many([copy.dst, copy.src], keeper)
        self._pending = []
        return done

    def free(self, request: int) -> None:
        """The request finished: its blocks go back, last first (entries stay until reuse)."""
        if request not in self._owners:
            raise ValueError(
                f"request {request!r} is not admitted here (known: {sorted(self._owners)})"
            )
        self._alloc.free_many(self._tables.pop(request)[::-1], self._owners.pop(request))
