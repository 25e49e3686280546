"""Notebook 08 (from pagedlab to vLLM): one decode batch, as an engine packs it. Answers:
real block tables, ``block_tables_tensor``, ``batch_slot_mapping``; needs torch.
"""

from __future__ import annotations

import random
from itertools import accumulate
from typing import Any

import torch

from pagedlab.attention.batch import batch_slot_mapping
from pagedlab.attention.ops import block_tables_tensor
from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable

NB08 = "08_to_vllm"


# --- the solutions ---------------------------------------------------------------------------
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


# --- the cases -------------------------------------------------------------------------------
def _lockstep(lengths: list[int], block_size: int) -> list[list[int]]:
    """The block lists of tables grown one token per step in lockstep (as in decode): their
    blocks interleave."""
    pool = BlockAllocator(sum(ceil_div(n, block_size) for n in lengths), block_size)
    tables = [BlockTable(pool) for _ in lengths]
    for step in range(max(lengths)):
        for table, n in zip(tables, lengths, strict=True):
            if n > step:
                table.append_tokens()
    return [t.blocks for t in tables]


PADS = [
    ([5, 3, 9], 4, "3 sequences grown in lockstep: rows of 2, 1 and 3 blocks",
     ("zero_pad", "pad_front")),
    ([4, 8], 4, "rows of 1 and 2 blocks", ("zero_pad", "pad_front")),
    ([1], 16, "one sequence: nothing to pad"),
    ([17, 2, 33, 16], 16, "the paper's blocks of 16, rows of 2, 1, 3 and 1", ("pad_front",)),
    ([7, 7], 3, "rows of equal length: nothing to pad"),
]  # fmt: skip
PACKS = [
    ([5, 3, 9], 4, "3 sequences: each newest token is at position num_tokens - 1",
     ("off_by_one", "logical_slot", "every_position")),
    ([4, 8], 4, "newest tokens that end a block", ("off_by_one",)),
    ([1], 16, "one sequence of one token", ("every_position",)),
    ([17, 2, 33, 16], 16, "blocks of 16, blocks interleaved by lockstep decoding",
     ("logical_slot",)),
    ([7, 5], 3, "blocks of 3 (not a power of two)"),
]  # fmt: skip


def _batch(rng: random.Random) -> tuple[Any, ...]:
    return [rng.randint(1, 40) for _ in range(rng.randint(1, 5))], rng.choice([2, 3, 4, 8])


def _packed(lengths: list[int], size: int) -> tuple[Any, ...]:
    padded = block_tables_tensor(_lockstep(lengths, size))
    every = batch_slot_mapping(padded, torch.tensor(lengths, dtype=torch.int32), size).tolist()
    ends = [end - 1 for end in accumulate(lengths)]  # the newest token of each sequence
    return padded.tolist(), list(lengths), [every[e] for e in ends]


def _pad_row(t: list[list[int]], fill: int, front: bool) -> list[list[int]]:
    width = max(map(len, t))
    return [[fill] * (width - len(r)) + r if front else r + [fill] * (width - len(r)) for r in t]


EXERCISES_08 = [
    Function(pad_block_tables, NB08, driver="unchanged",
        task="Pack the block lists of a batch into one rectangle: pad every row with -1 to the "
        "longest row's length.",
        cases=lambda: cases(PADS, _batch, 16, 801, given=lambda ls, b: (_lockstep(ls, b),),
                            expect=lambda ls, b: block_tables_tensor(_lockstep(ls, b)).tolist()),
        mistakes=[
            Mistake("pad with -1 (pagedlab's padding): here 0 is a real block id. vLLM pads with "
                    "0 because it reserves block 0 as a null block; pagedlab reserves none.",
                    lambda t: _pad_row(t, 0, False), "zero_pad"),
            Mistake("padding goes after a row's blocks: position i must stay logical block i.",
                    lambda t: _pad_row(t, -1, True), "pad_front"),
        ],
    ),
    Function(pack_decode, NB08, driver="unchanged",
        task="One decode step: each sequence has just appended its newest token (num_tokens "
        "counts it). Return (padded block tables, seq_lens, slot mapping with one entry per "
        "sequence: the slot its newest token's K/V is written to).",
        cases=lambda: cases(PACKS, _batch, 16, 802, expect=_packed,
                            given=lambda ls, b: (_lockstep(ls, b), list(ls), b)),
        mistakes=[
            Mistake("off by one: the newest token is at position num_tokens - 1.",
                    lambda t, n, b: (pad_block_tables(t), list(n), [
                        r[k // b] * b + k % b if k // b < len(r) else -1
                        for r, k in zip(t, n, strict=True)]), "off_by_one"),
            Mistake("that is the logical slot: go through the table.",
                    lambda t, n, b: (pad_block_tables(t), list(n), [k - 1 for k in n]),
                    "logical_slot"),
            Mistake("a decode step writes one token per sequence, not every position.",
                    lambda t, n, b: (pad_block_tables(t), list(n), [
                        r[p // b] * b + p % b for r, k in zip(t, n, strict=True)
                        for p in range(k)]), "every_position"),
        ],
    ),
]  # fmt: skip
