"""Notebook 06 (prefix caching): chained hashes, prefix hits, and the capstone ``prefix_cache``
admitting seeded prompts beside pagedlab's (:func:`~pagedlab.grade.drivers.cache_log`).
Answers: ``block_hashes`` and a real :class:`pagedlab.PrefixCache`. No torch.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function, Replay
from pagedlab.grade.drivers import Admit, cache_log
from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import ROOT_HASH, PrefixCache, block_hashes, chain_hash

NB06 = "06_prefix_caching"


# --- the solutions ---------------------------------------------------------------------------
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


class MyPrefixCache:
    """Full blocks by chained hash: a block's hash covers its tokens and every block before.

    block_size: tokens per block. Nothing is evicted here (the pool is large).
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.block_of: dict[str, int] = {}  # chained hash -> physical block

    def _hashes(self, tokens: list[int]) -> list[str]:
        from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash

        hashes, parent, size = [], ROOT_HASH, self.block_size
        for start in range(0, len(tokens) - size + 1, size):
            parent = chain_hash(parent, tokens[start : start + size])
            hashes.append(parent)
        return hashes

    def lookup(self, tokens: list[int]) -> list[int]:
        """The cached blocks the prompt starts on (its last token is always computed)."""
        found = []
        for h in self._hashes(tokens[: len(tokens) - 1]):
            if h not in self.block_of:
                break
            found.append(self.block_of[h])
        return found

    def register(self, blocks: list[int], tokens: list[int]) -> None:
        """A table's blocks now hold these tokens: cache each full block not cached yet."""
        for block, h in zip(blocks, self._hashes(tokens), strict=False):
            self.block_of.setdefault(h, block)


# --- the cases -------------------------------------------------------------------------------
SYSTEM = [101, 102, 103, 104, 105, 106, 107, 108]
HASHES = [
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], 4, "two full blocks and a 1-token tail: the second hash "
     "covers the first block too", ("not_chained", "with_tail")),
    ([1, 2, 3, 4], 4, "one full block: one hash"),
    ([7, 7], 4, "no full block: no hash", ("with_tail",)),
    ([1, 2, 3, 1, 2, 3], 3, "the same tokens in two blocks: chained, their hashes differ",
     ("not_chained",)),
    ([5, 6, 7], 1, "blocks of 1", ("not_chained",)),
]  # fmt: skip
# (prompts admitted earlier, pool, the new prompt, block size, why, catches)
HITS = [
    ([SYSTEM + [1, 2, 3]], 16, SYSTEM + [7, 8], 4,
     "the 8-token system prompt is cached in 2 blocks; the third block differs",
     ("not_chained",)),
    ([SYSTEM + [1, 2, 3, 4]], 16, SYSTEM, 4,
     "a block-aligned prompt: its last token is always computed, so its last block is not "
     "a hit", ("ignoring_last",)),
    ([[9] * 4 + SYSTEM], 16, SYSTEM + [1], 4,
     "the same tokens behind another prefix: their chained hashes differ"),
    ([[5] * 9, SYSTEM + [1, 2, 3]], 16, SYSTEM + [1, 2, 3, 9], 4,
     "the hit comes from the second of two cached prompts", ("ignoring_last",)),
    ([SYSTEM + [1], [7] * 12, [8] * 12], 6, SYSTEM + [1, 2], 4,
     "later requests took the system prompt's free blocks: its hashes were evicted"),
    ([], 4, SYSTEM + [1], 4, "an empty cache: no hit"),
    ([list(range(20))], 16, list(range(12)) + [99], 3, "blocks of 3 (not a power of two)"),
]  # fmt: skip
ADMITS: list[tuple[int, list[Admit], str]] = [
    (4, [(SYSTEM + [1, 2, 3], False), (SYSTEM + [7, 8], False)],
     "notebook 6: B starts on A's two system-prompt blocks"),
    (4, [(SYSTEM + [1, 2, 3, 4], False), (SYSTEM, False)],
     "a block-aligned prompt: its last block is recomputed, not a hit"),
    (4, [([9] * 4 + SYSTEM, False), (SYSTEM + [1], False)],
     "the same tokens behind another prefix: chained hashes differ, no hit"),
    (4, [(SYSTEM + [1], True), (SYSTEM + [2], False)],
     "A finished: its cached blocks are free but still cached, so B hits them"),
    (4, [(SYSTEM + [1, 2, 3, 4, 5], False), (SYSTEM + [1, 2, 3, 4, 6], False),
         (SYSTEM + [1, 2, 3, 4, 7], False)],
     "three requests: the third hits blocks the first registered"),
    (3, [([1, 2, 3, 4, 5, 6, 7], False), ([1, 2, 3, 4, 5, 6, 9], False)],
     "blocks of 3 (not a power of two)"),
    (4, [(SYSTEM, False), (SYSTEM, False), (SYSTEM + [5], False)],
     "B recomputes A's last block into a new one, a duplicate: the cache keeps A's, so C "
     "hits A's blocks"),
    (4, [([1] * 4 + [3] * 4 + [5] * 4 + [9], False), ([2] * 4 + [3] * 4 + [9], False),
         ([2] * 4 + [3] * 4 + [5] * 4 + [9], False)],
     "C's third block holds A's tokens, at A's index, after B's block: it is not A's "
     "block (a block's hash covers every block before it, not its index or its neighbour)"),
    (4, [(SYSTEM + [1], False), ([7] * 8 + [1], False), ([8] * 8 + [1], False),
         ([8] * 8 + [2], False)],
     "four requests: the fourth hits the blocks the third registered"),
    (4, [(SYSTEM + [7, 7], False), (SYSTEM + [7, 7, 9], False)],
     "A's last block holds 2 of 4 tokens: it is not cached (register only full blocks), so "
     "B hits A's 2 full blocks only"),
]  # fmt: skip


