"""Notebook 04 (the kernel at work): the kernel's masks (``valid_slots``, answers off
``paged_attention_steps``, the kernel's loop in Python) and grouped-query attention
(``kv_head``, off :func:`pagedlab.reference_attention`). Its Triton exercises: :mod:`.nb04_ladder`,
:mod:`.nb04_puzzle`.
"""

from __future__ import annotations

import random

import torch

from pagedlab.attention.kernel_steps import paged_attention_steps
from pagedlab.attention.ops import block_tables_tensor, reference_attention
from pagedlab.exercises.nb03 import filled_cache
from pagedlab.grade.cases import Case, Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.ground.checks import ceil_div

NB04 = "04_kernel_at_work"


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


def _valid(rng: random.Random) -> tuple[int, int, int]:
    size, seq_len = rng.choice([1, 2, 3, 4, 5, 8, 16]), rng.randint(1, 60)
    return seq_len, rng.randrange(ceil_div(seq_len, size)), size


def _masked_past(seq_len: int, logical: int, size: int) -> int:
    """The positions the kernel's own loop (in plain Python) reads from logical block
    ``logical``: the slots that hold a token."""
    pages = list(range(ceil_div(seq_len, size)))
    cache = filled_cache(pages, seq_len, size, 1, 1, seed=0)
    steps = paged_attention_steps(torch.ones(1, 1), cache.key, cache.value, pages, seq_len)
    return len(steps[logical].positions)


KV_GROUPS = [  # (num_heads, num_kv_heads, why, catches): one fixed case per query head
    (8, 2, "8 query heads on 2 kv heads: heads 0-3 read kv head 0, 4-7 kv head 1",
     ("interleaved", "by_kv_heads")),
    (4, 4, "as many kv heads as query heads: each reads its own", ()),
    (4, 1, "one kv head (multi-query attention): every head reads it", ()),
    (6, 3, "6 query heads on 3 kv heads (a group of 2)", ("interleaved", "by_kv_heads")),
    (32, 8, "Llama-style: 32 query heads on 8 kv heads", ("interleaved", "by_kv_heads")),
    (12, 4, "12 on 4: groups of 3 (not a power of two)", ()),
]  # fmt: skip


def _kv_read(head: int, num_heads: int, kv_heads: int) -> int:
    """The kv head query head ``head`` reads in reference_attention (kv head h holds h)."""
    value = torch.arange(kv_heads, dtype=torch.float32)[None, None, :, None]
    out = reference_attention(torch.ones(1, num_heads, 1), torch.zeros(1, 1, kv_heads, 1),
                              value.contiguous(), block_tables_tensor([[0]]),
                              torch.tensor([1], dtype=torch.int32))  # fmt: skip
    return int(out[0, head, 0])


def _kv_draw(rng: random.Random) -> tuple[int, int, int]:
    """A seeded grouping and one query head of it."""
    kv_heads = rng.choice([1, 2, 3, 4, 8])
    num_heads = kv_heads * rng.randint(1, 6)
    return rng.randrange(num_heads), num_heads, kv_heads


def _kv_head_cases() -> list[Case]:
    fixed = [(h, n, k, why, catches) for n, k, why, catches in KV_GROUPS for h in range(n)]
    return cases(fixed, _kv_draw, 6, 402, expect=_kv_read)


EXERCISES_04 = [
    Function(valid_slots, NB04,
        task="The kernel reads logical block `logical` of a sequence of seq_len tokens. How many "
        "of its block_size slots hold a token (the others are masked)?",
        cases=lambda: cases(_VALID_SPECS, _valid, 20, 401, expect=_masked_past),
        mistakes=[
            Mistake("forgot the partly filled last block: its slots past seq_len are masked.",
                    lambda n, i, b: b, "forgot_last"),
            Mistake("a full last block has block_size valid slots, not 0.",
                    lambda n, i, b: n % b if i == (n - 1) // b else b, "full_zero"),
            Mistake("no block holds more than block_size tokens.",
                    lambda n, i, b: n - i * b, "overfull"),
        ],
    ),
    Function(kv_head, NB04,
        task="Grouped-query attention: which kv head does query head `head` read, with num_heads "
        "query heads sharing num_kv_heads kv heads?",
        cases=_kv_head_cases,
        mistakes=[
            Mistake("groups are consecutive heads (0-3 share kv head 0), not interleaved.",
                    lambda h, n, k: h % k, "interleaved"),
            Mistake("that divides by the number of kv heads: heads are grouped by how many query "
                    "heads share one kv head.", lambda h, n, k: h // k, "by_kv_heads"),
        ],
    ),
]  # fmt: skip
