"""Every example the notebooks, tests, benchmarks and figures stage, in one home.

Each scene is built with the real code (allocator, block tables, sharing, prefix cache,
the one batch builder) and returns fresh objects, so callers may mutate what they get.
This module imports the control and data planes only: never pictures or explorers. The
scenes that need no torch live in :mod:`pagedlab.control_scenes` (re-exported here).

- the seed's history: :func:`seed_history` (a pool whose free list starts 4, 1, 0), the
  :data:`LAYOUTS` of the allocation explorer and :func:`make_allocator` for each;
- the seed's sequence at any block size, length and layout, with the kernel's output
  (:func:`seed_state`, :class:`SeedState`);
- Fig. 3's external fragmentation (:func:`fragmented_pool`): holes between running requests;
- Fig. 8 (:func:`figure8_prompt`, :data:`FIG8_WORDS`, :func:`figure8`): two samples of one
  prompt, copy-on-write of the shared block;
- Fig. 9 (:func:`figure9_before`, :data:`FIG9_STEP`): four beam candidates and the step;
- the prefix-cache scene (:data:`SYSTEM_PROMPT`, :func:`prefix_tokens`);
- notebook 4's batch in a shuffled pool (:func:`kernel_batch`);
- notebook 9's serving scene (:data:`SCHEDULER_REQUESTS`, :func:`scheduler_scene`): five
  requests that do not all fit a 16-block pool, over real K/V.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

import torch

from pagedlab.attention.batch import Batch, grow_batch
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor, paged_attention
from pagedlab.attention.swap import HostPool, SwappingKV
from pagedlab.control_scenes import (  # the torch-free scenes, re-exported
    FIG8_ORDER,
    FIG8_WORDS,
    FIG9_HISTORY,
    FIG9_STEP,
    KV_BYTES_PER_SLOT,
    LAYOUTS,
    POOL_BLOCKS,
    SCHEDULER_POOL_BLOCKS,
    SCHEDULER_REQUESTS,
    SHUFFLE_SEED,
    SYSTEM_PROMPT,
    TABLE_ENTRY_BYTES,
    SeedState,
    figure8,
    figure8_prompt,
    figure9_before,
    fragmented_pool,
    make_allocator,
    prefix_tokens,
    seed_history,
    seed_table,
)
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.scheduler import Scheduler

# --- the seed with the kernel's output ----------------------------------------------------


def seed_state(
    block_size: int, length: int, layout: str = LAYOUTS[1], run_kernel: bool = True
) -> SeedState:
    """The seed's sequence for one setting (pure); see :class:`SeedState`.

    With ``run_kernel=False`` the output is left None; :func:`with_kernel_output` fills it in.
    """
    state = seed_table(block_size, length, layout)
    return with_kernel_output(state) if run_kernel else state


def with_kernel_output(state: SeedState) -> SeedState:
    """``state`` with the Triton kernel's output on the seed's head (none if impossible).

    Memoised per (block size, layout, slots); each (block size, layout) keeps one KV cache
    into which only not-yet-written positions are written (appending never moves a
    position). Slots past the length may hold values of a longer visit; the kernel never
    reads past ``seq_len``, as in a real server.
    """
    if state.problem is not None or state.output is not None:
        return state
    slots, blocks = tuple(state.table.slot_mapping()), tuple(state.table.blocks)
    return replace(state, output=_seed_output(state.block_size, state.layout, slots, blocks))


@lru_cache(maxsize=64)
def _seed_cache(block_size: int, layout: str) -> tuple[PagedKVCache, dict[int, int]]:
    return PagedKVCache(POOL_BLOCKS, block_size, 1, 1), {}  # cache, position -> slot written


@lru_cache(maxsize=4096)
def _seed_output(
    block_size: int, layout: str, slots: tuple[int, ...], blocks: tuple[int, ...]
) -> float:
    cache, written = _seed_cache(block_size, layout)
    todo = [p for p, s in enumerate(slots) if written.get(p) != s]
    device = cache.device
    if todo:
        k = torch.zeros(len(todo), 1, 1, device=device)
        v = torch.tensor([p + 1.0 for p in todo], device=device).reshape(-1, 1, 1)
        cache.write([slots[p] for p in todo], k, v)  # position p holds the value p + 1
        written.update((p, slots[p]) for p in todo)
    out = paged_attention(
        torch.ones(1, 1, 1, device=device),
        cache.key,
        cache.value,
        block_tables_tensor([list(blocks)], device=device),
        torch.tensor([len(slots)], dtype=torch.int32, device=device),
    )
    return float(out.item())


# --- the kernel at work (notebook 4) ----------------------------------------------------------

KERNEL_LENGTHS = (5, 17, 30)


def kernel_batch(
    lengths: Sequence[int] = KERNEL_LENGTHS,
    block_size: int = 4,
    head_dim: int = 16,
    seed: int = 0,
    dtype: torch.dtype = torch.float16,
) -> Batch:
    """Random fp16 q/K/V for ``lengths`` in a pool that hands out blocks in random order.

    8 query heads over 2 kv heads (grouped-query attention); the pool has two blocks more
    than the batch needs (they stay free), so no sequence's pages are adjacent by design.
    """
    return grow_batch(
        lengths, block_size, num_heads=8, num_kv_heads=2, head_dim=head_dim, seed=seed,
        dtype=dtype, shuffled=True, spare_blocks=2,
    )  # fmt: skip


# --- notebook 9: a tiny serving engine under memory pressure (§4.5) --------------------------

# --- notebook 9: a tiny serving engine under memory pressure (§4.5) --------------------------


def scheduler_scene(
    mode: str = "swap",
    block_size: int = 4,
    token_budget: int | None = None,
    chunked_prefill: bool = False,
) -> tuple[Scheduler, SwappingKV]:
    """The scene queued and not yet stepped: a scheduler over real K/V (one head of dim 2,
    on the CPU) with a host pool as large as the device pool."""
    device = PagedKVCache(SCHEDULER_POOL_BLOCKS, block_size, 1, 2, device="cpu")
    store = SwappingKV(device, HostPool.like(device))
    scheduler = Scheduler(
        BlockAllocator(SCHEDULER_POOL_BLOCKS, block_size),
        mode=mode,
        token_budget=token_budget,
        chunked_prefill=chunked_prefill,
        host=store.host.allocator,
        kv=store,
    )
    for request in SCHEDULER_REQUESTS:
        scheduler.add(request)
    return scheduler, store


__all__ = [
    "FIG8_ORDER",
    "FIG8_WORDS",
    "FIG9_HISTORY",
    "FIG9_STEP",
    "KERNEL_LENGTHS",
    "KV_BYTES_PER_SLOT",
    "LAYOUTS",
    "POOL_BLOCKS",
    "SCHEDULER_POOL_BLOCKS",
    "SCHEDULER_REQUESTS",
    "SHUFFLE_SEED",
    "SYSTEM_PROMPT",
    "SeedState",
    "TABLE_ENTRY_BYTES",
    "figure8",
    "figure8_prompt",
    "figure9_before",
    "fragmented_pool",
    "kernel_batch",
    "make_allocator",
    "prefix_tokens",
    "scheduler_scene",
    "seed_history",
    "seed_state",
    "seed_table",
    "with_kernel_output",
]
