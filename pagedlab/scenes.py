"""Every example the notebooks, tests, benchmarks and figures stage, in one home.

Each scene is built with the real code (allocator, block tables, sharing, prefix cache,
the one batch builder) and returns fresh objects, so callers may mutate what they get.
This module imports the control and data planes only: never pictures or explorers.

- the seed's history: :func:`seed_history` (a pool whose free list starts 4, 1, 0), and
  under either free rule (:func:`seed_free_list`, :func:`partial_block_free_list`,
  :func:`lru_scene`: pagedlab's FIFO queue and vLLM V1's split side by side); the
  :data:`LAYOUTS` of the allocation explorer and :func:`make_allocator` for each;
- the seed's sequence at any block size, length and layout, with the kernel's output
  (:func:`seed_state`, :class:`SeedState`);
- Fig. 3's external fragmentation (:func:`fragmented_pool`): holes between running requests;
- Fig. 8 (:func:`figure8_prompt`, :data:`FIG8_WORDS`, :func:`figure8`): two samples of one
  prompt, copy-on-write of the shared block;
- Fig. 9 (:func:`figure9_before`, :data:`FIG9_STEP`): four beam candidates and the step;
- the prefix-cache scene (:data:`SYSTEM_PROMPT`, :func:`prefix_tokens`);
- notebook 4's batch in a shuffled pool (:func:`kernel_batch`);
- notebook 8's mixed V1 step (:data:`MIXED_STEP_REQUESTS`, :func:`mixed_v1_step`): a prompt
  chunk and three decodes, flattened as vLLM's model runner sends them;
- notebook 7's buddy allocator at work (:func:`buddy_pow2_frames`): one Pow2 request split
  out of a pool and merged back;
- notebook 9's serving scene (:data:`SCHEDULER_REQUESTS`, :func:`scheduler_scene`): five
  requests that do not all fit a 16-block pool, over real K/V.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from pagedlab.attention.batch import Batch, grow_batch
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.mixed_step import MixedStep, StepRequest, mixed_step
from pagedlab.attention.ops import block_tables_tensor, paged_attention
from pagedlab.attention.swap import HostPool, SwappingKV
from pagedlab.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator, FreeRule, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Request
from pagedlab.memory.scheduler import Scheduler
from pagedlab.memory.sharing import beam_step, fork_samples
from pagedlab.simulate.contiguous import BuddyAllocator
from pagedlab.simulate.memory import reserved_slots

# --- the seed (ARCHITECTURE.md): block size 4, length 5, physical blocks 4 and 1 ------------

POOL_BLOCKS = 32  # the allocation explorer's pool
LAYOUTS = ("ascending", "seed [4, 1, …]", "shuffled")
SHUFFLE_SEED = 0


def seed_history(
    num_blocks: int = POOL_BLOCKS, block_size: int = 4, finished: bool = True
) -> tuple[BlockAllocator, list[BlockTable]]:
    """A pool whose free list starts 4, 1, 0 because of what other requests did.

    A fresh pool hands out 0, 1, 2, ...: A takes blocks 0, 1; B takes 2, 3; C takes 4; D
    takes the rest. C finishes (4 is freed), then A (its last block first: 1, then 0).
    With ``finished`` B and D finish too (free list 4, 1, 0, 3, 2, then D's blocks from the
    last); otherwise they are returned still running. Needs ``num_blocks >= 6``.
    """
    if num_blocks < 6:
        raise ValueError(f"seed_history needs num_blocks >= 6, got {num_blocks}")
    allocator = BlockAllocator(num_blocks, block_size)
    a, b, c, d = (BlockTable(allocator) for _ in range(4))
    for table, blocks in ((a, 2), (b, 2), (c, 1), (d, num_blocks - 5)):
        table.append_tokens(blocks * block_size)
    c.free()
    a.free()
    if not finished:
        return allocator, [b, d]
    b.free()
    d.free()
    return allocator, []


def seed_free_list(free_rule: FreeRule, prefix_caching: bool, num_blocks: int = 8) -> list[int]:
    """The free list after the seed's history (:func:`seed_history`) under ``free_rule``.

    With ``prefix_caching`` each request is admitted through a :class:`PrefixCache` (distinct
    tokens, whole blocks, so every block is full and hashed, as in vLLM V1 by default);
    without it, through plain tables (no block has a hash). B and D keep running.
    """
    allocator = BlockAllocator(num_blocks, 4, free_rule=free_rule)
    cache = PrefixCache(allocator) if prefix_caching else None
    tables = []
    for request, blocks in enumerate((2, 2, 1, num_blocks - 5)):
        tokens = [1000 * (request + 1) + i for i in range(4 * blocks)]
        if cache is None:
            tables.append(BlockTable(allocator))
            tables[-1].append_tokens(len(tokens))
        else:
            tables.append(cache.admit(tokens).table)
    tables[2].free()  # C
    tables[0].free()  # A
    return allocator.free_list()


def partial_block_free_list(free_rule: FreeRule) -> list[int]:
    """A 6-token request in blocks of 4 on a 4-block pool, prefix-cached, then finished.

    Block 0 is full (hashed), block 1 holds 2 tokens (no hash: only full blocks are); the
    table frees its last block first. Returns the free list after it finished.
    """
    cache = PrefixCache(BlockAllocator(4, 4, free_rule=free_rule))
    cache.admit(list(range(6))).table.free()
    return cache.allocator.free_list()


def lru_scene(free_rule: FreeRule) -> tuple[PrefixCache, list[int], list[int]]:
    """Notebook 6's eviction example under ``free_rule``: two 9-token requests A and B end, A
    comes back (hits its 2 full blocks), ends, then an 11-token request needs 3 blocks.

    Returns the cache, the free list after A and B first end, and the new request's blocks.
    """
    cache = PrefixCache(BlockAllocator(6, 4, free_rule=free_rule))
    a = cache.admit(list(range(9)))
    b = cache.admit(list(range(100, 109)))
    a.table.free()
    b.table.free()
    after = cache.allocator.free_list()
    cache.admit(list(range(9))).table.free()
    new = cache.admit(list(range(200, 211)))
    return cache, after, new.table.blocks


def make_allocator(layout: str, block_size: int, num_blocks: int = POOL_BLOCKS) -> BlockAllocator:
    """A pool of ``num_blocks`` free blocks whose free list is in ``layout`` order.

    ``ascending``: a fresh pool (0, 1, 2, ...); ``seed [4, 1, …]``: after :func:`seed_history`;
    ``shuffled``: a fixed random permutation (seed :data:`SHUFFLE_SEED`).
    """
    if layout == LAYOUTS[0]:
        return BlockAllocator(num_blocks, block_size)
    if layout == LAYOUTS[1]:
        return seed_history(num_blocks, block_size)[0]
    if layout == LAYOUTS[2]:
        order = list(range(num_blocks))
        random.Random(SHUFFLE_SEED).shuffle(order)
        return BlockAllocator(num_blocks, block_size, free_order=order)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


@dataclass(frozen=True)
class SeedState:
    """One sequence of the seed's head at one block size, length and layout.

    Built by :func:`seed_state`: a fresh 32-block pool in the ``layout`` order, the sequence
    appended token by token with a real ``BlockTable``, and (unless left out) the Triton
    kernel's output on the seed's head (keys 0, query 1, values 1..L), which must be the
    mean of the values, (L + 1) / 2. A length the pool cannot hold is not an error: the
    table holds the tokens that fit and ``problem`` says why.
    """

    block_size: int
    length: int  # asked for
    layout: str
    allocator: BlockAllocator
    table: BlockTable  # holds min(length, what fits) tokens
    new_block: int | None  # physical block the last token opened, if it opened one
    problem: str | None  # why the table holds fewer than ``length`` tokens
    output: float | None  # the kernel's output on the seed's head
    expected: float | None  # (L + 1) / 2

    @property
    def blocks(self) -> list[int]:
        return self.table.blocks

    @property
    def empty_slots(self) -> int:
        return self.table.num_slots - self.table.num_tokens

    @property
    def table_bytes(self) -> int:
        return len(self.table.blocks) * TABLE_ENTRY_BYTES

    @property
    def empty_bytes(self) -> int:
        return self.empty_slots * KV_BYTES_PER_SLOT

    @property
    def ok(self) -> bool:
        return (
            self.problem is None
            and self.output is not None
            and self.expected is not None
            and abs(self.output - self.expected) <= 1e-4 * max(1.0, self.expected)
        )

    @property
    def caption(self) -> str:
        """One line about the last token (under the picture)."""
        t = self.table
        if self.problem is not None:
            return f"out of blocks after token {t.num_tokens}"
        block, offset = t.slot(t.num_tokens - 1)
        if self.new_block is not None:
            return f"token {t.num_tokens} opened a new block: physical {block}; nothing moved"
        return f"token {t.num_tokens} went to block {block}, offset {offset}"


KV_BYTES_PER_SLOT = 8  # the seed's head: K and V, one kv head of dim 1, fp32
TABLE_ENTRY_BYTES = 4  # int32


def seed_state(
    block_size: int, length: int, layout: str = LAYOUTS[1], run_kernel: bool = True
) -> SeedState:
    """The seed's sequence for one setting (pure); see :class:`SeedState`.

    With ``run_kernel=False`` the output is left None; :func:`with_kernel_output` fills it in.
    """
    block_size = check_int(block_size, "block_size", minimum=1)
    length = check_int(length, "length", minimum=1)
    allocator = make_allocator(layout, block_size)
    table = BlockTable(allocator)
    problem = None
    for token in range(length):
        try:
            table.append_tokens(1)
        except OutOfBlocksError as error:
            problem = (
                f"length {length} needs {ceil_div(length, block_size)} blocks of {block_size}, "
                f"but the pool has {allocator.num_blocks}: appending token {token + 1} raised "
                f"OutOfBlocksError ({error}). A server would queue or preempt this request; "
                f"the picture shows the {token} tokens that fit."
            )
            break
    n = table.num_tokens
    new_block = table.blocks[-1] if n % block_size == 1 % block_size and problem is None else None
    expected = (n + 1) / 2 if problem is None else None
    state = SeedState(
        block_size, length, layout, allocator, table, new_block, problem, None, expected
    )
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


# --- sharing (§4.4): Fig. 8 and Fig. 9, staged on a real allocator ----------------------------

# --- Fig. 3's external fragmentation: holes between running requests -----------------------


def fragmented_pool(
    num_requests: int = 8, blocks_each: int = 2, block_size: int = 16
) -> tuple[BlockAllocator, list[BlockTable], BlockTable]:
    """Notebook 1's pool: ``num_requests`` requests of ``blocks_each`` blocks fill it, every
    other one finishes (R1, R3, ...), and a newcomer of twice their size is paged in.

    Returns the pool, the running tables (R2, R4, ...) and the newcomer. With the defaults:
    16 blocks of 16 slots, holes of 2 blocks at 0, 4, 8, 12, newcomer in blocks [1, 0, 5, 4].
    """
    check_int(num_requests, "num_requests", minimum=2)
    check_int(blocks_each, "blocks_each", minimum=1)
    pool = BlockAllocator(num_requests * blocks_each, block_size)
    requests = [BlockTable(pool) for _ in range(num_requests)]
    for table in requests:
        table.append_tokens(blocks_each * block_size)
    for table in requests[::2]:
        table.free()
    newcomer = BlockTable(pool)
    newcomer.append_tokens(2 * blocks_each * block_size)
    return pool, requests[1::2], newcomer


FIG8_ORDER = (7, 1, 3, 0, 2, 4, 5, 6)  # the prompt lands in 7 and 1; the copy goes to 3
FIG8_WORDS = ("Four", "score", "and", "seven", "years", "ago", "our")


def figure8_prompt() -> BlockTable:
    """Fig. 8's 7-token prompt ("Four score and seven" | "years ago our") in blocks 7 and 1."""
    prompt = BlockTable(BlockAllocator(8, 4, free_order=list(FIG8_ORDER)))
    prompt.append_tokens(len(FIG8_WORDS))
    return prompt


