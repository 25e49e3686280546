"""Exercises of notebook 07 (memory at scale); notebook 08's are in :mod:`.batching`.

Expected answers come from :func:`pagedlab.simulate.reservation.reserved_slots` (the
reservations of the paper's Fig. 2) and from real block tables. No torch, no numpy: these
graders run in the live site's browser too.
"""

from __future__ import annotations

import random

from pagedlab.checks import ceil_div
from pagedlab.exercises.blocks import fresh_table
from pagedlab.exercises.core import Case, Exercise, Mistake
from pagedlab.simulate import reservation

NB07 = "07_memory_at_scale"
RESERVES = ("max", "pow2", "oracle")


# --- 07 · memory at scale ----------------------------------------------------------------------
def reserved_slots(reserve: str, prompt_len: int, output_len: int, max_len: int) -> int:
    """Contiguous slots an Orca baseline reserves for one request (the paper's §6.1)."""
    if reserve == "max":
        return max_len
    if reserve == "pow2":  # the output rounded up to a power of two: at most 2x over
        return min(prompt_len + (1 << (output_len - 1).bit_length()), max_len)
    return prompt_len + output_len  # "oracle": exactly the true length


def orca_reservation(reserve: str, prompt_len: int, output_len: int, max_len: int) -> int:
    """The reservation as :mod:`pagedlab.simulate` computes it (the §6.1 baselines)."""
    return int(reservation.reserved_slots(reserve, prompt_len, output_len, max_len))


def mix_memory(lengths: list[int], max_len: int, block_size: int) -> tuple[int, int]:
    """(slots Orca (Max) reserves, slots paging holds) for requests of these final lengths."""
    return len(lengths) * max_len, sum(ceil_div(n, block_size) * block_size for n in lengths)


def _reserve_cases() -> list[Case]:
    specs = [("pow2", 100, 25, 2048), ("max", 100, 25, 2048), ("oracle", 100, 25, 2048),
             ("pow2", 10, 32, 2048), ("pow2", 1, 1, 2048), ("pow2", 1500, 520, 2048),
             ("pow2", 7, 33, 64), ("oracle", 1, 2047, 2048)]  # fmt: skip
    rng = random.Random(701)
    for _ in range(24):
        prompt = rng.randint(1, 1200)
        specs.append((rng.choice(RESERVES), prompt, rng.randint(1, 2048 - prompt), 2048))
    cases = []
    for i, (reserve, p, o, max_len) in enumerate(specs):
        expected = orca_reservation(reserve, p, o, max_len)
        cases.append(
            Case((reserve, p, o, max_len), expected, kind="fixed" if i < 8 else "generated")
        )
    return cases


def _mix_cases() -> list[Case]:
    specs = [([5], 2048, 4), ([300, 56, 1000], 2048, 16), ([16, 32], 64, 16), ([2, 3, 4], 8, 1)]
    rng = random.Random(702)
    specs += [
        ([rng.randint(2, 2048) for _ in range(rng.randint(1, 8))], 2048, rng.choice([8, 16, 32]))
        for _ in range(16)
    ]
    cases = []
    for i, (lengths, max_len, size) in enumerate(specs):
        reserved = sum(orca_reservation("max", 1, n - 1, max_len) for n in lengths)
        paged = sum(fresh_table(n, size).num_slots for n in lengths)
        cases.append(
            Case(
                (lengths, max_len, size), (reserved, paged), kind="fixed" if i < 4 else "generated"
            )
        )
    return cases


EXERCISES_07 = [
    Exercise(
        name="reserved_slots",
        notebook=NB07,
        task="How many contiguous slots does an Orca baseline reserve for a request of "
        'prompt_len prompt tokens and output_len output tokens (§6.1)? reserve is "max" '
        '(max_len), "pow2" (the prompt plus the output rounded up to a power of two, at most '
        'max_len) or "oracle" (exactly prompt_len + output_len).',
        params=("reserve", "prompt_len", "output_len", "max_len"),
        returns="int",
        cases=_reserve_cases,
        solution=reserved_slots,
        mistakes=[
            Mistake(
                "round only the output up: the prompt is known, so it is reserved exactly.",
                lambda r, p, o, m: (
                    min(1 << (p + o - 1).bit_length(), m)
                    if r == "pow2"
                    else reserved_slots(r, p, o, m)
                ),
            ),
            Mistake(
                "the next power of two at or above output_len: a power of two is its own.",
                lambda r, p, o, m: (
                    min(p + (1 << o.bit_length()), m) if r == "pow2" else reserved_slots(r, p, o, m)
                ),
            ),
            Mistake(
                "never reserve more than max_len.",
                lambda r, p, o, m: (
                    p + (1 << (o - 1).bit_length()) if r == "pow2" else reserved_slots(r, p, o, m)
                ),
            ),
            Mistake(
                "the prompt's tokens need slots too.",
                lambda r, p, o, m: (
                    m if r == "max" else (min(1 << (o - 1).bit_length(), m) if r == "pow2" else o)
                ),
            ),
        ],
        hints=["pow2: prompt_len + (1 << (output_len - 1).bit_length()), capped at max_len."],
    ),
    Exercise(
        name="mix_memory",
        notebook=NB07,
        task="Requests end with these lengths. Return (slots Orca (Max) reserves for them, slots "
        "paged memory holds for them in blocks of block_size).",
        params=("lengths", "max_len", "block_size"),
        returns="tuple[int, int]",
        cases=_mix_cases,
        solution=mix_memory,
        mistakes=[
            Mistake(
                "paging holds whole blocks: round each request up to block_size.",
                lambda ls, m, b: (len(ls) * m, sum(ls)),
            ),
            Mistake(
                "forgot the partly filled last block of each request.",
                lambda ls, m, b: (len(ls) * m, sum(n // b * b for n in ls)),
            ),
            Mistake(
                "Orca (Max) reserves max_len per request, whatever its length.",
                lambda ls, m, b: (sum(ls), mix_memory(ls, m, b)[1]),
            ),
        ],
        hints=["Orca (Max): max_len each; paging: ceil(n / block_size) * block_size each."],
    ),
]
