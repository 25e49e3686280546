"""Capstones: build a working piece, graded by replaying the same seeded events on it and on
pagedlab's own implementation.

- 01 ``place_newcomer``: where a contiguous first-fit allocator would put a newcomer (nowhere,
  in notebook 1's fragmented pool) and where paging puts it, read off a real fragmented pool.
- 05 ``append_cow``: one append with copy-on-write, replayed against forks and appends of
  pagedlab's BlockTable; 06 ``prefix_cache``: lookup and register with chained hashes,
  replayed against pagedlab's PrefixCache.
- 02 ``block_table``: a block table class (``append_tokens`` and ``free``, about 30 lines)
  over a real :class:`~pagedlab.BlockAllocator`. Each case is a seeded sequence of appends and
  frees on several tables sharing one pool; after every event the learner's tables and
  pagedlab's :class:`~pagedlab.BlockTable` are compared: each table's blocks and token count,
  the pool's free list (its order too) and its ref counts. The first event where they differ
  is named. No torch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pagedlab.exercises.core import Case, Exercise, Mistake, seeded
from pagedlab.exercises.drivers import (
    Admit,
    Event,
    ForkEvent,
    adapt_cache,
    adapt_cow,
    adapt_table,
    replay,
    replay_cache,
    replay_cow,
)
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable

NB01, NB02 = "01_why_paging", "02_block_table"

# --- 01 · a contiguous first fit, and paging ---------------------------------------------------


def place_newcomer(refcounts: list[int], free_list: list[int], need: int) -> tuple[Any, list[int]]:
    """(first block of the first run of ``need`` free blocks in address order, or None;
    the blocks paging gives the newcomer: the first ``need`` of the free list)."""
    start, run = None, 0
    for block, count in enumerate(refcounts):
        run = run + 1 if count == 0 else 0
        if run == need:
            start = block - need + 1
            break
    return start, free_list[:need]


def _place_expected(pool: BlockAllocator, need: int) -> tuple[Any, list[int]]:
    """First fit over the real pool's ref counts, and the blocks a real table gets."""
    counts = pool.refcounts()
    start = None
    for first in range(len(counts) - need + 1):
        if all(c == 0 for c in counts[first : first + need]):
            start = first
            break
    table = BlockTable(pool)
    table.append_tokens(need * pool.block_size)
    return start, list(table.blocks)


def _place_cases() -> list[Case]:
    cases = []
    fixed = [
        (8, 2, 4, "notebook 1's pool: holes of 2 blocks everywhere, the newcomer needs 4 in a "
         "row: first fit refuses it, paging places it", ("no_none", "sorted")),
        (8, 2, 2, "a newcomer that fits a hole: first fit takes the first hole", ("last_hole",)),
        (4, 3, 6, "holes of 3, a newcomer of 6", ("no_none",)),
        (6, 1, 1, "holes of 1 block", ()),
    ]  # fmt: skip
    for num_requests, blocks_each, need, why, catches in fixed:
        pool, _running = _fragmented_without_newcomer(num_requests, blocks_each)
        args = (pool.refcounts(), pool.free_list(), need)
        cases.append(Case(args, _place_expected(pool, need), why=why, catches=catches))
    # holes of 3 blocks (0-2) and of 2 (4-5): first fit takes the first hole that is long
    # enough, not the one that fits best
    pool = BlockAllocator(8, 4)
    held = [BlockTable(pool) for _ in range(4)]
    for table, blocks in zip(held, (3, 1, 2, 2), strict=True):
        table.append_tokens(blocks * 4)
    held[0].free()
    held[2].free()
    args = (pool.refcounts(), pool.free_list(), 2)
    why = "holes of 3 and then of 2 blocks, a newcomer of 2: first fit takes the first hole"
    cases.append(Case(args, _place_expected(pool, 2), why=why))
    rng = seeded(1001)
    for _ in range(12):
        pool = BlockAllocator(rng.randint(6, 16), 4)
        tables = []
        for _t in range(rng.randint(2, 6)):
            if pool.num_free == 0:
                break
            table = BlockTable(pool)
            table.append_tokens(rng.randint(1, min(pool.num_free, 3)) * 4)
            tables.append(table)
        for table in rng.sample(tables, rng.randint(1, len(tables))):
            table.free()
        need = rng.randint(1, max(1, pool.num_free))
        args = (pool.refcounts(), pool.free_list(), need)
        cases.append(Case(args, _place_expected(pool, need), kind="generated"))
    return cases