def figure8() -> tuple[list[BlockTable], list[CopyOnWrite | None]]:
    """Fig. 8: two samples of the prompt; A1 writes (copy 1 -> 3), then A2 (in place).

    Returns the two tables and what each append returned.
    """
    a1, a2 = fork_samples(figure8_prompt(), 2)
    return [a1, a2], [a1.append_tokens(1), a2.append_tokens(1)]  # "fathers", "mothers"


FIG9_HISTORY: tuple[tuple[int, ...], ...] = ((0, 0), (0, 1), (0, 0, 0, 1))
"""Parents at each block-sized step that grow the tree of Fig. 9 from a one-block prompt."""

FIG9_STEP: tuple[int, ...] = (1, 1, 2, 2)
"""The new top 4 descend from candidates 1 and 2 (two each)."""


def figure9_before(num_blocks: int = 16) -> list[BlockTable]:
    """The four candidates of Fig. 9 just before the step, built by three beam steps.

    Prompt in block 0; each earlier step appended a full block (4 tokens), so the tree is
    block 0 -> {1, 2}, 1 -> 3, 2 -> 4, 3 -> {5, 6, 7}, 4 -> 8 on a fresh pool (0, 1, 2, ...).
    """
    prompt = BlockTable(BlockAllocator(num_blocks, 4))
    prompt.append_tokens(4)
    beams = [prompt]
    for parents in FIG9_HISTORY:
        beams = beam_step(beams, parents, num_tokens=4).beams
    return beams


