"""Exercises of notebooks 03 (same data, any layout) and 04 (the kernel at work), in torch.

Expected answers come from :meth:`pagedlab.PagedKVCache.gather`, from
:func:`pagedlab.attention.kernel_steps.paged_attention_steps` (the kernel's steps, one block at
a time) and from :func:`pagedlab.reference_attention`. Every tensor lives on the CPU.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pagedlab.attention.kernel_steps import paged_attention_steps
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor, reference_attention
from pagedlab.exercises.core import Case, Exercise, Mistake, seed_of, seeded

NB03, NB04 = "03_same_data_any_layout", "04_kernel_at_work"


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


def tensors_equal(expected: Any, got: Any) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and tuple(got.shape) == tuple(expected.shape)
        and torch.allclose(got.float(), expected.float(), rtol=1e-4, atol=1e-5)
    )


# --- 03 · gather and the online softmax -----------------------------------------------------
def gather_kv(key_cache: torch.Tensor, blocks: list[int], num_tokens: int) -> torch.Tensor:
    """K of one sequence in logical order, ``[num_tokens, num_kv_heads, head_dim]``."""
    block_size = key_cache.shape[1]
    pages = -(-num_tokens // block_size)
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


def _gather_cases() -> list[Case]:
    specs: list[tuple[list[int], int, int, int, int, str, tuple[str, ...]]] = [
        ([4, 1], 5, 4, 1, 2, "the example: blocks [4, 1], the last one partly filled",
         ("sorted", "identity", "tail")),
        ([0, 1], 5, 4, 1, 2, "blocks [0, 1]: the last block's empty slots are not tokens",
         ("tail",)),
        ([3, 0, 2], 9, 4, 2, 3, "blocks out of order, 2 kv heads", ("sorted",)),
        ([1, 0], 8, 4, 1, 2, "blocks [1, 0] filled exactly: logical order is the table's",
         ("sorted", "identity")),
        ([5, 2], 4, 3, 1, 2, "blocks of 3 (not a power of two)", ("identity",)),
    ]  # fmt: skip
    rng = seeded(301)
    for _ in range(12):
        size = rng.choice([1, 2, 3, 4, 8])
        blocks = rng.sample(range(8), rng.randint(1, 5))
        num_tokens = rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)
        specs.append((blocks, num_tokens, size, rng.randint(1, 2), rng.randint(1, 4), "", ()))
    cases = []
    for i, (blocks, n, size, heads, dim, why, catches) in enumerate(specs):
        cache = filled_cache(blocks, n, size, heads, dim, seed=3000 + i)
        padded = blocks + [-1] * (i % 3)  # a table row may carry padding past its last block
        expected = cache.gather(padded, n)[0]
        label = (
            f"key_cache of shape {list(cache.key.shape)} (seeded random), "
            f"blocks={padded}, num_tokens={n}"
        )
        cases.append(
            Case((cache.key.clone(), padded, n), expected, label,
                 "fixed" if why else "generated", why, catches)
        )  # fmt: skip
    return cases


def _step_cases() -> list[Case]:
    specs = [(5, 4, 1, 1, 1), (9, 4, 1, 2, 2), (12, 4, 1, 3, 3), (7, 3, 1, 2, 4)]
    rng = seeded(302)
    specs += [
        (rng.randint(2, 20), rng.choice([2, 3, 4]), 1, rng.randint(1, 4), 10 + k) for k in range(6)
    ]
    cases = []
    for i, (n, size, heads, dim, seed) in enumerate(specs):
        blocks = list(range(-(-n // size)))[::-1]
        cache = filled_cache(blocks, n, size, heads, dim, seed)
        query = torch.randn(1, dim, generator=torch.Generator().manual_seed(seed_of(seed))) * 3
        steps = paged_attention_steps(query, cache.key, cache.value, blocks, n)
        for j, step in enumerate(steps):
            before = (
                (-math.inf, 0.0, [0.0] * dim)
                if j == 0
                else (steps[j - 1].m_new, steps[j - 1].l_sum, list(steps[j - 1].acc))
            )
            values = cache.value[step.physical, : len(step.positions), 0].tolist()
            args = (*before, list(step.scores), values)
            expected = (step.m_new, step.l_sum, list(step.acc))
            why = _STEP_WHY[0] if j == 0 else _STEP_WHY[1] if step.alpha < 1.0 else _STEP_WHY[2]
            catches = () if j == 0 else ("no_rescale", "inverted") if step.alpha < 1.0 else ()
            fixed = i < 4
            cases.append(
                Case(args, expected, kind="fixed" if fixed else "generated",
                     why=why if fixed else "", catches=catches if fixed else ())
            )  # fmt: skip
    cases.sort(key=lambda c: c.kind != "fixed")  # stable: the fixed cases first, in order
    return cases


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
    Exercise(
        name="gather_kv",
        notebook=NB03,
        task="Read one sequence's keys out of key_cache [num_blocks, block_size, num_kv_heads, "
        "head_dim] through its block list: a tensor [num_tokens, num_kv_heads, head_dim] in "
        "logical order. Entries of blocks past its last needed block are padding.",
        params=("key_cache", "blocks", "num_tokens"),
        returns="torch.Tensor",
        cases=_gather_cases,
        solution=gather_kv,
        compare=tensors_equal,
        mistakes=[
            Mistake(
                "blocks read in sorted order: logical order is the table's order.",
                lambda k, bl, n: gather_kv(k, sorted(b for b in bl if b >= 0), n),
                "sorted",
            ),
            Mistake(
                "physical blocks 0, 1, ... are not this sequence's: go through blocks.",
                lambda k, bl, n: k[: -(-n // k.shape[1])].flatten(0, 1)[:n],
                "identity",
            ),
            Mistake(
                "forgot to drop the empty slots of the last block.",
                lambda k, bl, n: k[bl[: -(-n // k.shape[1])]].flatten(0, 1),
                "tail",
            ),
        ],
    ),
    Exercise(
        name="online_step",
        notebook=NB03,
        task="One online-softmax step: fold a block's scores and values into the running max m, "
        "sum l_sum and accumulator acc; return (m_new, l_new, acc_new).",
        params=("m", "l_sum", "acc", "scores", "values"),
        returns="tuple[float, float, list[float]]",
        cases=_step_cases,
        solution=online_step,
        setup="import math",
        mistakes=[
            Mistake(
                "the old sum and acc were summed against the old max: when a block raises the max, "
                "they must shrink to match the new one.",
                _no_rescale,
                "no_rescale",
            ),
            Mistake(
                "the old terms must shrink when the max grows: alpha is at most 1.",
                _inverted,
                "inverted",
            ),
        ],
    ),
]


# --- 04 · the kernel's masks and grouped-query attention ------------------------------------------
def valid_slots(seq_len: int, logical: int, block_size: int) -> int:
    """Slots of logical block ``logical`` that hold a token (the rest are masked)."""
    return min(block_size, seq_len - logical * block_size)


def kv_head(head: int, num_heads: int, num_kv_heads: int) -> int:
    """The kv head that query head ``head`` reads under grouped-query attention."""
    return head // (num_heads // num_kv_heads)


_VALID_SPECS = [
    (5, 1, 4, "5 tokens, blocks of 4: the last block holds 1 token", ("forgot_last", "overfull")),
    (5, 0, 4, "the first block of the same sequence is full", ("overfull",)),
    (8, 1, 4, "a full last block: all 4 slots hold a token", ("full_zero",)),
    (1, 0, 16, "one token in a block of 16", ("forgot_last",)),
    (17, 1, 16, "17 tokens in blocks of 16", ("forgot_last",)),
    (10, 3, 3, "blocks of 3 (not a power of two)", ()),
    (6, 5, 1, "blocks of 1", ()),
]  # fmt: skip


def _valid_cases() -> list[Case]:
    specs = list(_VALID_SPECS)
    rng = seeded(401)
    for _ in range(20):
        size = rng.choice([1, 2, 3, 4, 5, 8, 16])
        seq_len = rng.randint(1, 60)
        specs.append((seq_len, rng.randrange(-(-seq_len // size)), size, "", ()))
    cases = []
    for i, (seq_len, logical, size, why, catches) in enumerate(specs):
        pages = -(-seq_len // size)
        cache = filled_cache(list(range(pages)), seq_len, size, 1, 1, seed=i)
        steps = paged_attention_steps(
            torch.ones(1, 1), cache.key, cache.value, list(range(pages)), seq_len
        )
        cases.append(
            Case((seq_len, logical, size), len(steps[logical].positions),
                 kind="fixed" if why else "generated", why=why, catches=catches)
        )  # fmt: skip
    return cases


def _kv_head_cases() -> list[Case]:
    specs: list[tuple[int, int, str, tuple[str, ...]]] = [
        (8, 2, "8 query heads on 2 kv heads: heads 0-3 read kv head 0, 4-7 kv head 1",
         ("interleaved", "by_kv_heads")),
        (4, 4, "as many kv heads as query heads: each reads its own", ()),
        (4, 1, "one kv head (multi-query attention): every head reads it", ()),
        (6, 3, "6 query heads on 3 kv heads (a group of 2)", ("interleaved", "by_kv_heads")),
        (32, 8, "Llama-style: 32 query heads on 8 kv heads", ("interleaved", "by_kv_heads")),
        (12, 4, "12 on 4: groups of 3 (not a power of two)", ()),
    ]  # fmt: skip
    rng = seeded(402)
    for _ in range(6):  # seeded groupings; one head of each
        kv_heads = rng.choice([1, 2, 3, 4, 8])
        specs.append((kv_heads * rng.randint(1, 6), kv_heads, "", ()))
    cases = []
    for num_heads, kv_heads, why, catches in specs:
        # kv head h holds value h everywhere: the output of query head i names the kv head it read
        value = torch.arange(kv_heads, dtype=torch.float32)[None, None, :, None].expand(
            1, 1, kv_heads, 1
        )
        out = reference_attention(
            torch.ones(1, num_heads, 1),
            torch.zeros(1, 1, kv_heads, 1),
            value.contiguous(),
            block_tables_tensor([[0]]),
            torch.tensor([1], dtype=torch.int32),
        )
        heads = range(num_heads) if why else [rng.randrange(num_heads)]
        for head in heads:
            cases.append(
                Case((head, num_heads, kv_heads), int(out[0, head, 0]),
                     kind="fixed" if why else "generated", why=why, catches=catches)
            )  # fmt: skip
    return cases


EXERCISES_04 = [
    Exercise(
        name="valid_slots",
        notebook=NB04,
        task="The kernel reads logical block `logical` of a sequence of seq_len tokens. How many "
        "of its block_size slots hold a token (the others are masked)?",
        params=("seq_len", "logical", "block_size"),
        returns="int",
        cases=_valid_cases,
        solution=valid_slots,
        mistakes=[
            Mistake(
                "forgot the partly filled last block: its slots past seq_len are masked.",
                lambda n, i, b: b,
                "forgot_last",
            ),
            Mistake(
                "a full last block has block_size valid slots, not 0.",
                lambda n, i, b: n % b if i == (n - 1) // b else b,
                "full_zero",
            ),
            Mistake(
                "no block holds more than block_size tokens.",
                lambda n, i, b: n - i * b,
                "overfull",
            ),
        ],
    ),
    Exercise(
        name="kv_head",
        notebook=NB04,
        task="Grouped-query attention: which kv head does query head `head` read, with num_heads "
        "query heads sharing num_kv_heads kv heads?",
        params=("head", "num_heads", "num_kv_heads"),
        returns="int",
        cases=_kv_head_cases,
        solution=kv_head,
        mistakes=[
            Mistake(
                "groups are consecutive heads (0-3 share kv head 0), not interleaved.",
                lambda h, n, k: h % k,
                "interleaved",
            ),
            Mistake(
                "that divides by the number of kv heads: heads are grouped by how many query heads "
                "share one kv head.",
                lambda h, n, k: h // k,
                "by_kv_heads",
            ),
        ],
    ),
]
