"""Exercises of notebooks 05 (sharing: fork, copy-on-write) and 06 (prefix caching).

Expected answers come from real tables forked with :func:`pagedlab.fork_samples`, from
:func:`pagedlab.memory.savings.parallel_savings`, from
:func:`pagedlab.memory.prefix_cache.block_hashes` and from a real :class:`pagedlab.PrefixCache`.
"""

from __future__ import annotations

from pagedlab.exercises.core import Case, Exercise, Mistake, seeded
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


_COPY_SPECS = [
    (5, 4, 2, "5 tokens: the last block is partly filled and held by 2 tables, so it is copied",
     ("ref2",)),
    (4, 4, 2, "a full last block: the new token goes to a new block, nothing is copied",
     ("full_last",)),
    (5, 4, 1, "held by this table alone: the token is written in place", ("in_place",)),
    (13, 4, 2, "the shared partly filled block is the fourth, not the first", ()),
    (8, 4, 3, "full blocks held by 3 tables", ("full_last",)),
    (1, 4, 4, "one token in a block held by 4 tables", ("ref2",)),
    (7, 3, 3, "blocks of 3 (not a power of two), partly filled, shared", ()),
    (6, 3, 2, "blocks of 3 (not a power of two), full and shared: the new token takes a new "
     "block", ("full_last",)),
]  # fmt: skip