# --- prefix caching ---------------------------------------------------------------------------

SYSTEM_PROMPT = (101, 102, 103, 104, 105, 106, 107, 108)  # an 8-token shared system prompt


def prefix_tokens(shared: int, prompt_len: int, request: int) -> list[int]:
    """Request ``request``'s prompt: ``shared`` common tokens (a system prompt), then its own."""
    common = min(shared, prompt_len)
    return [1000 + i for i in range(common)] + [
        request * 100 + i for i in range(prompt_len - common)
    ]


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
    than the batch needs (they stay free) and hands its blocks out in a seeded random order,
    so the pages are scattered: none is adjacent to its neighbour by design, a few are by
    chance (with the defaults, the 17-token sequence's blocks 1, 2 and the 30-token
    sequence's 12, 13).
    """
    return grow_batch(
        lengths, block_size, num_heads=8, num_kv_heads=2, head_dim=head_dim, seed=seed,
        dtype=dtype, shuffled=True, spare_blocks=2,
    )  # fmt: skip


# --- notebook 8: one vLLM V1 step, chunked prefill beside decodes ----------------------------

MIXED_STEP_REQUESTS = (StepRequest(4, 1), StepRequest(7, 1), StepRequest(2, 1), StepRequest(4, 6))
"""Three decodes (5, 8 and 3 tokens after the step) and the second chunk of a 12-token prompt
(positions 4-9; its last 2 prompt tokens wait for the next step): 9 tokens."""


def mixed_v1_step() -> MixedStep:
    """:data:`MIXED_STEP_REQUESTS` in blocks of 4: a token budget of 12 (3 entries of padding),
    ``max_model_len`` 16 (a block table 4 entries wide) and 6 request slots (2 unused rows)."""
    return mixed_step(
        MIXED_STEP_REQUESTS, block_size=4, max_model_len=16, max_num_reqs=6,
        max_num_batched_tokens=12,
    )  # fmt: skip


# --- notebook 9: a tiny serving engine under memory pressure (§4.5) --------------------------

SCHEDULER_POOL_BLOCKS = 16  # the device pool; the host pool (swap space) is as large
SCHEDULER_REQUESTS = (
    Request("A", 10, 14),
    Request("B", 6, 8, num_samples=2),
    Request("C", 14, 8),
    Request("D", 5, 12),
    Request("E", 8, 9),
)


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

    Pow2 reserves ``prompt + next_pow2(output)`` slots (§6.1: 100 + 32 = 132); the buddy
    allocator rounds that to a power-of-two extent (256), splitting the pool's block in halves
    until one is that size, and merges it back with its buddies when the request ends.
    """
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
