"""Notebook 03 (same data, any layout): gather one sequence's K/V, fold one block into the
online softmax, in torch on the CPU. Answers: :meth:`pagedlab.PagedKVCache.gather` and
:func:`pagedlab.attention.kernel_steps.paged_attention_steps` (the kernel's steps).
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from pagedlab.attention.kernel_steps import paged_attention_steps
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.grade.cases import Case, Mistake, cases, seed_of
from pagedlab.grade.core import Function
from pagedlab.grade.tensors import tensors_equal
from pagedlab.ground.checks import ceil_div

NB03 = "03_same_data_any_layout"


def filled_cache(
    blocks: list[int], num_tokens: int, block_size: int, kv_heads: int, head_dim: int, seed: int
) -> PagedKVCache:
    """A CPU cache whose sequence (``blocks``, ``num_tokens``) holds seeded random K/V; every
    other slot holds its own random values too, so reading a wrong slot shows."""
    pool = max(blocks) + 2
    cache = PagedKVCache(pool, block_size, kv_heads, head_dim, device="cpu")
    generator = torch.Generator().manual_seed(seed_of(seed))
    cache.key.copy_(torch.randn(cache.key.shape, generator=generator).round(decimals=2))
    cache.value.copy_(torch.randn(cache.value.shape, generator=generator).round(decimals=2))
    return cache


# --- 03 · gather and the online softmax -----------------------------------------------------
def gather_kv(key_cache: torch.Tensor, blocks: list[int], num_tokens: int) -> torch.Tensor:
    """K of one sequence in logical order, ``[num_tokens, num_kv_heads, head_dim]``."""
    block_size = key_cache.shape[1]
    pages = ceil_div(num_tokens, block_size)
    return key_cache[blocks[:pages]].flatten(0, 1)[:num_tokens]


def online_step(
    m: float, l_sum: float, acc: list[float], scores: list[float], values: list[list[float]]
) -> tuple[float, float, list[float]]:
    """Fold one block (its ``scores`` and ``values``) into the running (max, sum, acc)."""
    m_new = max([m, *scores])
    alpha = math.exp(m - m_new)  # 0 on the first block: m = -inf
    weights = [math.exp(s - m_new) for s in scores]
    l_new = l_sum * alpha + sum(weights)
    acc_new = [
        a * alpha + sum(w * v[d] for w, v in zip(weights, values, strict=True))
        for d, a in enumerate(acc)
    ]
    return m_new, l_new, acc_new


GATHERS = [  # (blocks, tokens, block size, kv heads, head dim, seed, padding entries, why)
    ([4, 1], 5, 4, 1, 2, 3000, 0, "the example: blocks [4, 1], the last one partly filled",
     ("sorted", "identity", "tail")),
    ([0, 1], 5, 4, 1, 2, 3001, 1, "blocks [0, 1]: the last block's empty slots are not tokens",
     ("tail",)),
    ([3, 0, 2], 9, 4, 2, 3, 3002, 2, "blocks out of order, 2 kv heads", ("sorted",)),
    ([1, 0], 8, 4, 1, 2, 3003, 0, "blocks [1, 0] filled exactly: logical order is the table's",
     ("sorted", "identity")),
    ([5, 2], 4, 3, 1, 2, 3004, 1, "blocks of 3 (not a power of two)", ("identity",)),
]  # fmt: skip


def _gather_cases() -> list[Case]:
    index = iter(range(len(GATHERS), 1000))

    def generate(rng: random.Random) -> tuple[Any, ...]:
        i, size = next(index), rng.choice([1, 2, 3, 4, 8])
        blocks = rng.sample(range(8), rng.randint(1, 5))
        num_tokens = rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)
        return blocks, num_tokens, size, rng.randint(1, 2), rng.randint(1, 4), 3000 + i, i % 3

    def cache(blocks: list[int], n: int, size: int, heads: int, dim: int, seed: int,
              pad: int) -> tuple[PagedKVCache, list[int]]:  # fmt: skip
        return filled_cache(blocks, n, size, heads, dim, seed), blocks + [-1] * pad

    def label(*spec: Any) -> str:
        (c, padded), n = cache(*spec), spec[1]
        return (f"key_cache of shape {list(c.key.shape)} (seeded random), blocks={padded}, "
                f"num_tokens={n}")  # fmt: skip

    def given(*spec: Any) -> tuple[Any, ...]:
        c, padded = cache(*spec)
        return c.key.clone(), padded, spec[1]

    def expect(*spec: Any) -> Any:
        c, padded = cache(*spec)
        return c.gather(padded, spec[1])[0]

    return cases(GATHERS, generate, 12, 301, expect=expect, label=label, given=given)


# (tokens, block size, head_dim, seed): every block of each is a fixed case
STEP_SEQUENCES = [(5, 4, 1, 1), (9, 4, 2, 2), (12, 4, 3, 3), (7, 3, 2, 4)]


def _folds(n: int, size: int, dim: int, seed: int) -> list[tuple[Any, ...]]:
    """Each block of a seeded sequence (one head): (m, l_sum, acc before it, its scores and
    values, the state after it, alpha), read off the kernel's loop (paged_attention_steps)."""
    blocks = list(range(ceil_div(n, size)))[::-1]
    cache = filled_cache(blocks, n, size, 1, dim, seed)
    query = torch.randn(1, dim, generator=torch.Generator().manual_seed(seed_of(seed))) * 3
    before: tuple[Any, ...] = (-math.inf, 0.0, [0.0] * dim)
    folds = []
    for step in paged_attention_steps(query, cache.key, cache.value, blocks, n):
        values = cache.value[step.physical, : len(step.positions), 0].tolist()
        after = (step.m_new, step.l_sum, list(step.acc))
        folds.append((*before, list(step.scores), values, after, step.alpha))
        before = (step.m_new, step.l_sum, list(step.acc))
    return folds


