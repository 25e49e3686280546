"""Prefix caching: full KV blocks found again by the content of everything before them.

Each *full* block gets a hash chained over its prefix: ``hash(i) = sha256(hash(i - 1) ||
token ids of block i)``, truncated to ``hash_bytes``; a new request starts on the cached blocks
of its longest cached full-block prefix (``BlockTable.hold_prefix``) and computes the rest.
Rules (the usual causes of a "low hit rate"):

- only full blocks are cached; the last prompt token is always computed (its logits pick the
  first output token), so at most ``(len(prompt) - 1) // block_size`` blocks hit, and a
  block-aligned prompt entirely cached recomputes its whole last block;
- a hit compares token ids and the cached parent block, so a hash collision is a miss
  (counted), never wrong KV: a hit walks the very chain of blocks its prefix was computed in;
- a block may be registered once its K/V is *scheduled* (vLLM's ``allocate_slots``); a
  scheduler that takes the computation back calls :meth:`PrefixCache.forget`;
- a freed block stays findable until the allocator hands it out again (its ``allocate``
  event): then it is evicted with the cached blocks computed after it. Cached blocks are
  marked in the allocator (``mark_hashed``: the back of the free queue under "vllm-v1");
  a hit on a free block takes it back (``reuse``). A duplicate (a full block whose hash is
  cached under another block) is marked too, as vLLM's ``BlockHashToBlockMap`` keeps
  duplicates (``vllm/v1/core/block_pool.py``, 0.34.0), but never found.

Invariants (tests/memory/test_prefix_cache.py, test_sharing_properties.py): every cached block
holds the token ids it is cached under; a hash maps to exactly one block and back; no cached
block was handed out since it was cached. Not handled: extra keys, per-layer caches, reset.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pagedlab.ground.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, blocks_to_append
from pagedlab.memory.events import Event
from pagedlab.memory.owner import items_of

CacheListener = Callable[[Literal["stored", "evicted"], int, str], None]
"""``listener(kind, block, block_hash)``: see :meth:`PrefixCache.listen`."""

ROOT_HASH = ""
"""The parent hash of a sequence's first block."""


MIN_HASH_BYTES, MAX_HASH_BYTES = 1, 32
"""``hash_bytes`` bounds: at least one byte (0 would make every hash equal), at most sha256's 32."""


def block_hashes(tokens: Sequence[int], block_size: int, hash_bytes: int = 8) -> list[str]:
    """Chained hashes (hex) of the full blocks of ``tokens``; a partial tail gets none."""
    block_size = check_int(block_size, "block_size", minimum=1)
    hash_bytes = _check_hash_bytes(hash_bytes)
    ids = _token_ids(tokens)
    hashes: list[str] = []
    parent = ROOT_HASH
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = _chain(parent, ids[start : start + block_size], hash_bytes)
        hashes.append(parent)
    return hashes


def chain_hash(parent: str, token_ids: Sequence[int], hash_bytes: int = 8) -> str:
    """sha256 of the parent hash and the block's token ids (int64 little-endian), as hex.

    Token ids must fit in 64 bits (signed): each is packed into exactly 8 bytes, so two distinct
    blocks of ids never share a payload (truncating a larger id would make ids collide).
    """
    if not isinstance(parent, str):
        raise TypeError(f"parent must be a hex hash string, got {parent!r}")
    return _chain(parent, _token_ids(token_ids), _check_hash_bytes(hash_bytes))


def _chain(parent: str, ids: list[int], hash_bytes: int) -> str:
    payload = parent.encode() + struct.pack(f"<{len(ids)}q", *ids)
    return hashlib.sha256(payload).hexdigest()[: 2 * hash_bytes]


def _check_hash_bytes(hash_bytes: object) -> int:
    number = check_int(hash_bytes, "hash_bytes", minimum=MIN_HASH_BYTES)
    if number > MAX_HASH_BYTES:
        raise ValueError(f"hash_bytes must be <= {MAX_HASH_BYTES} (sha256), got {number}")
    return number


def _token_ids(tokens: object) -> list[int]:
    ids = [check_int(t, "token id") for t in items_of(tokens, "tokens", "integer token ids")]
    for t in ids:
        if not -(2**63) <= t < 2**63:
            raise ValueError(f"token id {t} does not fit in 64 bits")
    return ids


@dataclass
class CacheStats:
    """Counters since the cache was made. Hit rate is in tokens, like vLLM's metric."""

    requests: int = 0
    query_tokens: int = 0  # prompt tokens of every admitted request
    hit_tokens: int = 0  # of those, tokens whose KV came from the cache
    hit_blocks: int = 0
    miss_blocks: int = 0  # full blocks that could have hit (within the limit) but did not
    collisions: int = 0  # hash found, token ids differed: counted as a miss
    evictions: int = 0  # cached blocks forgotten because the allocator handed them out

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


