"""Every example the notebooks, tests, benchmarks and figures stage, in one home, built with the
real code and returned fresh (callers may mutate it). Imports the control and data planes only,
never pictures or explorers; re-exports the torch-free scenes of
:mod:`pagedlab.pictures.control_scenes` and adds those with torch (the kernel's output, notebook 4's
batch, notebook 8's mixed step, notebook 7's buddy frames, notebook 9's scheduler over real K/V).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from pagedlab.attention.batch import Batch, grow_batch
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.mixed_step import MixedStep, StepRequest, mixed_step
from pagedlab.attention.ops import block_tables_tensor, paged_attention
from pagedlab.attention.swap import HostPool, SwappingKV
from pagedlab.ground.checks import check_int
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.scheduler import Scheduler
from pagedlab.pictures.control_scenes import (  # the torch-free scenes, re-exported
    FIG8_WORDS,
    FIG9_STEP,
    LAYOUTS,
    POOL_BLOCKS,
    SCHEDULER_POOL_BLOCKS,
    SCHEDULER_REQUESTS,
    SYSTEM_PROMPT,
    ExampleState,
    eviction_scene,
    example_history,
    example_table,
    figure8,
    figure8_prompt,
    figure9_before,
    fragmented_pool,
    lru_scene,
    make_allocator,
    prefix_tokens,
    scheduler_control_scene,
)
from pagedlab.simulate.contiguous import BuddyAllocator
from pagedlab.simulate.policies import reserved_slots


# --- the example with the kernel's output ----------------------------------------------------
def example_state(
    block_size: int, length: int, layout: str = LAYOUTS[1], run_kernel: bool = True
) -> ExampleState:
    """The example's sequence for one setting (pure), with the kernel's output unless
    ``run_kernel=False`` (:func:`with_kernel_output` fills it in later)."""
    state = example_table(block_size, length, layout)
    return with_kernel_output(state) if run_kernel else state


def with_kernel_output(state: ExampleState) -> ExampleState:
    """``state`` with the Triton kernel's output on the example's head, read through
    ``state.table`` (the table the slider built); memoised per (block size, layout, length)."""
    if state.problem is not None or state.output is not None:
        return state
    key = (state.block_size, state.layout, state.table.num_tokens)
    if key not in _OUTPUTS:
        _OUTPUTS[key] = _example_output(state.table)
    return replace(state, output=_OUTPUTS[key])


_OUTPUTS: dict[tuple[int, str, int], float] = {}


def _example_output(table: BlockTable) -> float:
    """The kernel's output for the example over ``table``: keys 0, values ``p + 1`` written at
    the table's slots in a fresh cache of one head of dimension 1, query 1."""
    alloc, length = table.allocator, table.num_tokens
    cache = PagedKVCache(alloc.num_blocks, alloc.block_size, 1, 1)
    values = torch.arange(1.0, length + 1, device=cache.device).reshape(-1, 1, 1)
    cache.write(table.slot_mapping(), torch.zeros_like(values), values)
    return kernel_output(table.blocks, length, cache)


def kernel_output(blocks: Sequence[int], length: int, cache: PagedKVCache) -> float:
    """The Triton kernel's output for one sequence of a scalar-head cache: query 1."""
    where = cache.key.device
    table = block_tables_tensor([list(blocks)], device=where)
    lens = torch.tensor([length], dtype=torch.int32, device=where)
    query = torch.ones(1, 1, 1, device=where)
    return float(paged_attention(query, cache.key, cache.value, table, lens).item())


# --- the kernel at work (notebook 4) ----------------------------------------------------------

KERNEL_LENGTHS = (5, 17, 30)


def kernel_batch(
    lengths: Sequence[int] = KERNEL_LENGTHS,
    block_size: int = 4,
    head_dim: int = 16,
    seed: int = 0,
    dtype: torch.dtype = torch.float16,
) -> Batch:
    """Random fp16 q/K/V for ``lengths`` (8 query heads over 2 kv heads) in a pool of two
    spare blocks that hands out blocks in a seeded random order: pages adjacent by chance only."""
    return grow_batch(
        lengths, block_size, num_heads=8, num_kv_heads=2, head_dim=head_dim, seed=seed,
        dtype=dtype, shuffled=True, spare_blocks=2,
    )  # fmt: skip


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
    args = (mode, block_size, token_budget, chunked_prefill, store.host.allocator, store)
    return scheduler_control_scene(*args), store


