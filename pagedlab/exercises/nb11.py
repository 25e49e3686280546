"""Notebook 11 (PagedAttention in 2026): the hit-rate law, and classifying a miss. Answers: a real
:class:`pagedlab.PrefixCache` on vLLM's pool rule (``vllm_block_pool``; ``tests/frontier/oracles``
checks the same numbers against vLLM 0.34's ``KVCacheManager``) and ``MissClassifier``.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.frontier.miss_reasons import REASONS, MissClassifier
from pagedlab.frontier.peers import vllm_block_pool
from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.memory.prefix_cache import PrefixCache

NB11 = "11_pagedattention_in_2026"


# --- the solutions ---------------------------------------------------------------------------
def shared_prefix_hits(prefix: int, suffixes: list[int], block_size: int) -> int:
    """Hit tokens when requests that share ``prefix`` tokens, each followed by ``suffixes[i]``
    tokens of its own, are admitted one after another into an empty prefix cache."""
    whole = prefix // block_size
    return sum(min(whole, (prefix + s - 1) // block_size) * block_size for s in suffixes[1:])


def miss_counts(
    tokens: int, hashes: list[str], block_size: int, cached: set[str], seen: set[str]
) -> dict[str, int]:
    """A prompt of ``tokens`` tokens (``hashes``: its full blocks' chained hashes), with
    ``cached`` the hashes the cache holds and ``seen`` every hash an earlier request computed:
    its tokens by reason, the keys of ``REASONS``."""
    counts = dict.fromkeys(REASONS, 0)
    limit, hits = (tokens - 1) // block_size, 0
    while hits < min(limit, len(hashes)) and hashes[hits] in cached:
        hits += 1
    counts["hit"] = hits * block_size
    counts["shorter than a block"] = tokens - len(hashes) * block_size
    first = None
    for i in range(hits, len(hashes)):
        if i >= limit and first is None and hashes[i] in cached:
            reason = "the last-token rule"
        elif hashes[i] in cached and first is not None:
            reason = first
        elif hashes[i] in seen:
            reason = "evicted"
        else:
            reason = "no shared prefix"
        first = first or reason
        counts[reason] += block_size
    return counts


# --- the cases -------------------------------------------------------------------------------
def _real_hits(prefix: int, suffixes: list[int], block_size: int) -> int:
    """The same requests through a real prefix cache (a pool large enough to evict nothing)."""
    need = sum(prefix + s for s in suffixes) // block_size + len(suffixes) + 1
    cache = PrefixCache(vllm_block_pool(need + 1, block_size))
    shared = list(range(1, prefix + 1))
    hits = 0
    for i, s in enumerate(suffixes):
        hits += cache.admit(shared + [10_000 * (i + 1) + t for t in range(s)] or [0]).hit_tokens
    return hits


LAW = [
    (300, [50, 50, 50], 16, "3 requests, a 300-token prefix: 2 x 18 blocks of 16 hit",
     ("first_counted", "ceil")),
    (908, [20, 20, 20, 20], 1056, "a 908-token prefix at blocks of 1,056: nothing is a full block"),
    (256, [0, 0], 16, "the prompt is the whole prefix: the last-token rule", ("no_last_token",)),
    (20, [4, 0, 9], 8, "blocks of 8, one prompt with no suffix", ("no_last_token", "ceil")),
    (64, [1], 64, "one request: nothing to share", ("first_counted",)),
]  # fmt: skip


def _law(rng: random.Random) -> tuple[Any, ...]:
    size = rng.choice([4, 8, 16, 64])
    return rng.randint(1, 300), [rng.randint(0, 40) for _ in range(rng.randint(1, 5))], size


def _miss_cases(seed: int, count: int, block_size: int) -> list[tuple[Any, ...]]:
    """Each prompt of a seeded workload with what the classifier saw, and its real counts."""
    rng = random.Random(seed)
    prefixes = [[rng.randint(1, 9) for _ in range(rng.randint(0, 40))] for _ in range(3)]
    classifier = MissClassifier(vllm_block_pool(64 // block_size + 1, block_size))  # evicts
    out = []
    for n in range(count):
        ids = rng.choice(prefixes) + [rng.randint(1, 9) for _ in range(rng.randint(1, 20))]
        hashes = classifier.cache.hashes(ids)
        cached = set(classifier.cache.cached_blocks().values()) & set(hashes)
        seen = classifier.seen & set(hashes)
        counts = classifier.run_step([(f"R{n}", ids)])[0].counts
        out.append((len(ids), hashes, block_size, cached, seen, counts))
    return out


def _miss_spec(rng: random.Random) -> tuple[Any, ...]:
    return tuple(rng.choice(_miss_cases(rng.randint(0, 10**6), 8, rng.choice([2, 4])))[:5])


def _misses() -> list[tuple[Any, ...]]:
    return [
        (
            *_miss_cases(11, 6, 4)[5][:5],
            "a prompt after five others on a 16-block pool",
            ("hits_only", "evicted_as_new"),
        ),
        *MISSES,
    ]


MISSES = [
    (300, [], 512, set(), set(), "a prompt shorter than a block: nothing is a full block"),
    (8, ["a", "b"], 4, {"a", "b"}, {"a", "b"}, "both blocks cached, 8 tokens: the last-token rule",
     ("hits_only",)),
    (9, ["a", "b"], 4, set(), {"a", "b"}, "both computed before, neither cached now: evicted",
     ("evicted_as_new",)),
]  # fmt: skip


def _hits_only(n: int, h: list[str], b: int, c: set[str], s: set[str]) -> dict[str, int]:
    out = dict.fromkeys(REASONS, 0)
    k = 0
    while k < len(h) and h[k] in c:
        k += 1
    out["hit"], out["no shared prefix"] = k * b, n - k * b
    return out


def _evicted_as_new(n: int, h: list[str], b: int, c: set[str], s: set[str]) -> dict[str, int]:
    return miss_counts(n, h, b, c, set())


EXERCISES_11 = [
    Function(shared_prefix_hits, NB11,
        task="Requests that share a prefix of `prefix` tokens, request i followed by "
        "`suffixes[i]` tokens of its own, are admitted one after another into an empty prefix "
        "cache of blocks of `block_size` (full blocks only, the last prompt token always "
        "computed). How many prompt tokens hit in all?",
        cases=lambda: cases(LAW, _law, 16, 1101, expect=_real_hits),
        mistakes=[
            Mistake("the first request finds an empty cache: it hits nothing.",
                    lambda p, s, b: len(s) * (p // b) * b, "first_counted"),
            Mistake("only full blocks are cached: round the prefix down to a multiple of the "
                    "block, not up.", lambda p, s, b: (len(s) - 1) * -(-p // b) * b, "ceil"),
            Mistake("the last prompt token is always computed: a prompt that is exactly the "
                    "prefix hits at most (length - 1) // block_size blocks.",
                    lambda p, s, b: (len(s) - 1) * (p // b) * b, "no_last_token"),
        ],
    ),
    Function(miss_counts, NB11,
        task="Classify one prompt's tokens. `hashes` are its full blocks' chained hashes, "
        "`cached` the hashes the cache holds now, `seen` every hash an earlier request "
        "computed. Return a dict with every key of REASONS: hit, no shared prefix, shorter "
        "than a block, the last-token rule, evicted (a full block after the first miss takes "
        "the first miss's reason if its own hash is still cached).",
        cases=lambda: cases(_misses(), _miss_spec, 16, 1102, expect=miss_counts),
        setup="from pagedlab.frontier.miss_reasons import REASONS",
        mistakes=[
            Mistake("a miss has a reason: the partly filled block, the last-token rule and "
                    "evicted blocks each get their own key.", _hits_only, "hits_only"),
            Mistake("a block an earlier request computed, no longer cached, was evicted: `seen` "
                    "says which.", _evicted_as_new, "evicted_as_new"),
        ],
    ),
]  # fmt: skip