def _step_cases() -> list[Case]:
    fixed = []
    for sequence in STEP_SEQUENCES:
        for j, (*args, alpha) in enumerate(_folds(*sequence)):
            rescaled = j > 0 and alpha < 1.0
            why = _STEP_WHY[0] if j == 0 else _STEP_WHY[1] if rescaled else _STEP_WHY[2]
            fixed.append((*args, why, ("no_rescale", "inverted") if rescaled else ()))

    def generate(rng: random.Random) -> tuple[Any, ...]:  # one block of a seeded sequence
        folds = _folds(rng.randint(2, 20), rng.choice([2, 3, 4]), rng.randint(1, 4),
                       rng.randrange(10, 1000))  # fmt: skip
        return folds[rng.randrange(len(folds))][:-1]

    # a spec ends with the real fold's state after the block: the expected answer
    return cases(fixed, generate, 30, 302, expect=lambda *spec: spec[-1],
                 given=lambda *spec: spec[:-1])  # fmt: skip


_STEP_WHY = (
    "the first block: m starts at -inf, l_sum at 0, acc at zeros",
    "a later block whose scores raise the max: the old sum and acc are rescaled",
    "a later block that leaves the max where it is",
)


def _no_rescale(m: float, l_sum: float, acc: list[float], scores: list[float], values: Any) -> Any:
    m_new = max([m, *scores])
    w = [math.exp(s - m_new) for s in scores]
    return (
        m_new,
        l_sum + sum(w),
        [a + sum(x * v[d] for x, v in zip(w, values, strict=True)) for d, a in enumerate(acc)],
    )


def _inverted(m: float, l_sum: float, acc: list[float], scores: list[float], values: Any) -> Any:
    m_new = max([m, *scores])
    alpha = math.exp(m_new - m) if m > -math.inf else 0.0
    w = [math.exp(s - m_new) for s in scores]
    return (
        m_new,
        l_sum * alpha + sum(w),
        [
            a * alpha + sum(x * v[d] for x, v in zip(w, values, strict=True))
            for d, a in enumerate(acc)
        ],
    )


EXERCISES_03 = [
    Function(gather_kv, NB03,
        task="Read one sequence's keys out of key_cache [num_blocks, block_size, num_kv_heads, "
        "head_dim] through its block list: a tensor [num_tokens, num_kv_heads, head_dim] in "
        "logical order. Entries of blocks past its last needed block are padding.",
        cases=_gather_cases,
        compare=tensors_equal,
        mistakes=[
            Mistake("blocks read in sorted order: logical order is the table's order.",
                    lambda k, bl, n: gather_kv(k, sorted(b for b in bl if b >= 0), n), "sorted"),
            Mistake("physical blocks 0, 1, ... are not this sequence's: go through blocks.",
                    lambda k, bl, n: k[: ceil_div(n, k.shape[1])].flatten(0, 1)[:n], "identity"),
            Mistake("forgot to drop the empty slots of the last block.",
                    lambda k, bl, n: k[bl[: ceil_div(n, k.shape[1])]].flatten(0, 1), "tail"),
        ],
    ),
    Function(online_step, NB03,
        task="One online-softmax step: fold a block's scores and values into the running max m, "
        "sum l_sum and accumulator acc; return (m_new, l_new, acc_new).",
        cases=_step_cases,
        setup="import math",
        mistakes=[
            Mistake("the old sum and acc were summed against the old max: when a block raises "
                    "the max, they must shrink to match the new one.", _no_rescale, "no_rescale"),
            Mistake("the old terms must shrink when the max grows: alpha is at most 1.",
                    _inverted, "inverted"),
        ],
    ),
]  # fmt: skip
