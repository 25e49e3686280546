"""Exercises of notebooks 01 (why paging) and 02 (the block table): counting and addressing.

Every expected answer is read off a real :class:`~pagedlab.BlockTable` (or, for the
reservation, :class:`pagedlab.simulate.memory.OneRequest`), built fresh for each case.
"""

from __future__ import annotations

import random

from pagedlab.exercises.core import Case, Exercise, Mistake
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.simulate.reservation import OneRequest

NB01, NB02 = "01_why_paging", "02_block_table"


def table_with(blocks: list[int], num_tokens: int, block_size: int) -> BlockTable:
    """A real table of ``num_tokens`` tokens whose logical blocks land in ``blocks``, in order."""
    pool = max(blocks, default=0) + 1
    rest = [b for b in range(pool) if b not in blocks]
    table = BlockTable(BlockAllocator(pool, block_size, free_order=list(blocks) + rest))
    if num_tokens:
        table.append_tokens(num_tokens)
    return table


def fresh_table(num_tokens: int, block_size: int) -> BlockTable:
    return table_with(list(range(num_tokens // block_size + 1)), num_tokens, block_size)


def _random_blocks(rng: random.Random, count: int) -> list[int]:
    return rng.sample(range(count + rng.randint(0, 6)), count)


# --- 01 · why paging ---------------------------------------------------------------------------
def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks for ``num_tokens`` tokens: ceiling division, the last block may be partly full."""
    return (num_tokens + block_size - 1) // block_size


def empty_slots(num_tokens: int, block_size: int) -> int:
    """Slots held but not yet written: those past the last token in the last block."""
    return blocks_needed(num_tokens, block_size) * block_size - num_tokens


def reservation_waste(prompt: int, response: int, reserved_slots: int) -> int:
    """Slots of a contiguous reservation that no token ever uses."""
    return reserved_slots - prompt - response


def _count_cases(kind: str) -> list[Case]:
    fixed = [(5, 4), (4, 4), (1, 4), (8, 4), (1, 1), (17, 16), (16, 16), (2038, 16)]
    rng = random.Random(101)
    generated = [(rng.randint(1, 300), rng.choice([1, 2, 3, 4, 8, 16, 32])) for _ in range(24)]
    cases = []
    for i, (n, b) in enumerate(fixed + generated):
        table = fresh_table(n, b)
        expected = len(table.blocks) if kind == "blocks" else table.num_slots - table.num_tokens
        cases.append(Case((n, b), expected, kind="fixed" if i < len(fixed) else "generated"))
    return cases


def _reservation_cases() -> list[Case]:
    fixed = [(8, 2, 2048), (300, 100, 2048), (56, 56, 112), (1, 1, 2)]
    rng = random.Random(102)
    generated = []
    for _ in range(20):
        prompt, response = rng.randint(1, 900), rng.randint(1, 900)
        generated.append((prompt, response, rng.randint(prompt + response, 2048)))
    cases = []
    for i, (p, r, s) in enumerate(fixed + generated):
        request = OneRequest(prompt=p, response=r, generated=r, reserved_slots=s, block_size=16)
        cases.append(Case((p, r, s), request.never_used, kind="fixed" if i < 4 else "generated"))
    return cases


FORGOT_LAST = "forgot the partly filled last block: use ceiling division, not //."
ONE_TOO_MANY = "one block too many when the tokens fill their blocks exactly (e.g. 8 tokens, 4)."

EXERCISES_01 = [
    Exercise(
        name="blocks_needed",
        notebook=NB01,
        task="How many blocks does a sequence of num_tokens tokens need, block_size per block?",
        params=("num_tokens", "block_size"),
        returns="int",
        cases=lambda: _count_cases("blocks"),
        solution=blocks_needed,
        mistakes=[
            Mistake(FORGOT_LAST, lambda n, b: n // b),
            Mistake(ONE_TOO_MANY, lambda n, b: n // b + 1),
        ],
        hints=["a block is allocated as soon as one token needs it: round up."],
    ),
    Exercise(
        name="empty_slots",
        notebook=NB01,
        task="How many slots of its blocks does a sequence of num_tokens tokens leave empty?",
        params=("num_tokens", "block_size"),
        returns="int",
        cases=lambda: _count_cases("empty"),
        solution=empty_slots,
        mistakes=[
            Mistake(
                "a full last block has 0 empty slots, not block_size.",
                lambda n, b: b - n % b,
            ),
            Mistake(
                "that counts the tokens in the last block, not the empty slots.", lambda n, b: n % b
            ),
            Mistake(FORGOT_LAST, lambda n, b: (n // b) * b - n),
        ],
        hints=["empty = (blocks held) x block_size - num_tokens; always < block_size."],
    ),
    Exercise(
        name="reservation_waste",
        notebook=NB01,
        task="A request reserved reserved_slots contiguous slots and ends with prompt + response "
        "tokens. How many reserved slots are never used?",
        params=("prompt", "response", "reserved_slots"),
        returns="int",
        cases=_reservation_cases,
        solution=reservation_waste,
        mistakes=[
            Mistake("the prompt's tokens use slots too.", lambda p, r, s: s - r),
            Mistake("the response's tokens use slots too.", lambda p, r, s: s - p),
        ],
        hints=["the reservation holds the prompt and every response token; the rest is waste."],
    ),
]


# --- 02 · the block table ----------------------------------------------------------------------
def slot(pos: int, blocks: list[int], block_size: int) -> tuple[int, int]:
    """(physical block, offset) of position ``pos`` (0-based) through the block list."""
    return blocks[pos // block_size], pos % block_size


def slot_mapping(blocks: list[int], num_tokens: int, block_size: int) -> list[int]:
    """Flat slot ``block * block_size + offset`` of every position, in order."""
    return [blocks[p // block_size] * block_size + p % block_size for p in range(num_tokens)]


def new_blocks(num_tokens: int, n: int, block_size: int) -> int:
    """Blocks that appending ``n`` tokens allocates when the table holds ``num_tokens``."""
    return -(-(num_tokens + n) // block_size) - -(-num_tokens // block_size)


def _slot_cases() -> list[Case]:
    fixed = [(4, [4, 1], 4, 5), (0, [4, 1], 4, 5), (3, [4, 1], 4, 5), (7, [4, 1], 4, 8)]
    rng = random.Random(201)
    for _ in range(24):
        size = rng.choice([1, 2, 3, 4, 8, 16])
        blocks = _random_blocks(rng, rng.randint(1, 6))
        num_tokens = rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)
        fixed.append((rng.randrange(num_tokens), blocks, size, num_tokens))
    cases = []
    for i, (pos, blocks, size, num_tokens) in enumerate(fixed):
        expected = table_with(blocks, num_tokens, size).slot(pos)
        cases.append(Case((pos, blocks, size), expected, kind="fixed" if i < 4 else "generated"))
    return cases


def _mapping_cases() -> list[Case]:
    fixed = [([4, 1], 5, 4), ([0, 1], 5, 4), ([3], 2, 4), ([2, 0, 1], 12, 4)]
    rng = random.Random(202)
    for _ in range(20):
        size = rng.choice([1, 2, 3, 4, 8, 16])
        blocks = _random_blocks(rng, rng.randint(1, 6))
        fixed.append((blocks, rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size), size))
    cases = []
    for i, (blocks, num_tokens, size) in enumerate(fixed):
        expected = table_with(blocks, num_tokens, size).slot_mapping()
        cases.append(
            Case((blocks, num_tokens, size), expected, kind="fixed" if i < 4 else "generated")
        )
    return cases


def _append_cases() -> list[Case]:
    fixed = [(4, 1, 4), (3, 1, 4), (0, 5, 4), (5, 3, 4), (5, 4, 4), (0, 1, 16)]
    rng = random.Random(203)
    fixed += [
        (rng.randint(0, 100), rng.randint(1, 40), rng.choice([1, 2, 4, 8, 16])) for _ in range(24)
    ]
    cases = []
    for i, (num_tokens, n, size) in enumerate(fixed):
        table = fresh_table(num_tokens + n, size)  # a pool large enough for both
        pool = table.allocator
        table.free()
        table = BlockTable(pool)
        if num_tokens:
            table.append_tokens(num_tokens)
        before = len(table.blocks)
        table.append_tokens(n)
        cases.append(
            Case(
                (num_tokens, n, size),
                len(table.blocks) - before,
                kind="fixed" if i < 6 else "generated",
            )
        )
    return cases


EXERCISES_02 = [
    Exercise(
        name="slot",
        notebook=NB02,
        task="Where does position pos (0-based) live? Return (physical block, offset) "
        "through the sequence's block list blocks.",
        params=("pos", "blocks", "block_size"),
        returns="tuple[int, int]",
        cases=_slot_cases,
        solution=slot,
        mistakes=[
            Mistake(
                "offset counted from 1: offsets run 0 .. block_size - 1.",
                lambda p, bl, b: (bl[p // b], p % b + 1),
            ),
            Mistake(
                "that is the logical block: look it up in blocks to get the physical one.",
                lambda p, bl, b: (p // b, p % b),
            ),
            Mistake("(block, offset) in the wrong order.", lambda p, bl, b: (p % b, bl[p // b])),
            Mistake(
                "positions are 0-based: position 0 is the first token.",
                lambda p, bl, b: (bl[(p - 1) // b], (p - 1) % b),
            ),
        ],
        hints=[
            "logical block = pos // block_size, offset = pos % block_size, then blocks[logical]."
        ],
    ),
    Exercise(
        name="slot_mapping",
        notebook=NB02,
        task="The flat slot (physical block x block_size + offset) of every position 0 .. "
        "num_tokens - 1, as a list.",
        params=("blocks", "num_tokens", "block_size"),
        returns="list[int]",
        cases=_mapping_cases,
        solution=slot_mapping,
        mistakes=[
            Mistake(
                "one entry per token, not per slot: the empty slots of the last block get none.",
                lambda bl, n, b: [x * b + o for x in bl for o in range(b)],
            ),
            Mistake(
                "those are logical positions: go through blocks.", lambda bl, n, b: list(range(n))
            ),
            Mistake(
                "offset counted from 1.",
                lambda bl, n, b: [bl[p // b] * b + p % b + 1 for p in range(n)],
            ),
            Mistake(
                "the block is multiplied by block_size, not added.",
                lambda bl, n, b: [bl[p // b] + p % b for p in range(n)],
            ),
        ],
        hints=["slot = blocks[p // block_size] * block_size + p % block_size for each p."],
    ),
    Exercise(
        name="new_blocks",
        notebook=NB02,
        task="A table holds num_tokens tokens. How many new blocks does appending n tokens "
        "allocate?",
        params=("num_tokens", "n", "block_size"),
        returns="int",
        cases=_append_cases,
        solution=new_blocks,
        mistakes=[
            Mistake(
                "the last block may still have room: fill it before allocating.",
                lambda t, n, b: -(-n // b),
            ),
            Mistake(
                "that is every block the table holds, not the new ones.",
                lambda t, n, b: -(-(t + n) // b),
            ),
            Mistake(FORGOT_LAST, lambda t, n, b: (t + n) // b - t // b),
        ],
        hints=["blocks needed after minus blocks held before (both rounded up)."],
    ),
]