__all__ = [
    "FIG8_WORDS",
    "FIG9_STEP",
    "KERNEL_LENGTHS",
    "LAYOUTS",
    "POOL_BLOCKS",
    "SCHEDULER_POOL_BLOCKS",
    "SCHEDULER_REQUESTS",
    "SYSTEM_PROMPT",
    "ExampleState",
    "figure8",
    "figure8_prompt",
    "figure9_before",
    "fragmented_pool",
    "kernel_batch",
    "kernel_output",
    "eviction_scene",
    "lru_scene",
    "make_allocator",
    "prefix_tokens",
    "scheduler_scene",
    "example_history",
    "example_state",
    "example_table",
    "with_kernel_output",
]


# --- notebook 8: one vLLM V1 step, chunked prefill beside decodes ----------------------------

MIXED_STEP_REQUESTS = (StepRequest(4, 1), StepRequest(7, 1), StepRequest(2, 1), StepRequest(4, 6))
"""Three decodes (5, 8 and 3 tokens after the step) and the second chunk of a 12-token prompt
(positions 4-9; its last 2 prompt tokens wait for the next step): 9 tokens. With a budget of
12, vLLM V1 would give the prompt all 8 tokens it has left; a chunk of 6 is what it gives with
``long_prefill_token_threshold = 6``, the setting notebook 8 names."""


def mixed_v1_step() -> MixedStep:
    """:data:`MIXED_STEP_REQUESTS` in blocks of 4: a token budget of 12 (3 entries of padding),
    ``max_model_len`` 16 (a block table 4 entries wide) and 6 request slots (2 unused rows)."""
    return mixed_step(
        MIXED_STEP_REQUESTS, block_size=4, max_model_len=16, max_num_reqs=6,
        max_num_batched_tokens=12,
    )  # fmt: skip


# --- notebook 7: the buddy allocator splits and merges one Pow2 request (§6.1) ---------------
@dataclass(frozen=True)
class BuddyFrame:
    """One moment of a buddy allocator: its live extents and free blocks, (start, size) each."""

    caption: str
    live: tuple[tuple[int, int], ...]
    free: tuple[tuple[int, int], ...]
    requested: int  # slots the live extent's request reserved (0 if none)


def buddy_pow2_frames(pool: int = 1024, prompt: int = 100, output: int = 25) -> list[BuddyFrame]:
    """One Orca (Pow2) request in a buddy allocator of ``pool`` slots: before, allocated, freed.
    Pow2 reserves ``prompt + next_pow2(output)`` slots (§6.1: 132), rounded to an extent (256)."""
    pool = check_int(pool, "pool", minimum=1)
    if pool & (pool - 1):
        raise ValueError(f"pool must be a power of two (one buddy block), got {pool}")
    slots = reserved_slots("pow2", prompt, output)
    space = BuddyAllocator(pool)
    frames = [BuddyFrame(f"a free pool of {pool} slots", (), tuple(space.free_blocks()), 0)]
    start = space.alloc(slots)
    if start is None:
        raise ValueError(f"a pool of {pool} slots cannot hold an extent for {slots} slots")
    extent = space.extent(slots)
    splits = (pool // extent).bit_length() - 1
    caption = (
        f"Pow2 reserves {prompt} + {slots - prompt} = {slots} slots: an extent of {extent}, "
        f"{splits} split{'' if splits == 1 else 's'} in halves"
    )
    frames.append(
        BuddyFrame(caption, tuple(space.live_extents()), tuple(space.free_blocks()), slots)
    )
    space.free(start)
    frames.append(BuddyFrame(
        "the request ends: its extent merges with each free buddy back into one block",
        (), tuple(space.free_blocks()), 0,
    ))  # fmt: skip
    return frames