def _copy_cases() -> list[Case]:
    specs = list(_COPY_SPECS)
    rng = seeded(501)
    specs += [
        (rng.randint(1, 40), rng.choice([1, 2, 3, 4, 8]), rng.randint(1, 4), "", ())
        for _ in range(24)
    ]
    cases = []
    for n, size, holders, why, catches in specs:
        pool = BlockAllocator(n // size + holders + 2, size)
        table = fresh_table_in(pool, n)
        fork_samples(table, holders)
        copied = table.append_tokens(1) is not None
        cases.append(
            Case((n, size, holders), copied, kind="fixed" if why else "generated", why=why,
                 catches=catches)
        )  # fmt: skip
    return cases


def fresh_table_in(pool: BlockAllocator, num_tokens: int) -> BlockTable:
    table = BlockTable(pool)
    table.append_tokens(num_tokens)
    return table


_REFCOUNT_SPECS = [
    (7, 4, 2, "7 tokens: block 0 stays shared by both; the partly filled block is copied once",
     ("no_cow", "keeps_zero")),
    (8, 4, 2, "a full last block is never copied: each sample's token takes a new block",
     ("full_copied",)),
    (5, 4, 3, "3 samples: the first two writers copy the partly filled block", ("no_cow",)),
    (3, 4, 1, "one sample: nothing is shared, nothing is copied", ()),
    (4, 4, 4, "4 samples of a full block", ("full_copied",)),
    (1, 1, 3, "blocks of 1: every prompt block is full", ()),
    (10, 3, 2, "blocks of 3 (not a power of two)", ()),
]  # fmt: skip


def _refcount_cases() -> list[Case]:
    specs = list(_REFCOUNT_SPECS)
    rng = seeded(502)
    specs += [
        (rng.randint(1, 40), rng.choice([2, 3, 4, 8]), rng.randint(1, 5), "", ()) for _ in range(20)
    ]
    cases = []
    for prompt_len, size, n, why, catches in specs:
        pool = BlockAllocator(prompt_len // size + 2 * n + 2, size)
        prompt = fresh_table_in(pool, prompt_len)
        blocks = list(prompt.blocks)
        for sample in fork_samples(prompt, n):
            sample.append_tokens(1)
        counts = [pool.refcount(b) for b in blocks]
        cases.append(
            Case((prompt_len, size, n), counts, kind="fixed" if why else "generated", why=why,
                 catches=catches)
        )  # fmt: skip
    return cases


_HELD_SPECS = [
    (7, 1, 2, 4, "a 7-token prompt, 2 samples of 1 token: the full block is held once, the "
     "partly filled one is copied", ("no_sharing", "partial_shared")),
    (8, 4, 2, 4, "a block-aligned prompt: both its blocks are shared", ("no_sharing",)),
    (5, 11, 3, 4, "3 samples writing well past the prompt", ("partial_shared",)),
    (16, 16, 4, 16, "the paper's blocks of 16", ()),
    (10, 6, 1, 4, "one sample: nothing to share", ()),
    (9, 5, 3, 3, "blocks of 3 (not a power of two)", ()),
]  # fmt: skip


def _held_cases() -> list[Case]:
    specs = list(_HELD_SPECS)
    rng = seeded(503)
    specs += [
        (rng.randint(1, 60), rng.randint(1, 60), rng.randint(1, 6), rng.choice([2, 3, 4, 8, 16]),
         "", ())
        for _ in range(20)
    ]  # fmt: skip
    cases = []
    for p, o, n, size, why, catches in specs:
        expected = parallel_savings(p, o, n, size).blocks_with
        cases.append(
            Case((p, o, n, size), expected, kind="fixed" if why else "generated", why=why,
                 catches=catches)
        )  # fmt: skip
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
                "full_last",
            ),
            Mistake(
                "a block held only by this table is written in place: no copy.",
                lambda n, b, h: n % b != 0,
                "in_place",
            ),
            Mistake(
                "a ref count of 2 already means shared.",
                lambda n, b, h: n % b != 0 and h > 2,
                "ref2",
            ),
        ],
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
                "no_cow",
            ),
            Mistake(
                "the last sample to write keeps the original last block (ref count 1).",
                lambda p, b, n: [n] * (p // b) + ([0] if p % b else []),
                "keeps_zero",
            ),
            Mistake(
                "a full last block is not copied: each sample takes a new block instead.",
                lambda p, b, n: [n] * (-(-p // b) - 1) + [1],
                "full_copied",
            ),
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
                "no_sharing",
            ),
            Mistake(
                "the prompt's partly filled block is copied by the samples' writes.",
                lambda p, o, n, b: -(-p // b) + n * (-(-(p + o) // b) - -(-p // b)),
                "partial_shared",
            ),
        ],
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


def prefix_hits(cached: set[str], prompt: list[int], block_size: int) -> int:
    """Cached blocks a new prompt starts on: its chained hashes, from the first, while cached."""
    hits = 0
    for h in chain_hashes(prompt[: len(prompt) - 1], block_size):  # the last token is computed
        if h not in cached:
            break
        hits += 1
    return hits


def _hash_cases() -> list[Case]:
    specs = [
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], 4, "two full blocks and a 1-token tail: the second hash "
         "covers the first block too", ("not_chained", "with_tail")),
        ([1, 2, 3, 4], 4, "one full block: one hash", ()),
        ([7, 7], 4, "no full block: no hash", ("with_tail",)),
        ([1, 2, 3, 1, 2, 3], 3, "the same tokens in two blocks: chained, their hashes differ",
         ("not_chained",)),
        ([5, 6, 7], 1, "blocks of 1", ("not_chained",)),
    ]  # fmt: skip
    rng = seeded(601)
    specs += [
        ([rng.randint(0, 50) for _ in range(rng.randint(0, 30))], rng.choice([2, 3, 4, 8]), "", ())
        for _ in range(16)
    ]
    return [
        Case((t, b), block_hashes(t, b), kind="fixed" if why else "generated", why=why,
             catches=catches)
        for t, b, why, catches in specs
    ]  # fmt: skip


SYSTEM = [101, 102, 103, 104, 105, 106, 107, 108]


def cache_after(admitted: list[list[int]], pool: int, block_size: int) -> set[str]:
    """The hashes a real PrefixCache holds after admitting these prompts one after the other
    in a pool of ``pool`` blocks, each request finishing (its table freed) before the next:
    a small pool evicts the oldest free cached blocks."""
    cache = PrefixCache(BlockAllocator(pool, block_size))
    for tokens in admitted:
        cache.admit(tokens).table.free()
    return set(cache.cached_blocks().values())