def _fragmented_without_newcomer(num_requests: int, blocks_each: int) -> tuple[Any, Any]:
    """scenes.fragmented_pool's pool before its newcomer arrives (every other request gone)."""
    pool = BlockAllocator(num_requests * blocks_each, 4)
    requests = [BlockTable(pool) for _ in range(num_requests)]
    for table in requests:
        table.append_tokens(blocks_each * 4)
    for table in requests[::2]:
        table.free()
    return pool, requests[1::2]


# --- 02 · a block table, built -----------------------------------------------------------------
BLOCK_TABLE_STUB = '''from pagedlab import BlockAllocator


class MyBlockTable:
    """One sequence's block table over a real BlockAllocator (no sharing here).

    blocks: the physical block of each logical block, in order; num_tokens: tokens held.
    The allocator's API: allocator.block_size, allocator.allocate() -> a free block id (the
    front of its free list), allocator.free(block) (joins the back of the free list).
    """

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator
        self.blocks: list[int] = []
        self.num_tokens = 0

    def append_tokens(self, n: int) -> None:
        """Make room for n more tokens: fill the last block, then take new blocks."""
        raise NotImplementedError("write append_tokens")

    def free(self) -> None:
        """Give every block back, the last block first, and hold nothing."""
        raise NotImplementedError("write free")
'''