@dataclass(frozen=True)
class Admission:
    """One request's lookup: what hit, what was computed, and why the rest was not cached."""

    table: BlockTable
    hit_blocks: list[int]  # physical blocks the table starts on
    miss_blocks: int  # cacheable full blocks (within the limit) that were not found
    computed_tokens: int  # tokens whose KV this request computes
    partial_tokens: int  # tokens in a partly filled last block: never cacheable
    recomputed_last_block: bool  # the prompt was block-aligned and fully cached

    @property
    def hit_tokens(self) -> int:
        return len(self.hit_blocks) * self.table.block_size


class PrefixCache:
    """Content-hashed full blocks of ``allocator``, shared across requests."""

    def __init__(self, allocator: BlockAllocator, hash_bytes: int = 8) -> None:
        if not isinstance(allocator, BlockAllocator):
            raise TypeError(f"PrefixCache needs a BlockAllocator, got {allocator!r}")
        self._hash_bytes = _check_hash_bytes(hash_bytes)
        self._allocator = allocator
        self._stats = CacheStats()
        self._block_of: dict[str, int] = {}  # hash -> physical block
        self._hash_of: dict[int, str] = {}  # physical block -> hash
        self._tokens_of: dict[int, tuple[int, ...]] = {}
        self._parent_of: dict[int, int | None] = {}  # the cached block it was computed after
        self._children: dict[int, set[int]] = {}  # cached blocks computed after it
        self._duplicates: set[int] = set()  # marked, never found: see the module docstring
        self._listeners: list[CacheListener] = []
        self._unsubscribe: Callable[[], None] | None = allocator.subscribe(
            self._evict, ("allocate",)
        )

    def listen(self, listener: CacheListener) -> None:
        """Call ``listener(kind, block, block_hash)`` after every change to what is cached:
        ``"stored"`` once ``block`` is cached under ``block_hash`` (``register``, ``admit``),
        ``"evicted"`` once it is forgotten (handed out again, ``forget``, ``close``, or computed
        after a block forgotten). Called after the change: the cache already says it."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        self._listeners.append(listener)

    @property
    def allocator(self) -> BlockAllocator:
        return self._allocator

    @property
    def block_size(self) -> int:
        return self._allocator.block_size

    @property
    def hash_bytes(self) -> int:
        return self._hash_bytes

    @property
    def stats(self) -> CacheStats:
        """The counters (one object for the cache's life; read-only attribute)."""
        return self._stats

    def _evict(self, event: Event) -> None:  # an ``allocate``: the block gets new contents
        if event.block in self._duplicates:
            self._duplicates.discard(event.block)
            self._stats.evictions += 1
        elif event.block in self._hash_of:
            self._stats.evictions += self._forget(event.block)

    def _forget(self, block: int) -> int:
        """Forget ``block`` and the cached blocks computed after it; returns how many."""
        parent = self._parent_of[block]
        if parent is not None:
            self._children[parent].discard(block)
        stack, forgotten = [block], 0
        while stack:
            b = stack.pop()
            self._allocator.unmark_hashed(b)
            block_hash = self._hash_of.pop(b)
            del self._block_of[block_hash], self._tokens_of[b], self._parent_of[b]
            stack.extend(self._children.pop(b, ()))
            forgotten += 1
            for listener in self._listeners:
                listener("evicted", b, block_hash)
        return forgotten

    def close(self) -> None:
        """Stop listening to the allocator and forget every cached block (it could no longer
        see them handed out); later lookups, admissions and registrations are refused."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
            for block in [b for b, parent in self._parent_of.items() if parent is None]:
                self._forget(block)  # a root and every block computed after it
            for block in self._duplicates:
                self._allocator.unmark_hashed(block)
            self._duplicates.clear()

    def forget(self, block: int) -> int:
        """Forget cached ``block`` and the cached blocks computed after it; returns how many
        (0 if it is not cached). For a block registered when its K/V was scheduled, whose
        computation was then taken back (a preemption in the same step)."""
        self._check_open("forget a block")
        block = check_int(block, "block", 0, self._allocator.num_blocks - 1)
        return self._forget(block) if block in self._hash_of else 0

    def _check_open(self, action: str) -> None:
        if self._unsubscribe is None:
            raise ValueError(f"cannot {action}: the prefix cache was closed")

    # --- what is cached ---------------------------------------------------------------------
    @property
    def duplicates(self) -> frozenset[int]:
        """Marked duplicates: hashed in the allocator (freed to the back), never found."""
        return frozenset(self._duplicates)

    def cached_blocks(self) -> dict[int, str]:
        """Physical block -> hash of every cached block (a copy)."""
        return dict(self._hash_of)

    def tokens_of(self, block: int) -> tuple[int, ...]:
        """The token ids block ``block`` is cached with; ValueError if it is not cached."""
        block = check_int(block, "block")
        if block not in self._tokens_of:
            raise ValueError(f"block {block} is not cached (evicted or never stored)")
        return self._tokens_of[block]

    def hashes(self, tokens: Sequence[int]) -> list[str]:
        return block_hashes(tokens, self.block_size, self._hash_bytes)

    def lookup(self, tokens: Sequence[int]) -> tuple[list[int], int]:
        """(cached blocks of the longest verified prefix, at most ``(len(tokens) - 1) //
        block_size``, collisions met); changes nothing."""
        self._check_open("look up a prefix")
        ids = _token_ids(tokens)
        size, limit = self.block_size, (len(ids) - 1) // self.block_size
        found: list[int] = []
        parent: int | None = None
        for i, block_hash in enumerate(self.hashes(ids[: limit * size])):
            block = self._block_of.get(block_hash)
            if block is None:
                break
            if (
                self._tokens_of[block] != tuple(ids[i * size : (i + 1) * size])
                or self._parent_of[block] != parent
            ):
                return found, 1  # same hash, other tokens or prefix: a collision, a miss
            found.append(block)
            parent = block
        return found, 0

    # --- requests -----------------------------------------------------------------------------
    def blocks_to_admit(self, tokens: Sequence[int]) -> int:
        """Free blocks ``admit(tokens)`` needs now: cached free blocks it takes back, plus new
        blocks for the rest (``blocks_to_append``); changes nothing."""
        return self._plan(tokens)[2]

    def _plan(self, tokens: Sequence[int]) -> tuple[list[int], tuple[list[int], int], int]:
        self._check_open("admit a request")
        ids = _token_ids(tokens)
        if not ids:
            raise ValueError("tokens must hold at least one token id, got none")
        hits, collisions = self.lookup(ids)
        held = len(hits) * self.block_size
        taken_back = sum(1 for b in hits if self._allocator.refcount(b) == 0)
        needed = taken_back + blocks_to_append(held, len(ids) - held, self.block_size)
        return ids, (hits, collisions), needed

    def admit(self, tokens: Sequence[int]) -> Admission:
        """A new table for prompt ``tokens``: cached prefix held, the rest appended, full
        blocks then registered. Atomic (ValueError / OutOfBlocksError change nothing)."""
        ids, (hits, collisions), needed = self._plan(tokens)
        size, alloc = self.block_size, self._allocator
        if needed > alloc.num_free:
            raise OutOfBlocksError(
                f"admitting {len(ids)} tokens needs {needed} free block(s), "
                f"but only {alloc.num_free} of {alloc.num_blocks} are free"
            )
        table = BlockTable(alloc)
        table.hold_prefix(hits)  # before appending, so the new blocks cannot evict a hit
        table.append_tokens(len(ids) - len(hits) * size)
        self.register(table, ids)

        limit = (len(ids) - 1) // size
        admission = Admission(
            table=table,
            hit_blocks=hits,
            miss_blocks=limit - len(hits),
            computed_tokens=len(ids) - len(hits) * size,
            partial_tokens=len(ids) % size,
            recomputed_last_block=len(ids) % size == 0 and len(hits) == limit and limit > 0,
        )
        s = self._stats
        s.requests += 1
        s.query_tokens += len(ids)
        s.hit_tokens += admission.hit_tokens
        s.hit_blocks += len(hits)
        s.miss_blocks += admission.miss_blocks
        s.collisions += collisions
        return admission

    def register(self, table: BlockTable, tokens: Sequence[int]) -> int:
        """Cache the full blocks of ``table`` whose KV holds ``tokens`` (its token ids so far;
        a hash cached under another block: a duplicate); returns how many were newly cached."""
        self._check_open("register a table")
        if not isinstance(table, BlockTable):
            raise TypeError(f"table must be a BlockTable, got {table!r}")
        ids = _token_ids(tokens)
        if table.allocator is not self._allocator:
            raise ValueError(f"table {table.id} belongs to another allocator")
        table.check_usable("register")
        if len(ids) != table.num_tokens:
            raise ValueError(
                f"tokens has {len(ids)} ids but table {table.id} holds {table.num_tokens}"
            )
        added, size = 0, self.block_size
        parent: int | None = None  # the cached block holding the same prefix as the table's
        for i, (block, block_hash) in enumerate(zip(table.blocks, self.hashes(ids), strict=False)):
            tokens_i = tuple(ids[i * size : (i + 1) * size])
            cached = self._block_of.get(block_hash)
            if cached is not None:
                if self._tokens_of[cached] != tokens_i or self._parent_of[cached] != parent:
                    break  # a collision: this prefix cannot be cached under its hash
                parent = cached  # the same prefix is cached already (in this block or another)
                if block != cached and block not in self._hash_of:
                    self._duplicates.add(block)
                    self._allocator.mark_hashed(block)
                continue
            if block in self._hash_of:
                break  # the block is cached for another prefix
            self._block_of[block_hash] = block
            self._hash_of[block] = block_hash
            self._allocator.mark_hashed(block)
            self._tokens_of[block] = tokens_i
            self._parent_of[block] = parent
            if parent is not None:
                self._children.setdefault(parent, set()).add(block)
            added += 1
            parent = block
            for listener in self._listeners:
                listener("stored", block, block_hash)
        return added