def _hits_specs() -> list[tuple[list[list[int]], int, list[int], int, str, tuple[str, ...]]]:
    return [
        ([SYSTEM + [1, 2, 3]], 16, SYSTEM + [7, 8], 4,
         "the 8-token system prompt is cached in 2 blocks; the third block differs",
         ("not_chained",)),
        ([SYSTEM + [1, 2, 3, 4]], 16, SYSTEM, 4,
         "a block-aligned prompt: its last token is always computed, so its last block is not "
         "a hit", ("ignoring_last",)),
        ([[9] * 4 + SYSTEM], 16, SYSTEM + [1], 4,
         "the same tokens behind another prefix: their chained hashes differ", ()),
        ([[5] * 9, SYSTEM + [1, 2, 3]], 16, SYSTEM + [1, 2, 3, 9], 4,
         "the hit comes from the second of two cached prompts", ("ignoring_last",)),
        ([SYSTEM + [1], [7] * 12, [8] * 12], 6, SYSTEM + [1, 2], 4,
         "later requests took the system prompt's free blocks: its hashes were evicted", ()),
        ([], 4, SYSTEM + [1], 4, "an empty cache: no hit", ()),
        ([list(range(20))], 16, list(range(12)) + [99], 3,
         "blocks of 3 (not a power of two)", ()),
    ]  # fmt: skip


def _hits_cases() -> list[Case]:
    specs = _hits_specs()
    rng = seeded(602)
    for _ in range(16):
        base = [rng.randint(0, 9) for _ in range(rng.randint(0, 16))]
        earlier = [
            base + [rng.randint(0, 9) for _ in range(rng.randint(0, 8))]
            for _ in range(rng.randint(0, 3))
        ]
        earlier = [tokens for tokens in earlier if tokens]  # a request holds a token at least
        prompt = base + [rng.randint(0, 9) for _ in range(rng.randint(1, 8))]
        pool, size = rng.randint(10, 40), rng.choice([2, 3, 4])
        longest = max([len(tokens) for tokens in earlier], default=0)
        specs.append((earlier, max(pool, -(-longest // size)), prompt, size, "", ()))
    cases = []
    for earlier, pool, prompt, size, why, catches in specs:
        cached = cache_after(earlier, pool, size)
        cache = PrefixCache(BlockAllocator(pool, size))
        for tokens in earlier:
            cache.admit(tokens).table.free()
        hits = len(cache.lookup(prompt)[0])
        label = (
            f"cached = the {len(cached)} hashes left after admitting {earlier} in {pool} blocks, "
            f"prompt={prompt}, block_size={size}"
        )
        cases.append(
            Case((cached, prompt, size), hits, label, "fixed" if why else "generated", why,
                 catches)
        )  # fmt: skip
    return cases


def _hits_ignoring_last(cached: set[str], prompt: list[int], b: int) -> int:
    hits = 0
    for h in block_hashes(prompt, b):
        if h not in cached:
            break
        hits += 1
    return hits


def _hits_by_content(cached: set[str], prompt: list[int], b: int) -> int:
    hits = 0
    for s in range(0, len(prompt) - 1 - b + 1, b):
        if chain_hash(ROOT_HASH, prompt[s : s + b]) not in cached:
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
                "not_chained",
            ),
            Mistake(
                "the partly filled tail has no hash: only full blocks are cached.",
                lambda t, b: _with_tail(t, b),
                "with_tail",
            ),
        ],
    ),
    Exercise(
        name="prefix_hits",
        notebook=NB06,
        task="`cached` is the set of block hashes a prefix cache holds now (after earlier "
        "requests, and evictions). How many cached blocks does `prompt` start on?",
        params=("cached", "prompt", "block_size"),
        returns="int",
        cases=_hits_cases,
        solution=prefix_hits,
        setup="from pagedlab.memory.prefix_cache import block_hashes  # or my_chain_hashes",
        mistakes=[
            Mistake(
                "the last prompt token is always computed, so its block is never a hit.",
                _hits_ignoring_last,
                "ignoring_last",
            ),
            Mistake(
                "the cache holds chained hashes: a block's hash covers every block before it.",
                _hits_by_content,
                "not_chained",
            ),
        ],
    ),
]


def _with_tail(t: list[int], b: int) -> list[str]:
    hashes = block_hashes(t, b)
    if len(t) % b:
        hashes.append(chain_hash(hashes[-1] if hashes else ROOT_HASH, t[len(t) - len(t) % b :]))
    return hashes
