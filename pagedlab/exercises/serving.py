"""Exercises of notebooks 07 (memory at scale) and 08 (from pagedlab to vLLM).

Expected answers come from :class:`pagedlab.simulate.memory.Policy` (the reservations of the
paper's Fig. 2), from real block tables, from :func:`pagedlab.block_tables_tensor` and from
:func:`pagedlab.attention.batch.batch_slot_mapping`.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from pagedlab.attention.batch import batch_slot_mapping
from pagedlab.attention.ops import block_tables_tensor
from pagedlab.checks import ceil_div
from pagedlab.exercises.blocks import fresh_table
from pagedlab.exercises.core import Case, Exercise, Mistake
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.simulate import memory as simulate_memory

NB07, NB08 = "07_memory_at_scale", "08_to_vllm"
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
    return int(simulate_memory.reserved_slots(reserve, prompt_len, output_len, max_len))


def mix_memory(lengths: list[int], max_len: int, block_size: int) -> tuple[int, int]:
    """(slots Orca (Max) reserves, slots paging holds) for requests of these final lengths."""
    return len(lengths) * max_len, sum(ceil_div(n, block_size) * block_size for n in lengths)


_RESERVE_SPECS = [
    ("pow2", 100, 25, 2048, "pow2: the prompt is known, only the 25 output tokens round up (to 32)",
     ("round_all", "prompt_free")),
    ("max", 100, 25, 2048, "max: the whole max_len, whatever the request", ("prompt_free",)),
    ("oracle", 100, 25, 2048, "oracle: exactly the request's length", ("prompt_free",)),
    ("pow2", 10, 32, 2048, "an output of exactly 32 is its own power of two", ("own_power",)),
    ("pow2", 1, 1, 2048, "an output of one token", ("own_power",)),
    ("pow2", 1500, 520, 2048, "1500 + 1024 is past max_len: the reservation stops at max_len",
     ("no_cap",)),
    ("pow2", 7, 33, 64, "a smaller max_len (64) caps it too", ("no_cap",)),
    ("max", 7, 33, 512, "max with another max_len (512)", ()),
    ("pow2", 3, 100, 1000, "a max_len that is not a power of two, and not reached", ()),
    ("oracle", 1, 2047, 2048, "oracle at the longest request", ()),
]  # fmt: skip


def _reserve_cases() -> list[Case]:
    specs = list(_RESERVE_SPECS)
    rng = random.Random(701)
    for _ in range(24):
        max_len = rng.choice([512, 1000, 2048, 4096])
        prompt = rng.randint(1, max_len // 2)
        specs.append(
            (rng.choice(RESERVES), prompt, rng.randint(1, max_len - prompt), max_len, "", ())
        )
    cases = []
    for reserve, p, o, max_len, why, catches in specs:
        expected = orca_reservation(reserve, p, o, max_len)
        cases.append(
            Case((reserve, p, o, max_len), expected, kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


def _mix_cases() -> list[Case]:
    specs = [
        ([5], 2048, 4, "one request of 5 tokens: Orca reserves 2048, paging 2 blocks of 4",
         ("whole_blocks", "forgot_last", "max_each")),
        ([300, 56, 1000], 2048, 16, "three requests of ShareGPT-like lengths", ("forgot_last",)),
        ([16, 32], 64, 16, "lengths that fill their blocks exactly", ("max_each",)),
        ([2, 3, 4], 8, 1, "blocks of 1: paging holds exactly the tokens", ("max_each",)),
        ([10, 7], 100, 3, "blocks of 3 and a max_len of 100", ("whole_blocks",)),
    ]  # fmt: skip
    rng = random.Random(702)
    for _ in range(16):
        max_len = rng.choice([512, 1000, 2048])
        lengths = [rng.randint(2, max_len) for _ in range(rng.randint(1, 8))]
        specs.append((lengths, max_len, rng.choice([3, 8, 16, 32]), "", ()))
    cases = []
    for lengths, max_len, size, why, catches in specs:
        reserved = sum(orca_reservation("max", 1, n - 1, max_len) for n in lengths)
        paged = sum(fresh_table(n, size).num_slots for n in lengths)
        cases.append(
            Case((lengths, max_len, size), (reserved, paged), kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
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
                "round_all",
            ),
            Mistake(
                "the next power of two at or above output_len: a power of two is its own.",
                lambda r, p, o, m: (
                    min(p + (1 << o.bit_length()), m) if r == "pow2" else reserved_slots(r, p, o, m)
                ),
                "own_power",
            ),
            Mistake(
                "never reserve more than max_len.",
                lambda r, p, o, m: (
                    p + (1 << (o - 1).bit_length()) if r == "pow2" else reserved_slots(r, p, o, m)
                ),
                "no_cap",
            ),
            Mistake(
                "the prompt's tokens need slots too.",
                lambda r, p, o, m: (
                    m if r == "max" else (min(1 << (o - 1).bit_length(), m) if r == "pow2" else o)
                ),
                "prompt_free",
            ),
        ],
        hints=["what does each baseline know about the request when it reserves?"],
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
                "whole_blocks",
            ),
            Mistake(
                "forgot the partly filled last block of each request.",
                lambda ls, m, b: (len(ls) * m, sum(n // b * b for n in ls)),
                "forgot_last",
            ),
            Mistake(
                "Orca (Max) reserves max_len per request, whatever its length.",
                lambda ls, m, b: (sum(ls), mix_memory(ls, m, b)[1]),
                "max_each",
            ),
        ],
        hints=["what does each scheme hold per request, and in what unit?"],
    ),
]


# --- 08 · one decode batch, as an engine packs it ------------------------------------------------
def pad_block_tables(tables: list[list[int]]) -> list[list[int]]:
    """Rows padded with -1 to the longest row (the int32 tensor an engine sends, as lists)."""
    width = max(len(row) for row in tables)
    return [row + [-1] * (width - len(row)) for row in tables]


def pack_decode(
    tables: list[list[int]], num_tokens: list[int], block_size: int
) -> tuple[list[list[int]], list[int], list[int]]:
    """(padded block tables, seq_lens, slot of each sequence's newest token) for one decode step."""
    slots = [
        row[(n - 1) // block_size] * block_size + (n - 1) % block_size
        for row, n in zip(tables, num_tokens, strict=True)
    ]
    return pad_block_tables(tables), list(num_tokens), slots


def _lockstep(lengths: list[int], block_size: int) -> list[BlockTable]:
    """Tables grown one token per step in lockstep (as in decode): their blocks interleave."""
    pool = BlockAllocator(sum(-(-n // block_size) for n in lengths), block_size)
    tables = [BlockTable(pool) for _ in lengths]
    for step in range(max(lengths)):
        for table, n in zip(tables, lengths, strict=True):
            if n > step:
                table.append_tokens()
    return tables


_BATCH_WHY = {
    "pad": [
        ([5, 3, 9], 4, "3 sequences grown in lockstep: rows of 2, 1 and 3 blocks",
         ("zero_pad", "pad_front")),
        ([4, 8], 4, "rows of 1 and 2 blocks", ("zero_pad", "pad_front")),
        ([1], 16, "one sequence: nothing to pad", ()),
        ([17, 2, 33, 16], 16, "the paper's blocks of 16, rows of 2, 1, 3 and 1", ("pad_front",)),
        ([7, 7], 3, "rows of equal length: nothing to pad", ()),
    ],
    "pack": [
        ([5, 3, 9], 4, "3 sequences: each newest token is at position num_tokens - 1",
         ("off_by_one", "logical_slot", "every_position")),
        ([4, 8], 4, "newest tokens that end a block", ("off_by_one",)),
        ([1], 16, "one sequence of one token", ("every_position",)),
        ([17, 2, 33, 16], 16, "blocks of 16, blocks interleaved by lockstep decoding",
         ("logical_slot",)),
        ([7, 5], 3, "blocks of 3 (not a power of two)", ()),
    ],
}  # fmt: skip


def _batch_specs(seed: int, which: str) -> list[tuple[list[int], int, str, tuple[str, ...]]]:
    specs = list(_BATCH_WHY[which])
    rng = random.Random(seed)
    return specs + [
        ([rng.randint(1, 40) for _ in range(rng.randint(1, 5))], rng.choice([2, 3, 4, 8]), "", ())
        for _ in range(16)
    ]


def _pad_cases() -> list[Case]:
    cases = []
    for lengths, size, why, catches in _batch_specs(801, "pad"):
        rows = [t.blocks for t in _lockstep(lengths, size)]
        cases.append(
            Case((rows,), block_tables_tensor(rows).tolist(), kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


def _pack_cases() -> list[Case]:
    cases = []
    for lengths, size, why, catches in _batch_specs(802, "pack"):
        tables = _lockstep(lengths, size)
        rows = [t.blocks for t in tables]
        padded = block_tables_tensor(rows)
        seq_lens = torch.tensor(lengths, dtype=torch.int32)
        every = batch_slot_mapping(padded, seq_lens, size).tolist()
        ends = np.cumsum(lengths) - 1  # the newest token of each sequence
        expected = (padded.tolist(), list(lengths), [every[e] for e in ends])
        cases.append(
            Case((rows, list(lengths), size), expected, kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


EXERCISES_08 = [
    Exercise(
        name="pad_block_tables",
        notebook=NB08,
        task="Pack the block lists of a batch into one rectangle: pad every row with -1 to the "
        "longest row's length.",
        params=("tables",),
        returns="list[list[int]]",
        cases=_pad_cases,
        solution=pad_block_tables,
        mistakes=[
            Mistake(
                "pad with -1 (pagedlab's padding): here 0 is a real block id. vLLM pads with 0 "
                "because it reserves block 0 as a null block; pagedlab reserves none.",
                lambda t: [r + [0] * (max(map(len, t)) - len(r)) for r in t],
                "zero_pad",
            ),
            Mistake(
                "padding goes after a row's blocks: position i must stay logical block i.",
                lambda t: [[-1] * (max(map(len, t)) - len(r)) + r for r in t],
                "pad_front",
            ),
        ],
        hints=["a rectangle: how wide, and what may an empty entry never be mistaken for?"],
    ),
    Exercise(
        name="pack_decode",
        notebook=NB08,
        task="One decode step: each sequence has just appended its newest token (num_tokens "
        "counts it). Return (padded block tables, seq_lens, slot mapping with one entry per "
        "sequence: the slot its newest token's K/V is written to).",
        params=("tables", "num_tokens", "block_size"),
        returns="tuple[list[list[int]], list[int], list[int]]",
        cases=_pack_cases,
        solution=pack_decode,
        mistakes=[
            Mistake(
                "off by one: the newest token is at position num_tokens - 1.",
                lambda t, n, b: (
                    pad_block_tables(t),
                    list(n),
                    [
                        r[k // b] * b + k % b if k // b < len(r) else -1
                        for r, k in zip(t, n, strict=True)
                    ],
                ),
                "off_by_one",
            ),
            Mistake(
                "that is the logical slot: go through the table.",
                lambda t, n, b: (pad_block_tables(t), list(n), [k - 1 for k in n]),
                "logical_slot",
            ),
            Mistake(
                "a decode step writes one token per sequence, not every position.",
                lambda t, n, b: (
                    pad_block_tables(t),
                    list(n),
                    [r[p // b] * b + p % b for r, k in zip(t, n, strict=True) for p in range(k)],
                ),
                "every_position",
            ),
        ],
        hints=["which position does the newest token have, and where does the table put it?"],
    ),
]
