"""Notebook 07 (memory at scale): the §6.1 reservations and a mix of requests in pages.
Answers: ``simulate.reservation.reserved_slots`` (Fig. 2) and real block tables. No torch, no
numpy: the live site's browser grades these too.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.exercises.nb01 import fresh_table
from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.ground.checks import ceil_div
from pagedlab.simulate import reservation

NB07 = "07_memory_at_scale"
RESERVES = ("max", "pow2", "oracle")


# --- the solutions ---------------------------------------------------------------------------
def reserved_slots(reserve: str, prompt_len: int, output_len: int, max_len: int) -> int:
    """Contiguous slots an Orca baseline reserves for one request (the paper's §6.1)."""
    if reserve == "max":
        return max_len
    if reserve == "pow2":  # the output rounded up to a power of two: at most 2x over
        return min(prompt_len + (1 << (output_len - 1).bit_length()), max_len)
    return prompt_len + output_len  # "oracle": exactly the true length


def mix_memory(lengths: list[int], max_len: int, block_size: int) -> tuple[int, int]:
    """(slots Orca (Max) reserves, slots paging holds) for requests of these final lengths."""
    return len(lengths) * max_len, sum(ceil_div(n, block_size) * block_size for n in lengths)


# --- the cases -------------------------------------------------------------------------------
def orca_reservation(reserve: str, prompt_len: int, output_len: int, max_len: int) -> int:
    """The reservation as :mod:`pagedlab.simulate` computes it (the §6.1 baselines)."""
    return int(reservation.reserved_slots(reserve, prompt_len, output_len, max_len))


RESERVATIONS = [
    ("pow2", 100, 25, 2048, "pow2: the prompt is known, only the 25 output tokens round up "
     "(to 32)", ("round_all", "prompt_free")),
    ("max", 100, 25, 2048, "max: the whole max_len, whatever the request", ("prompt_free",)),
    ("oracle", 100, 25, 2048, "oracle: exactly the request's length", ("prompt_free",)),
    ("pow2", 10, 32, 2048, "an output of exactly 32 is its own power of two", ("own_power",)),
    ("pow2", 1, 1, 2048, "an output of one token", ("own_power",)),
    ("pow2", 1500, 520, 2048, "1500 + 1024 is past max_len: the reservation stops at max_len",
     ("no_cap",)),
    ("pow2", 7, 33, 64, "a smaller max_len (64) caps it too", ("no_cap",)),
    ("max", 7, 33, 512, "max with another max_len (512)"),
    ("pow2", 3, 100, 1000, "a max_len that is not a power of two, and not reached"),
    ("oracle", 1, 2047, 2048, "oracle at the longest request"),
]  # fmt: skip
MIXES = [
    ([5], 2048, 4, "one request of 5 tokens: Orca reserves 2048, paging 2 blocks of 4",
     ("whole_blocks", "forgot_last", "max_each")),
    ([300, 56, 1000], 2048, 16, "three requests of ShareGPT-like lengths", ("forgot_last",)),
    ([16, 32], 64, 16, "lengths that fill their blocks exactly", ("max_each",)),
    ([2, 3, 4], 8, 1, "blocks of 1: paging holds exactly the tokens", ("max_each",)),
    ([10, 7], 100, 3, "blocks of 3 and a max_len of 100", ("whole_blocks",)),
]  # fmt: skip


def _reservation(rng: random.Random) -> tuple[Any, ...]:
    max_len = rng.choice([512, 1000, 2048, 4096])
    prompt = rng.randint(1, max_len // 2)
    return rng.choice(RESERVES), prompt, rng.randint(1, max_len - prompt), max_len


def _mix(rng: random.Random) -> tuple[Any, ...]:
    max_len = rng.choice([512, 1000, 2048])
    lengths = [rng.randint(2, max_len) for _ in range(rng.randint(1, 8))]
    return lengths, max_len, rng.choice([3, 8, 16, 32])


def _mixed(lengths: list[int], max_len: int, size: int) -> tuple[int, int]:
    reserved = sum(orca_reservation("max", 1, n - 1, max_len) for n in lengths)
    return reserved, sum(fresh_table(n, size).num_slots for n in lengths)


def _pow2(r: str, p: int, o: int, m: int, value: int) -> int:
    """A mistake's answer for pow2 (the value given), the right one otherwise."""
    return value if r == "pow2" else reserved_slots(r, p, o, m)


EXERCISES_07 = [
    Function(reserved_slots, NB07,
        task="How many contiguous slots does an Orca baseline reserve for a request of "
        "prompt_len prompt tokens and output_len output tokens (§6.1)? reserve is \"max\" "
        "(max_len), \"pow2\" (the prompt plus the output rounded up to a power of two, at most "
        "max_len) or \"oracle\" (exactly prompt_len + output_len).",
        cases=lambda: cases(RESERVATIONS, _reservation, 24, 701, expect=orca_reservation),
        mistakes=[
            Mistake("round only the output up: the prompt is known, so it is reserved exactly.",
                    lambda r, p, o, m: _pow2(r, p, o, m, min(1 << (p + o - 1).bit_length(), m)),
                    "round_all"),
            Mistake("the next power of two at or above output_len: a power of two is its own.",
                    lambda r, p, o, m: _pow2(r, p, o, m, min(p + (1 << o.bit_length()), m)),
                    "own_power"),
            Mistake("never reserve more than max_len.",
                    lambda r, p, o, m: _pow2(r, p, o, m, p + (1 << (o - 1).bit_length())),
                    "no_cap"),
            Mistake("the prompt's tokens need slots too.", lambda r, p, o, m: (
                m if r == "max" else (min(1 << (o - 1).bit_length(), m) if r == "pow2" else o)),
                "prompt_free"),
        ],
    ),
    Function(mix_memory, NB07,
        task="Requests end with these lengths. Return (slots Orca (Max) reserves for them, "
        "slots paged memory holds for them in blocks of block_size).",
        cases=lambda: cases(MIXES, _mix, 16, 702, expect=_mixed),
        mistakes=[
            Mistake("paging holds whole blocks: round each request up to block_size.",
                    lambda ls, m, b: (len(ls) * m, sum(ls)), "whole_blocks"),
            Mistake("forgot the partly filled last block of each request.",
                    lambda ls, m, b: (len(ls) * m, sum(n // b * b for n in ls)), "forgot_last"),
            Mistake("Orca (Max) reserves max_len per request, whatever its length.",
                    lambda ls, m, b: (sum(ls), mix_memory(ls, m, b)[1]), "max_each"),
        ],
    ),
]  # fmt: skip
