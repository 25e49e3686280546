"""One pool, several cache types: hybrid models' groups, sliding windows and model-set block sizes.

As of vLLM 0.34.0 (read in its wheel): one ``BlockPool`` serves several *KV cache groups*
(layers of one attention type in groups of equal size, each with its own block table; a block
id names one page per layer of its group): :func:`group_layers` (``kv_cache_planning.py:
567-600``). A sliding-window group frees every block whose tokens all left the window and puts
the *null block* (block 0) in its place (``SlidingWindowManager.remove_skipped_blocks``):
:class:`HybridRequest`, on the real allocator. For attention/Mamba hybrids
``vllm/platforms/interface.py:1110-1119`` raises the attention block size until a page holds a
Mamba state (:func:`attention_block_for_state`); users measured 528 to 8,320 tokens
(:data:`REPORTED_BLOCK_SIZES`), and :func:`block_size_floor` measures the cost to the prefix
cache and the pool. Invariants: a group's table has one entry per ``block_size`` tokens, the
null block exactly where all its tokens left the window; every other entry is held once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pagedlab.frontier.partial_prefix import PartialPrefixCache
from pagedlab.frontier.peers import NULL_BLOCK
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache

REPORTED_BLOCK_SIZES: tuple[int, ...] = (528, 784, 1920, 2096, 8320)
"""Attention block sizes vLLM chose for hybrid models, as its issues measured them: 528
(#40696), 784 (#54607), 1,920 and 2,096 (#53749), 8,320 (#48401)."""

Kind = Literal["full", "sliding"]


@dataclass(frozen=True)
class CacheGroup:
    """One KV cache group: ``layers`` layers of one kind sharing a block table."""

    kind: Kind
    layers: int
    window: int | None = None  # sliding groups only


def group_layers(full_layers: int, sliding_layers: int, window: int) -> list[CacheGroup]:
    """vLLM 0.34's equal-size groups, full ones first (``vllm/v1/core/kv_cache_planning.py:
    567-600``): the group size is the fewest layers of a type (the most, if under 1.5 times
    the fewest); each type fills ``cdiv(count, size)`` groups, its last padded with empty
    layers, whose pages are allocated but unused."""
    full = check_int(full_layers, "full_layers", minimum=0)
    sliding = check_int(sliding_layers, "sliding_layers", minimum=0)
    window = check_int(window, "window", minimum=1)
    if full + sliding == 0:
        raise ValueError("a model needs at least one layer, got 0 full and 0 sliding")
    size = min(c for c in (full, sliding) if c)
    if max(full, sliding) < 1.5 * size:
        size = max(full, sliding)
    return [CacheGroup("full", size)] * ceil_div(full, size) + [
        CacheGroup("sliding", size, window)
    ] * ceil_div(sliding, size)


class HybridRequest:
    """One request's block tables, one per group, all on one allocator (block 0 is null)."""

    def __init__(self, allocator: BlockAllocator, groups: list[CacheGroup]) -> None:
        if not isinstance(allocator, BlockAllocator):
            raise TypeError(f"HybridRequest needs a BlockAllocator, got {allocator!r}")
        if allocator.refcount(NULL_BLOCK) == 0:
            raise ValueError("the allocator must hold block 0 as its null block (vllm_block_pool)")
        if not groups:
            raise ValueError("a request needs at least one cache group")
        self._alloc, self.groups = allocator, list(groups)
        self._owner = allocator.new_owner()
        self.tables: list[list[int]] = [[] for _ in self.groups]
        self.num_tokens = 0
        self.freed_to_null = 0  # blocks a window let go of

    def blocks_needed(self, n: int) -> int:
        """New blocks ``append(n)`` takes (before the window frees any); changes nothing."""
        n = check_int(n, "n", minimum=1)
        size = self._alloc.block_size
        return sum(ceil_div(self.num_tokens + n, size) - len(t) for t in self.tables)

    def append(self, n: int) -> None:
        """``n`` more tokens computed: new blocks for every group, then each window slides.
        All or nothing: OutOfBlocksError (from the allocator's check) changes nothing."""
        new = self.blocks_needed(n)
        if new > self._alloc.num_free:
            raise OutOfBlocksError(
                f"{n} more token(s) need {new} new block(s) across {len(self.tables)} groups, "
                f"{self._alloc.num_free} free"
            )
        size = self._alloc.block_size
        self.num_tokens += n
        for table in self.tables:
            while len(table) < ceil_div(self.num_tokens, size):
                table.append(self._alloc.allocate(self._owner))
        self._slide()

    def _slide(self) -> None:
        size = self._alloc.block_size
        for group, table in zip(self.groups, self.tables, strict=True):
            if group.window is None:
                continue
            skipped = max(0, self.num_tokens - group.window + 1) // size
            for i in range(skipped):
                if table[i] != NULL_BLOCK:
                    self._alloc.free(table[i], self._owner)
                    table[i] = NULL_BLOCK
                    self.freed_to_null += 1

    @property
    def held_blocks(self) -> int:
        return sum(1 for table in self.tables for b in table if b != NULL_BLOCK)

    def free(self) -> None:
        blocks = [b for table in self.tables for b in table[::-1] if b != NULL_BLOCK]
        self._alloc.free_many(blocks, self._owner)
        self.tables = [[] for _ in self.groups]


def attention_block_for_state(
    state_bytes: int, attn_bytes_per_token: int, multiple: int = 16
) -> int:
    """The smallest multiple of ``multiple`` tokens whose attention page holds ``state_bytes``
    (a Mamba layer's state): the block size a hybrid model forces on every attention layer."""
    state = check_int(state_bytes, "state_bytes", minimum=1)
    per_token = check_int(attn_bytes_per_token, "attn_bytes_per_token", minimum=1)
    multiple = check_int(multiple, "multiple", minimum=1)
    return ceil_div(ceil_div(state, per_token), multiple) * multiple


@dataclass(frozen=True)
class FloorRow:
    """One block size: the pool, the prefix-cache hit rate, and one short request's share."""

    block_size: int
    pool_blocks: int
    hit_rate: float  # full blocks only (vLLM's default)
    hit_rate_with_unit: float  # with prefix_match_unit
    pinned_share: float  # of the pool, held by one short request


def block_size_floor(
    block_sizes: tuple[int, ...] = (16, *REPORTED_BLOCK_SIZES),
    pool_tokens: int = 3 * 8320,
    shared: int = 400,
    suffix: int = 100,
    requests: int = 8,
    short: int = 10,
    unit: int = 16,
) -> list[FloorRow]:
    """Per block size, on real allocators: ``requests`` prompts of a ``shared`` system prompt
    plus a private ``suffix``, run one after another through a :class:`PrefixCache` (and a
    :class:`PartialPrefixCache` at ``prefix_match_unit=unit``); and the pool share a ``short``
    prompt pins. A block size whose pool holds fewer than 2 blocks is refused."""
    rows = []
    prompts = [list(range(shared)) + [10_000 + 1_000 * r + i for i in range(suffix)]
               for r in range(check_int(requests, "requests", minimum=1))]  # fmt: skip
    query = sum(len(p) for p in prompts)
    for size in block_sizes:
        size = check_int(size, "block size", minimum=1)
        blocks = check_int(pool_tokens, "pool_tokens", minimum=1) // size
        if blocks < 2:
            raise ValueError(f"a pool of {pool_tokens} tokens holds {blocks} block(s) of {size}")
        cache = PrefixCache(BlockAllocator(blocks, size))
        for prompt in prompts:
            cache.admit(prompt).table.free()
        partial = PartialPrefixCache(BlockAllocator(blocks, size), prefix_match_unit=unit)
        hits = 0
        for prompt in prompts:
            admission = partial.admit(prompt)
            partial.finish_step()
            partial.free(admission.request)
            hits += admission.hit_tokens
        table = BlockTable(BlockAllocator(blocks, size))  # one short request's blocks
        table.append_tokens(check_int(short, "short", minimum=1))
        share = len(table.blocks) / blocks
        rows.append(FloorRow(size, blocks, cache.stats.hit_rate, hits / query, share))
    return rows
