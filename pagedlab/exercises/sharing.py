"""Exercises of notebooks 05 (sharing: fork, copy-on-write) and 06 (prefix caching).

Expected answers come from real tables forked with :func:`pagedlab.fork_samples`, from
:func:`pagedlab.memory.savings.parallel_savings`, from
:func:`pagedlab.memory.prefix_cache.block_hashes` and from a real :class:`pagedlab.PrefixCache`.
"""

from __future__ import annotations

import random

from pagedlab.exercises.core import Case, Exercise, Mistake
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import ROOT_HASH, PrefixCache, block_hashes, chain_hash
from pagedlab.memory.savings import parallel_savings
from pagedlab.memory.sharing import fork_samples

NB05, NB06 = "05_sharing", "06_prefix_caching"


# --- 05 · sharing ----------------------------------------------------------------------------
def must_copy(num_tokens: int, block_size: int, holders: int) -> bool:
    """Does appending one token copy the last block first (copy-on-write)?"""
    return num_tokens % block_size != 0 and holders > 1


def refcounts_after_fork(prompt_len: int, block_size: int, n: int) -> list[int]:
    """Ref counts of the prompt's blocks after n samples each append one token."""
    full, partial = divmod(prompt_len, block_size)
    return [n] * full + ([1] if partial else [])


