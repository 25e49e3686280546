"""The control-plane half of :mod:`pagedlab.pictures.scenes`: every staged example that needs no
torch, built with the real control plane, returning fresh objects. It imports only the standard
library, ``checks`` and ``memory``, so the live site runs it in a browser (Pyodide).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pagedlab.frontier.miss_reasons import MissClassifier
from pagedlab.frontier.partial_prefix import PartialAdmission, PartialPrefixCache
from pagedlab.frontier.peers import vllm_block_pool
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator, FreeRule, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Request
from pagedlab.memory.scheduler import KVHooks, Scheduler, SchedulerConfig
from pagedlab.memory.sharing import beam_step, fork_samples

# --- the example (ARCHITECTURE.md): block size 4, length 5, physical blocks 4 and 1 ------------

POOL_BLOCKS = 32  # the allocation explorer's pool
LAYOUTS = ("ascending", "example [4, 1, …]", "shuffled")
SHUFFLE_SEED = 0


def example_history(
    num_blocks: int = POOL_BLOCKS, block_size: int = 4, finished: bool = True
) -> tuple[BlockAllocator, list[BlockTable]]:
    """A pool whose free list starts 4, 1, 0: A takes blocks 0, 1; B 2, 3; C 4; D the rest;
    C then A finish (A's last block first). With ``finished`` B and D finish too, otherwise
    they are returned running. Needs ``num_blocks >= 6``."""
    if num_blocks < 6:
        raise ValueError(f"example_history needs num_blocks >= 6, got {num_blocks}")
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


def make_allocator(layout: str, block_size: int, num_blocks: int = POOL_BLOCKS) -> BlockAllocator:
    """A free pool in ``layout`` order: fresh, after :func:`example_history`, or shuffled."""
    if layout == LAYOUTS[0]:
        return BlockAllocator(num_blocks, block_size)
    if layout == LAYOUTS[1]:
        return example_history(num_blocks, block_size)[0]
    if layout == LAYOUTS[2]:
        order = list(range(num_blocks))
        random.Random(SHUFFLE_SEED).shuffle(order)
        return BlockAllocator(num_blocks, block_size, free_order=order)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


@dataclass(frozen=True)
class ExampleState:
    """The example's sequence at one setting, appended token by token on a fresh pool, and the
    kernel's output on the example's head (keys 0, query 1, values 1..L: (L + 1) / 2)."""

    block_size: int
    length: int  # asked for
    layout: str
    allocator: BlockAllocator
    table: BlockTable  # holds min(length, what fits) tokens
    new_block: int | None  # physical block the last token opened, if it opened one
    problem: str | None  # why the table holds fewer than ``length`` tokens
    output: float | None  # the kernel's output on the example's head
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


KV_BYTES_PER_SLOT = 8  # the example's head: K and V, one kv head of dim 1, fp32
TABLE_ENTRY_BYTES = 4  # int32


def example_table(block_size: int, length: int, layout: str = LAYOUTS[1]) -> ExampleState:
    """The example's sequence for one setting (pure), its kernel output left None
    (:func:`pagedlab.pictures.scenes.example_state` adds it)."""
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
    return ExampleState(
        block_size, length, layout, allocator, table, new_block, problem, None, expected
    )


# --- Fig. 3's external fragmentation: holes between running requests -----------------------
def fragmented_pool(
    num_requests: int = 8, blocks_each: int = 2, block_size: int = 16
) -> tuple[BlockAllocator, list[BlockTable], BlockTable]:
    """Notebook 1's pool: requests of ``blocks_each`` blocks fill it, every other one finishes,
    a newcomer of twice their size is paged in; (the pool, the running tables, the newcomer)."""
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


# --- sharing (§4.4): Fig. 8 and Fig. 9, staged on a real allocator ----------------------------
FIG8_ORDER = (7, 1, 3, 0, 2, 4, 5, 6)  # the prompt lands in 7 and 1; the copy goes to 3
FIG8_WORDS = ("Four", "score", "and", "seven", "years", "ago", "our")


def figure8_prompt() -> BlockTable:
    """Fig. 8's 7-token prompt ("Four score and seven" | "years ago our") in blocks 7 and 1."""
    prompt = BlockTable(BlockAllocator(8, 4, free_order=list(FIG8_ORDER)))
    prompt.append_tokens(len(FIG8_WORDS))
    return prompt


def figure8() -> tuple[list[BlockTable], list[CopyOnWrite | None]]:
    """Fig. 8: two samples; A1 writes (copy 1 -> 3), then A2 (in place); tables, appends."""
    a1, a2 = fork_samples(figure8_prompt(), 2)
    return [a1, a2], [a1.append_tokens(1), a2.append_tokens(1)]  # "fathers", "mothers"


FIG9_HISTORY: tuple[tuple[int, ...], ...] = ((0, 0), (0, 1), (0, 0, 0, 1))
"""Parents at each block-sized step that grow the tree of Fig. 9 from a one-block prompt."""

FIG9_STEP: tuple[int, ...] = (1, 1, 2, 2)
"""The new top 4 descend from candidates 1 and 2 (two each)."""


def figure9_before(num_blocks: int = 16) -> list[BlockTable]:
    """Fig. 9's four candidates before the step, grown by three beam steps of a block each."""
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


# --- notebook 9's requests (the scene with real K/V is scenes.scheduler_scene) ------------

SCHEDULER_POOL_BLOCKS = 16  # the device pool; the host pool (swap space) is as large
SCHEDULER_REQUESTS = (
    Request("A", 10, 14),
    Request("B", 6, 8, num_samples=2),
    Request("C", 14, 8),
    Request("D", 5, 12),
    Request("E", 8, 9),
)


def scheduler_control_scene(
    mode: str = "swap",
    block_size: int = 4,
    token_budget: int | None = None,
    chunked_prefill: bool = False,
    host: BlockAllocator | None = None,
    kv: KVHooks | None = None,
) -> Scheduler:
    """Notebook 9's scene, queued; by default no K/V store (every block decision the same:
    :func:`pagedlab.pictures.scenes.scheduler_scene` adds K/V) and the scheduler's host pool."""
    config = SchedulerConfig(mode, token_budget, chunked_prefill)
    scheduler = Scheduler(BlockAllocator(SCHEDULER_POOL_BLOCKS, block_size), config, host, kv)
    for request in SCHEDULER_REQUESTS:
        scheduler.add(request)
    return scheduler


# --- the eviction example under either free rule (notebook 6) ---------------------------------
def lru_scene(free_rule: FreeRule) -> tuple[PrefixCache, list[int], list[int]]:
    """Notebook 6's eviction example: 9-token A and B end, A comes back (2 hits) and ends, an
    11-token request takes 3 blocks; (the cache, the free list after A and B, its blocks)."""
    cache = PrefixCache(BlockAllocator(6, 4, free_rule=free_rule))
    a = cache.admit(list(range(9)))
    b = cache.admit(list(range(100, 109)))
    a.table.free()
    b.table.free()
    after = cache.allocator.free_list()
    cache.admit(list(range(9))).table.free()
    new = cache.admit(list(range(200, 211)))
    return cache, after, new.table.blocks


# --- notebook 11: PagedAttention in 2026 ------------------------------------------------------
MISS_POOL_TOKENS = 4096
"""The pool of notebook 11's hit-rate explorer, in tokens (``4096 // block_size`` blocks)."""


def miss_workload() -> list[list[tuple[str, list[int]]]]:
    """Notebook 11's four steps of (name, prompt token ids) around a 300-token system prompt
    ``S``: R1, R2 (``S`` + a question); R3, a 12-token R4, R5 (``S``'s first 256 tokens); two
    2,048-token documents filling the pool; R8 (``S`` + a question)."""
    system = list(range(1, 301))

    def ask(r: int, n: int = 50) -> list[int]:
        return [10_000 * r + i for i in range(n)]

    return [
        [("R1", system + ask(1)), ("R2", system + ask(2))],
        [("R3", system + ask(3)), ("R4", ask(4, 12)), ("R5", system[:256])],
        [("R6", ask(6, 2048)), ("R7", ask(7, 2048))],
        [("R8", system + ask(8))],
    ]


def miss_scene(block_size: int) -> MissClassifier:
    """:func:`miss_workload` through a real prefix cache on vLLM's pool (``vllm_block_pool``)."""
    block_size = check_int(block_size, "block_size", minimum=1, maximum=MISS_POOL_TOKENS // 2)
    pool = vllm_block_pool(ceil_div(MISS_POOL_TOKENS, block_size) + 1, block_size)
    classifier = MissClassifier(pool)
    for step in miss_workload():
        classifier.run_step(step)
    return classifier


PARTIAL_SHARED = 22
"""Notebook 11's shared prefix: 22 tokens, so it ends inside block 1 at block size 16."""


def partial_hit_scene(
    prefix_match_unit: int, block_size: int = 16
) -> tuple[BlockAllocator, PartialPrefixCache, PartialAdmission, PartialAdmission]:
    """Two prompts sharing ``PARTIAL_SHARED`` tokens on an 8-block pool: the first (32 tokens)
    ran a step ago; the second (27 tokens) is admitted now, its copy (if any) still pending."""
    alloc = BlockAllocator(8, block_size)
    cache = PartialPrefixCache(alloc, prefix_match_unit)
    shared = list(range(1, PARTIAL_SHARED + 1))
    first = cache.admit(shared + list(range(100, 110)))
    cache.finish_step()
    second = cache.admit(shared + list(range(200, 205)))
    return alloc, cache, first, second


# --- notebook 6's eviction explorer: does a returning prompt still hit? ------------------------

EVICTION_PROMPT = 9  # tokens per request: 2 full blocks of 4 (cached) and 1 partial block


@dataclass(frozen=True)
class EvictionRun:
    """What :func:`eviction_scene` did."""

    cache: PrefixCache
    first: list[int]  # A's blocks the first time
    others: list[list[int]]  # each later request's blocks, in order
    evicted: list[int]  # evictions after each later request, cumulative
    back: BlockTable  # A's table on its return (still held)
    hits: int  # of A's cacheable blocks, how many its return found cached

    @property
    def returning(self) -> list[int]:
        """A's blocks on its return."""
        return self.back.blocks

    @property
    def cacheable(self) -> int:
        """A's full blocks: what a return could hit at best."""
        return EVICTION_PROMPT // self.cache.block_size


def eviction_scene(pool_blocks: int, others: int, free_rule: FreeRule = "fifo") -> EvictionRun:
    """A 9-token request A ends; ``others`` 9-token requests run one at a time and end; A's
    prompt comes back. Blocks of 4 on a fresh pool of ``pool_blocks`` (>= 3): once the free
    list's front reaches A's cached blocks, handing them out evicts them and A hits fewer."""
    pool_blocks = check_int(pool_blocks, "pool_blocks", minimum=3)
    others = check_int(others, "others", minimum=0)
    cache = PrefixCache(BlockAllocator(pool_blocks, 4, free_rule=free_rule))
    prompt = list(range(EVICTION_PROMPT))
    a = cache.admit(prompt)
    first = a.table.blocks
    a.table.free()
    blocks, evicted = [], []
    for r in range(others):
        run = cache.admit([1000 * (r + 1) + i for i in range(EVICTION_PROMPT)])
        blocks.append(run.table.blocks)
        run.table.free()
        evicted.append(cache.stats.evictions)
    back = cache.admit(prompt)
    return EvictionRun(cache, first, blocks, evicted, back.table, len(back.hit_blocks))