def _cache(admitted: list[list[int]], pool: int, block_size: int) -> PrefixCache:
    """A real PrefixCache after these prompts, each finishing before the next (a small
    ``pool`` evicts the oldest free cached blocks)."""
    cache = PrefixCache(BlockAllocator(pool, block_size))
    for tokens in admitted:
        cache.admit(tokens).table.free()
    return cache


def _hits_spec(rng: random.Random) -> tuple[Any, ...]:
    base = [rng.randint(0, 9) for _ in range(rng.randint(0, 16))]
    earlier = [base + [rng.randint(0, 9) for _ in range(rng.randint(0, 8))]
               for _ in range(rng.randint(0, 3))]  # fmt: skip
    earlier = [tokens for tokens in earlier if tokens]  # a request holds a token at least
    prompt = base + [rng.randint(0, 9) for _ in range(rng.randint(1, 8))]
    pool, size = rng.randint(10, 40), rng.choice([2, 3, 4])
    longest = max([len(tokens) for tokens in earlier], default=0)
    return earlier, max(pool, ceil_div(longest, size)), prompt, size


def _hits_label(earlier: list[list[int]], pool: int, prompt: list[int], size: int) -> str:
    cached = set(_cache(earlier, pool, size).cached_blocks().values())
    return (f"cached = the {len(cached)} hashes left after admitting {earlier} in {pool} "
            f"blocks, prompt={prompt}, block_size={size}")  # fmt: skip


def _admits(rng: random.Random) -> tuple[Any, ...]:
    size = rng.choice([2, 3, 4])
    base = [rng.randint(0, 5) for _ in range(rng.randint(0, 12))]
    return size, [(base + [rng.randint(0, 5) for _ in range(rng.randint(1, 8))],
                   rng.random() < 0.4) for _ in range(rng.randint(2, 5))]  # fmt: skip


def _admits_label(size: int, admits: list[Admit]) -> str:
    said = "; ".join(f"{t}{' (then finishes)' if done else ''}" for t, done in admits)
    return f"blocks of {size}; prompts admitted in turn: {said}"


def _with_tail(t: list[int], b: int) -> list[str]:
    hashes = block_hashes(t, b)
    if len(t) % b:
        hashes.append(chain_hash(hashes[-1] if hashes else ROOT_HASH, t[len(t) - len(t) % b :]))
    return hashes


def _hits_with(cached: set[str], hashes: list[str]) -> int:
    hits = 0
    for h in hashes:
        if h not in cached:
            break
        hits += 1
    return hits


EXERCISES_06 = [
    Function(chain_hashes, NB06,
        task="The chained hash of each full block of tokens: hash(i) = chain_hash(hash(i - 1), "
        "block i's tokens), hash(-1) = ROOT_HASH. A partly filled tail gets no hash.",
        cases=lambda: cases(HASHES, lambda rng: (
            [rng.randint(0, 50) for _ in range(rng.randint(0, 30))], rng.choice([2, 3, 4, 8])),
            16, 601, expect=block_hashes),
        setup="from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash",
        mistakes=[
            Mistake("not chained: each hash must cover the previous block's hash too.",
                    lambda t, b: [chain_hash(ROOT_HASH, t[s : s + b])
                                  for s in range(0, len(t) - b + 1, b)], "not_chained"),
            Mistake("the partly filled tail has no hash: only full blocks are cached.",
                    _with_tail, "with_tail"),
        ],
    ),
    Function(prefix_hits, NB06,
        task="`cached` is the set of block hashes a prefix cache holds now (after earlier "
        "requests, and evictions). How many cached blocks does `prompt` start on?",
        cases=lambda: cases(HITS, _hits_spec, 16, 602, label=_hits_label, given=lambda e, pool,
                            p, b: (set(_cache(e, pool, b).cached_blocks().values()), p, b),
                            expect=lambda e, pool, p, b: len(_cache(e, pool, b).lookup(p)[0])),
        setup="from pagedlab.memory.prefix_cache import block_hashes  # or my_chain_hashes",
        mistakes=[
            Mistake("the last prompt token is always computed, so its block is never a hit.",
                    lambda c, p, b: _hits_with(c, block_hashes(p, b)), "ignoring_last"),
            Mistake("the cache holds chained hashes: a block's hash covers every block before "
                    "it.", lambda c, p, b: _hits_with(c, [chain_hash(ROOT_HASH, p[s : s + b])
                    for s in range(0, len(p) - b, b)]), "not_chained"),
        ],
    ),
    Replay(
        name="prefix_cache",
        notebook=NB06,
        task="Build a prefix cache: complete MyPrefixCache's lookup and register with chained "
        "hashes. check admits seeded prompts through your cache and through pagedlab's "
        "PrefixCache over real allocators and compares every admission's hit blocks and "
        "table.",
        params=("block_size", "admits"),
        cases=lambda: cases(ADMITS, _admits, 10, 1006, expect=lambda *args: cache_log(
            None, *args), label=_admits_label),
        solution=MyPrefixCache,
        driver="cache",
        parts=("hit blocks", "the table's blocks"),
        steps=lambda size, admits: [f"admitting prompt {k}" for k in range(1, len(admits) + 1)],
        todo="Write lookup and register",
        setup="from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash",
        entry="MyPrefixCache",
    ),
]  # fmt: skip