class _ReferenceTable:
    """The solution: what the learner writes (pagedlab's BlockTable does more: sharing,
    copy-on-write, atomic errors, owners)."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator
        self.blocks: list[int] = []
        self.num_tokens = 0

    def append_tokens(self, n: int) -> None:
        size = self.allocator.block_size
        room = len(self.blocks) * size - self.num_tokens  # empty slots of the last block
        for _ in range(-(-(n - room) // size) if n > room else 0):
            self.blocks.append(self.allocator.allocate())
        self.num_tokens += n

    def free(self) -> None:
        for block in reversed(self.blocks):
            self.allocator.free(block)
        self.blocks = []
        self.num_tokens = 0


def _events(rng: random.Random, num_blocks: int, block_size: int) -> list[Event]:
    """Seeded appends and frees that never run out of blocks (pagedlab's table is the judge)."""
    pool = BlockAllocator(num_blocks, block_size)
    live: dict[int, BlockTable] = {}
    events: list[Event] = []
    next_id = 0
    for _ in range(rng.randint(4, 12)):
        if live and (rng.random() < 0.25 or pool.num_free == 0):
            which = rng.choice(sorted(live))
            live.pop(which).free()
            events.append(("free", which, 0))
            continue
        if live and rng.random() < 0.6:
            which = rng.choice(sorted(live))
        else:
            which, next_id = next_id, next_id + 1
            live[which] = BlockTable(pool)
        table = live[which]
        room = len(table.blocks) * block_size - table.num_tokens + pool.num_free * block_size
        if room == 0:
            continue
        n = rng.randint(1, min(room, 3 * block_size))
        table.append_tokens(n)
        events.append(("append", which, n))
    return [e for e in events if e[0] == "free" or e[2] > 0]


def _table_cases() -> list[Case]:
    fixed: list[tuple[int, int, list[int], list[Event], str]] = [
        (8, 4, [4, 1, 0, 2, 3, 5, 6, 7], [("append", 0, 5)],
         "the example: 5 tokens take blocks 4 and 1, the front of the free list"),
        (8, 4, list(range(8)), [("append", 0, 3), ("append", 0, 1), ("append", 0, 1)],
         "3 tokens, then 1 fills the block's last slot, then 1 more needs a new block"),
        (8, 4, list(range(8)), [("append", 0, 6), ("append", 0, 7)],
         "6 tokens then 7: the last block's 2 empty slots are filled before new blocks"),
        (8, 4, list(range(8)), [("append", 0, 9), ("free", 0, 0)],
         "free gives the blocks back last block first: the free list ends ... 2, 1, 0"),
        (8, 4, list(range(8)), [("append", 0, 4), ("append", 1, 4), ("free", 0, 0),
                                ("append", 2, 8)],
         "a freed block joins the back of the free list: the next table takes it last"),
        (6, 3, list(range(6)), [("append", 0, 7), ("append", 1, 2), ("append", 0, 2)],
         "blocks of 3 (not a power of two), two tables taking turns"),
        (5, 1, [3, 1, 4, 0, 2], [("append", 0, 2), ("append", 1, 1), ("append", 0, 2)],
         "blocks of 1: one block per token"),
        (48, 64, list(range(48)), [("append", 0, 3000)],
         "3,000 tokens in one call take 47 blocks: no limit on the blocks, no step per token"),
        (8, 4, list(range(8)), [("append", 0, 1)] * 20,
         "20 appends of one token: every fourth takes a new block, up to the twentieth"),
    ]  # fmt: skip
    cases = []
    for num_blocks, size, order, events, why in fixed:
        args = (num_blocks, size, order, events)
        cases.append(Case(args, replay(BlockTable, *args), _table_label(args), "fixed", why))
    rng = seeded(1002)
    for _ in range(12):
        num_blocks, size = rng.randint(4, 12), rng.choice([1, 2, 3, 4, 8])
        order = rng.sample(range(num_blocks), num_blocks)
        events = _events(rng, num_blocks, size)
        args = (num_blocks, size, order, events)
        cases.append(Case(args, replay(BlockTable, *args), _table_label(args), "generated"))
    return cases


def _table_label(args: tuple[Any, ...]) -> str:
    num_blocks, size, order, events = args
    said = ", ".join(
        f"T{t}.append_tokens({n})" if kind == "append" else f"T{t}.free()" for kind, t, n in events
    )
    return f"a pool of {num_blocks} blocks of {size}, free list {order}; then {said}"


def _diagnose_table(fn: Callable[..., Any], case: Case) -> str:
    """The first event after which the learner's tables and pagedlab's differ, and how."""
    got = fn(*case.args)
    _num_blocks, _size, _order, events = case.args
    parts = ("blocks", "num_tokens", "free list", "ref counts")
    for k, (event, want, have) in enumerate(zip(events, case.expected, got, strict=False)):
        if want != have:
            kind, t, n = event
            said = f"T{t}.append_tokens({n})" if kind == "append" else f"T{t}.free()"
            wrong = [
                f"{name}: expected {w}, got {h}"
                for name, w, h in zip(parts, want, have, strict=False)
                if w != h
            ]
            return f"after event {k + 1} ({said}): " + "; ".join(wrong)
    return "" if len(got) == len(case.expected) else "a different number of events"


def _compare_logs(expected: Any, got: Any) -> bool:
    return isinstance(got, list) and got == expected and all(type(x) is tuple for x in got)


EXERCISES_CAPSTONE_01 = [
    Exercise(
        name="place_newcomer",
        notebook=NB01,
        task="Build both placements. refcounts[b] is 0 for a free block; free_list is the "
        "allocator's free list, front first. Return (the first block of the first run of "
        "`need` free blocks in address order, or None if there is none: where a contiguous "
        "first-fit allocator puts the newcomer; the blocks paging gives it).",
        params=("refcounts", "free_list", "need"),
        returns="tuple[int | None, list[int]]",
        cases=_place_cases,
        solution=place_newcomer,
        mistakes=[
            Mistake(
                "paging does not need the blocks in a row: the newcomer takes the free list's "
                "front, wherever those blocks are.",
                lambda r, f, n: (place_newcomer(r, f, n)[0], sorted(f)[:n]),
                "sorted",
            ),
            Mistake(
                "no run of free blocks is long enough: a contiguous allocator must refuse "
                "(None), even though enough blocks are free in total.",
                lambda r, f, n: (r.index(0) if 0 in r else None, f[:n]),
                "no_none",
            ),
            Mistake(
                "first fit takes the first run that is long enough, in address order.",
                lambda r, f, n: (_last_fit(r, n), f[:n]),
                "last_hole",
            ),
        ],
    ),
]


def _last_fit(refcounts: list[int], need: int) -> Any:
    found = None
    for first in range(len(refcounts) - need + 1):
        if all(c == 0 for c in refcounts[first : first + need]):
            found = first
    return found


EXERCISES_CAPSTONE_02 = [
    Exercise(
        name="block_table",
        notebook=NB02,
        task="Build a block table: complete MyBlockTable's append_tokens and free (about 30 "
        "lines with the class). check(MyBlockTable) replays seeded appends and frees on your "
        "tables and on pagedlab's BlockTable, over real allocators, and compares after every "
        "event: blocks, num_tokens, the free list (its order too) and the ref counts.",
        params=("num_blocks", "block_size", "free_order", "events"),
        returns="replay log",
        cases=_table_cases,
        solution=_ReferenceTable,
        adapt=adapt_table,
        compare=_compare_logs,
        convert=False,
        diagnose=_diagnose_table,
        todo="Write append_tokens and free",
        stub_code=BLOCK_TABLE_STUB,
        entry="MyBlockTable",
    ),
]


# --- 05 · an append with copy-on-write ---------------------------------------------------------
def append_cow(allocator: BlockAllocator, blocks: list[int], num_tokens: int) -> list[int]:
    """The table's blocks after appending one token (its blocks may be shared by forks)."""
    blocks = list(blocks)
    if num_tokens % allocator.block_size == 0:  # full (or no) last block: a new block
        blocks.append(allocator.allocate())
    elif allocator.refcount(blocks[-1]) > 1:  # shared and partly filled: copy, then write
        copy = allocator.allocate()
        allocator.free(blocks[-1])  # drop this table's reference to the shared block
        blocks[-1] = copy
    return blocks


def _cow_specs() -> list[tuple[int, int, int, list[ForkEvent], str]]:
    return [
        (8, 4, 7, [("fork", 0), ("append", 0)],
         "Fig. 8: a 7-token prompt forked; the first writer copies the shared partly filled block"),
        (8, 4, 7, [("fork", 0), ("append", 0), ("append", 1)],
         "then the other sample writes in place: it is the block's last holder"),
        (8, 4, 8, [("fork", 0), ("append", 0), ("append", 1)],
         "a full shared last block: each writer takes a new block, nothing is copied"),
        (8, 4, 5, [("append", 0), ("append", 0), ("append", 0), ("append", 0)],
         "no fork: appends fill the last block in place, then take a new one"),
        (10, 4, 6, [("fork", 0), ("fork", 0), ("append", 1), ("append", 2), ("append", 0)],
         "three holders: the first two writers copy, the last writes in place"),
        (9, 3, 4, [("fork", 0), ("append", 1), ("append", 1), ("append", 0)],
         "blocks of 3 (not a power of two)"),
    ]  # fmt: skip


def _cow_cases() -> list[Case]:
    cases = []
    for num_blocks, size, prompt, spec_events, why in _cow_specs():
        args = (num_blocks, size, prompt, spec_events)
        cases.append(Case(args, replay_cow(None, *args), _cow_label(args), "fixed", why))
    rng = seeded(1005)
    for _ in range(12):
        size = rng.choice([1, 2, 3, 4])
        prompt = rng.randint(1, 10)
        events = []
        tables = 1
        for _e in range(rng.randint(2, 8)):
            if rng.random() < 0.3:
                events.append(("fork", rng.randrange(tables)))
                tables += 1
            else:
                events.append(("append", rng.randrange(tables)))
        num_blocks = -(-prompt // size) + 2 * len(events) + 2
        args = (num_blocks, size, prompt, events)
        cases.append(Case(args, replay_cow(None, *args), _cow_label(args), "generated"))
    return cases


def _cow_label(args: tuple[Any, ...]) -> str:
    num_blocks, size, prompt, events = args
    said = ", ".join(f"{kind} T{t}" for kind, t in events)
    return f"a pool of {num_blocks} blocks of {size}; T0 holds {prompt} tokens; then {said}"


def _diagnose_cow(fn: Callable[..., Any], case: Case) -> str:
    got = fn(*case.args)
    events = case.args[3]
    parts = ("tables' blocks", "free list", "ref counts")
    for k, (event, want, have) in enumerate(zip(events, case.expected, got, strict=False)):
        if want != have:
            wrong = [
                f"{name}: expected {w}, got {h}"
                for name, w, h in zip(parts, want, have, strict=False)
                if w != h
            ]
            return f"after event {k + 1} ({event[0]} T{event[1]}): " + "; ".join(wrong)
    return ""


# --- 06 · a prefix cache: lookup and register ---------------------------------------------------
PREFIX_CACHE_STUB = '''from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash


class MyPrefixCache:
    """Full blocks by chained hash: a block's hash covers its tokens and every block before.

    block_size: tokens per block. Nothing is evicted here (the pool is large).
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.block_of: dict[str, int] = {}  # chained hash -> physical block

    def lookup(self, tokens: list[int]) -> list[int]:
        """The cached blocks the prompt starts on (its last token is always computed)."""
        raise NotImplementedError("write lookup")

    def register(self, blocks: list[int], tokens: list[int]) -> None:
        """A table's blocks now hold these tokens: cache each full block not cached yet."""
        raise NotImplementedError("write register")
'''


class _ReferenceCache:
    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.block_of: dict[str, int] = {}

    def _hashes(self, tokens: list[int]) -> list[str]:
        from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash

        hashes, parent, size = [], ROOT_HASH, self.block_size
        for start in range(0, len(tokens) - size + 1, size):
            parent = chain_hash(parent, tokens[start : start + size])
            hashes.append(parent)
        return hashes

    def lookup(self, tokens: list[int]) -> list[int]:
        found = []
        for h in self._hashes(tokens[: len(tokens) - 1]):
            if h not in self.block_of:
                break
            found.append(self.block_of[h])
        return found

    def register(self, blocks: list[int], tokens: list[int]) -> None:
        for block, h in zip(blocks, self._hashes(tokens), strict=False):
            self.block_of.setdefault(h, block)


def _cache_specs() -> list[tuple[int, list[Admit], str]]:
    system = [101, 102, 103, 104, 105, 106, 107, 108]
    return [
        (4, [(system + [1, 2, 3], False), (system + [7, 8], False)],
         "notebook 6: B starts on A's two system-prompt blocks"),
        (4, [(system + [1, 2, 3, 4], False), (system, False)],
         "a block-aligned prompt: its last block is recomputed, not a hit"),
        (4, [([9] * 4 + system, False), (system + [1], False)],
         "the same tokens behind another prefix: chained hashes differ, no hit"),
        (4, [(system + [1], True), (system + [2], False)],
         "A finished: its cached blocks are free but still cached, so B hits them"),
        (4, [(system + [1, 2, 3, 4, 5], False), (system + [1, 2, 3, 4, 6], False),
             (system + [1, 2, 3, 4, 7], False)],
         "three requests: the third hits blocks the first registered"),
        (3, [([1, 2, 3, 4, 5, 6, 7], False), ([1, 2, 3, 4, 5, 6, 9], False)],
         "blocks of 3 (not a power of two)"),
        (4, [(system, False), (system, False), (system + [5], False)],
         "B recomputes A's last block into a new one, a duplicate: the cache keeps A's, so C "
         "hits A's blocks"),
        (4, [([1] * 4 + [3] * 4 + [5] * 4 + [9], False), ([2] * 4 + [3] * 4 + [9], False),
             ([2] * 4 + [3] * 4 + [5] * 4 + [9], False)],
         "C's third block holds A's tokens, at A's index, after B's block: it is not A's "
         "block (a block's hash covers every block before it, not its index or its neighbour)"),
        (4, [(system + [1], False), ([7] * 8 + [1], False), ([8] * 8 + [1], False),
             ([8] * 8 + [2], False)],
         "four requests: the fourth hits the blocks the third registered"),
        (4, [(system + [7, 7], False), (system + [7, 7, 9], False)],
         "A's last block holds 2 of 4 tokens: it is not cached, so B hits A's 2 full blocks "
         "only"),
    ]  # fmt: skip


def _cache_cases() -> list[Case]:
    cases = []
    for size, admits, why in _cache_specs():
        args = (size, admits)
        cases.append(Case(args, replay_cache(None, *args), _cache_label(args), "fixed", why))
    rng = seeded(1006)
    for _ in range(10):
        size = rng.choice([2, 3, 4])
        base = [rng.randint(0, 5) for _ in range(rng.randint(0, 12))]
        admits = [
            (base + [rng.randint(0, 5) for _ in range(rng.randint(1, 8))], rng.random() < 0.4)
            for _ in range(rng.randint(2, 5))
        ]
        args = (size, admits)
        cases.append(Case(args, replay_cache(None, *args), _cache_label(args), "generated"))
    return cases


def _cache_label(args: tuple[Any, ...]) -> str:
    size, admits = args
    said = "; ".join(f"{t}{' (then finishes)' if done else ''}" for t, done in admits)
    return f"blocks of {size}; prompts admitted in turn: {said}"


def _diagnose_cache(fn: Callable[..., Any], case: Case) -> str:
    got = fn(*case.args)
    for k, (want, have) in enumerate(zip(case.expected, got, strict=False)):
        if want != have:
            part = "hit blocks" if want[0] != have[0] else "the table's blocks"
            w, h = (want[0], have[0]) if want[0] != have[0] else (want[1], have[1])
            return f"admitting prompt {k + 1}: {part} expected {w}, got {h}"
    return ""


EXERCISES_CAPSTONE_05 = [
    Exercise(
        name="append_cow",
        notebook="05_sharing",
        task="Build copy-on-write: append one token to a table holding `blocks` and "
        "num_tokens tokens, whose blocks other tables (forks) may share; return its new block "
        "list. Use the real allocator: allocator.block_size, allocator.refcount(b), "
        "allocator.allocate() (a new block), allocator.free(b) (drop one reference). check "
        "replays seeded forks and appends on your function and on pagedlab's BlockTable.",
        params=("allocator", "blocks", "num_tokens"),
        returns="list[int]",
        cases=_cow_cases,
        solution=append_cow,
        adapt=adapt_cow,
        compare=_compare_logs,
        convert=False,
        diagnose=_diagnose_cow,
    ),
]

EXERCISES_CAPSTONE_06 = [
    Exercise(
        name="prefix_cache",
        notebook="06_prefix_caching",
        task="Build a prefix cache: complete MyPrefixCache's lookup and register with chained "
        "hashes. check admits seeded prompts through your cache and through pagedlab's "
        "PrefixCache over real allocators and compares every admission's hit blocks and "
        "table.",
        params=("block_size", "admits"),
        returns="replay log",
        cases=_cache_cases,
        solution=_ReferenceCache,
        adapt=adapt_cache,
        compare=lambda e, g: isinstance(g, list) and g == e,
        convert=False,
        diagnose=_diagnose_cache,
        todo="Write lookup and register",
        stub_code=PREFIX_CACHE_STUB,
        entry="MyPrefixCache",
    ),
]