def blocks_held(prompt_len: int, output_len: int, n: int, block_size: int) -> int:
    """Blocks n parallel samples hold at the end, sharing the prompt's full blocks."""
    shared = prompt_len // block_size
    own = -(-(prompt_len + output_len) // block_size) - shared
    return shared + n * own


def _copy_cases() -> list[Case]:
    specs = [(5, 4, 2), (4, 4, 2), (5, 4, 1), (8, 4, 3), (1, 4, 4), (7, 16, 2)]
    rng = random.Random(501)
    specs += [(rng.randint(1, 40), rng.choice([1, 2, 4, 8]), rng.randint(1, 4)) for _ in range(24)]
    cases = []
    for i, (n, size, holders) in enumerate(specs):
        pool = BlockAllocator(n // size + holders + 2, size)
        table = fresh_table_in(pool, n)
        fork_samples(table, holders)
        copied = table.append_tokens(1) is not None
        cases.append(Case((n, size, holders), copied, kind="fixed" if i < 6 else "generated"))
    return cases


def fresh_table_in(pool: BlockAllocator, num_tokens: int) -> BlockTable:
    table = BlockTable(pool)
    table.append_tokens(num_tokens)
    return table


def _refcount_cases() -> list[Case]:
    specs = [(7, 4, 2), (8, 4, 2), (5, 4, 3), (3, 4, 1), (4, 4, 4), (1, 1, 3)]
    rng = random.Random(502)
    specs += [(rng.randint(1, 40), rng.choice([2, 4, 8]), rng.randint(1, 5)) for _ in range(20)]
    cases = []
    for i, (prompt_len, size, n) in enumerate(specs):
        pool = BlockAllocator(prompt_len // size + 2 * n + 2, size)
        prompt = fresh_table_in(pool, prompt_len)
        blocks = list(prompt.blocks)
        for sample in fork_samples(prompt, n):
            sample.append_tokens(1)
        counts = [pool.refcount(b) for b in blocks]
        cases.append(Case((prompt_len, size, n), counts, kind="fixed" if i < 6 else "generated"))
    return cases


def _held_cases() -> list[Case]:
    specs = [(7, 1, 2, 4), (8, 4, 2, 4), (5, 11, 3, 4), (16, 16, 4, 16)]
    rng = random.Random(503)
    specs += [
        (rng.randint(1, 60), rng.randint(1, 60), rng.randint(1, 6), rng.choice([2, 4, 8, 16]))
        for _ in range(20)
    ]
    cases = []
    for i, (p, o, n, size) in enumerate(specs):
        expected = parallel_savings(p, o, n, size).blocks_with
        cases.append(Case((p, o, n, size), expected, kind="fixed" if i < 4 else "generated"))
    return cases


EXERCISES_05 = [
    Exercise(
        name="must_copy",
        notebook=NB05,
        task="A sequence of num_tokens tokens; its last block is held by `holders` tables (its ref "
        "count). Does appending one token copy that block first (copy-on-write)?",
        params=("num_tokens", "block_size", "holders"),
        returns="bool",
        cases=_copy_cases,
        solution=must_copy,
        mistakes=[
            Mistake(
                "a full last block is never written again: the new token gets a new block.",
                lambda n, b, h: h > 1,
            ),
            Mistake(
                "a block held only by this table is written in place: no copy.",
                lambda n, b, h: n % b != 0,
            ),
            Mistake("ref count 2 already means shared.", lambda n, b, h: n % b != 0 and h > 2),
        ],
        hints=["copy only when the write lands in a block someone else also holds."],
    ),
    Exercise(
        name="refcounts_after_fork",
        notebook=NB05,
        task="fork_samples(prompt, n) on a prompt of prompt_len tokens, then each sample appends "
        "one token, sample 0 first. The ref counts of the prompt's blocks, in logical order?",
        params=("prompt_len", "block_size", "n"),
        returns="list[int]",
        cases=_refcount_cases,
        solution=refcounts_after_fork,
        mistakes=[
            Mistake(
                "forgot the copy-on-write of the partly filled last block.",
                lambda p, b, n: [n] * -(-p // b),
            ),
            Mistake(
                "the last sample to write keeps the original last block (ref count 1).",
                lambda p, b, n: [n] * (p // b) + ([0] if p % b else []),
            ),
            Mistake(
                "a full last block is not copied: each sample takes a new block instead.",
                lambda p, b, n: [n] * (-(-p // b) - 1) + [1],
            ),
        ],
        hints=[
            "full blocks stay shared by all n; every write into the shared partial block but "
            "the last copies it."
        ],
    ),
    Exercise(
        name="blocks_held",
        notebook=NB05,
        task="n parallel samples of a prompt of prompt_len tokens each generate output_len tokens. "
        "How many blocks do they hold at the end, sharing what can be shared?",
        params=("prompt_len", "output_len", "n", "block_size"),
        returns="int",
        cases=_held_cases,
        solution=blocks_held,
        mistakes=[
            Mistake(
                "that is without sharing: the prompt's full blocks are held once.",
                lambda p, o, n, b: n * -(-(p + o) // b),
            ),
            Mistake(
                "the prompt's partly filled block is copied by the samples' writes.",
                lambda p, o, n, b: -(-p // b) + n * (-(-(p + o) // b) - -(-p // b)),
            ),
        ],
        hints=["shared: the prompt's full blocks; each sample's own: everything after them."],
    ),
]


# --- 06 · prefix caching -----------------------------------------------------------------------
def chain_hashes(tokens: list[int], block_size: int) -> list[str]:
    """Chained hash of every full block: each block's hash covers its whole prefix."""
    hashes, parent = [], ROOT_HASH
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = chain_hash(parent, tokens[start : start + block_size])
        hashes.append(parent)
    return hashes


def prefix_hits(earlier: list[list[int]], prompt: list[int], block_size: int) -> int:
    """Cached blocks a new prompt starts on, after the earlier prompts were admitted."""
    cached = {h for tokens in earlier for h in chain_hashes(tokens, block_size)}
    hits = 0
    for h in chain_hashes(prompt[: len(prompt) - 1], block_size):  # the last token is computed
        if h not in cached:
            break
        hits += 1
    return hits


def _hash_cases() -> list[Case]:
    specs = [([1, 2, 3, 4, 5, 6, 7, 8, 9], 4), ([1, 2, 3, 4], 4), ([7, 7], 4), ([5, 6, 7], 1)]
    rng = random.Random(601)
    specs += [
        ([rng.randint(0, 50) for _ in range(rng.randint(0, 30))], rng.choice([2, 3, 4, 8]))
        for _ in range(16)
    ]
    return [
        Case((t, b), block_hashes(t, b), kind="fixed" if i < 4 else "generated")
        for i, (t, b) in enumerate(specs)
    ]


def _hits_cases() -> list[Case]:
    system = [101, 102, 103, 104, 105, 106, 107, 108]
    specs: list[tuple[list[list[int]], list[int], int]] = [
        ([system + [1, 2, 3]], system + [7, 8], 4),
        ([system + [1, 2, 3]], system, 4),  # block-aligned: the last block is recomputed
        ([system + [1, 2, 3, 4]], system + [1, 2, 3, 4, 9], 4),
        ([[9] * 4 + system], system + [1], 4),  # the same tokens behind another prefix: no hit
        ([], system + [1], 4),
    ]
    rng = random.Random(602)
    for _ in range(16):
        base = [rng.randint(0, 9) for _ in range(rng.randint(0, 16))]
        earlier = [
            base + [rng.randint(0, 9) for _ in range(rng.randint(0, 8))]
            for _ in range(rng.randint(0, 3))
        ]
        specs.append(
            (
                earlier,
                base + [rng.randint(0, 9) for _ in range(rng.randint(1, 8))],
                rng.choice([2, 4]),
            )
        )
    cases = []
    for i, (earlier, prompt, size) in enumerate(specs):
        cache = PrefixCache(BlockAllocator(sum(len(t) for t in earlier) + len(prompt) + 4, size))
        for tokens in earlier:
            cache.admit(tokens)
        hits = len(cache.lookup(prompt)[0])
        cases.append(Case((earlier, prompt, size), hits, kind="fixed" if i < 5 else "generated"))
    return cases


def _hits_ignoring_last(earlier: list[list[int]], prompt: list[int], b: int) -> int:
    cached = {h for t in earlier for h in block_hashes(t, b)}
    hits = 0
    for h in block_hashes(prompt, b):
        if h not in cached:
            break
        hits += 1
    return hits


def _hits_by_content(earlier: list[list[int]], prompt: list[int], b: int) -> int:
    def unchained(t: list[int]) -> list[str]:
        return [chain_hash(ROOT_HASH, t[s : s + b]) for s in range(0, len(t) - b + 1, b)]

    cached = {h for t in earlier for h in unchained(t)}
    hits = 0
    for h in unchained(prompt[:-1]):
        if h not in cached:
            break
        hits += 1
    return hits


EXERCISES_06 = [
    Exercise(
        name="chain_hashes",
        notebook=NB06,
        task="The chained hash of each full block of tokens: hash(i) = chain_hash(hash(i - 1), "
        "block i's tokens), hash(-1) = ROOT_HASH. A partly filled tail gets no hash.",
        params=("tokens", "block_size"),
        returns="list[str]",
        cases=_hash_cases,
        solution=chain_hashes,
        setup="from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash",
        mistakes=[
            Mistake(
                "not chained: each hash must cover the previous block's hash too.",
                lambda t, b: [
                    chain_hash(ROOT_HASH, t[s : s + b]) for s in range(0, len(t) - b + 1, b)
                ],
            ),
            Mistake(
                "the partly filled tail has no hash: only full blocks are cached.",
                lambda t, b: _with_tail(t, b),
            ),
        ],
        hints=["walk the full blocks in order, feeding each hash in as the next block's parent."],
    ),
    Exercise(
        name="prefix_hits",
        notebook=NB06,
        task="The prompts in `earlier` were admitted to a prefix cache (nothing evicted). How many "
        "cached blocks does `prompt` start on?",
        params=("earlier", "prompt", "block_size"),
        returns="int",
        cases=_hits_cases,
        solution=prefix_hits,
        setup="from pagedlab.memory.prefix_cache import block_hashes  # or my_chain_hashes",
        mistakes=[
            Mistake(
                "the last prompt token is always computed: at most (len(prompt) - 1) // "
                "block_size blocks hit.",
                _hits_ignoring_last,
            ),
            Mistake(
                "the same tokens behind another prefix do not hit: the hashes are chained.",
                _hits_by_content,
            ),
        ],
        hints=["compare the chained hashes block by block from the start; stop at the first miss."],
    ),
]


def _with_tail(t: list[int], b: int) -> list[str]:
    hashes = block_hashes(t, b)
    if len(t) % b:
        hashes.append(chain_hash(hashes[-1] if hashes else ROOT_HASH, t[len(t) - len(t) % b :]))
    return hashes
