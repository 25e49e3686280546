"""Exercises of notebooks 01 (why paging) and 02 (the block table): counting and addressing.

Every expected answer is read off a real :class:`~pagedlab.BlockTable` (or, for the
reservation, :class:`pagedlab.simulate.policies.OneRequest`), built fresh for each case.
"""

from __future__ import annotations

import random

from pagedlab.exercises.core import Case, Exercise, Mistake, seeded
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


# (num_tokens, block_size, why, mistakes it determines); later cases vary both parameters
_COUNT_SPECS = {
    "blocks": [
        (5, 4, "5 tokens in blocks of 4: the fifth token needs a second, partly filled block",
         ("forgot_last",)),
        (8, 4, "8 tokens fill 2 blocks of 4 exactly: no block is left over", ("one_too_many",)),
        (1, 16, "one token still takes a whole block of 16", ("forgot_last",)),
        (10, 3, "blocks of 3: a block size that is not a power of two", ()),
        (7, 1, "blocks of 1: one block per token", ()),
        (2038, 16, "a long request (notebook 1's 2038 tokens) in the paper's blocks of 16", ()),
        (12, 6, "blocks of 6 filled exactly", ("one_too_many",)),
        (0, 4, "an empty sequence holds no token, so no block", ()),
    ],
    "empty": [
        (5, 4, "5 tokens in 2 blocks of 4: the last block has 3 empty slots",
         ("counts_tokens", "forgot_last")),
        (8, 4, "8 tokens fill their 2 blocks exactly: nothing is empty", ("full_is_b",)),
        (1, 16, "one token in a block of 16", ("counts_tokens",)),
        (10, 3, "blocks of 3: a block size that is not a power of two", ()),
        (7, 1, "blocks of 1 are never partly filled", ("full_is_b",)),
        (2038, 16, "a long request (notebook 1's 2038 tokens) in the paper's blocks of 16", ()),
        (13, 6, "blocks of 6 (not a power of two), the last one partly filled", ()),
        (0, 4, "an empty sequence holds no block, so no empty slot", ()),
    ],
}  # fmt: skip


def _count_cases(kind: str) -> list[Case]:
    fixed = _COUNT_SPECS[kind]
    rng = seeded(101)
    sizes = [1, 2, 3, 4, 5, 7, 8, 12, 16, 32]
    generated: list[tuple[int, int, str, tuple[str, ...]]] = [
        (rng.randint(1, 300), rng.choice(sizes), "", ()) for _ in range(24)
    ]
    cases = []
    for i, (n, b, why, catches) in enumerate(fixed + generated):
        table = fresh_table(n, b)
        expected = len(table.blocks) if kind == "blocks" else table.num_slots - table.num_tokens
        cases.append(
            Case((n, b), expected, kind="fixed" if i < len(fixed) else "generated", why=why,
                 catches=catches)
        )  # fmt: skip
    return cases


_RESERVATION_SPECS = [
    (8, 2, 2048, "notebook 1's request: 8 prompt tokens, 2 response tokens, 2048 reserved",
     ("no_prompt", "no_response")),
    (300, 100, 2048, "a longer prompt than response: both use reserved slots",
     ("no_prompt", "no_response")),
    (56, 56, 112, "a reservation exactly as long as the request wastes nothing", ()),
    (1, 1, 2, "the smallest request", ()),
    (10, 500, 1024, "a long response in a smaller reservation", ("no_prompt", "no_response")),
]  # fmt: skip


def _reservation_cases() -> list[Case]:
    fixed = list(_RESERVATION_SPECS)
    rng = seeded(102)
    generated: list[tuple[int, int, int, str, tuple[str, ...]]] = []
    for _ in range(20):
        prompt, response = rng.randint(1, 900), rng.randint(1, 900)
        generated.append((prompt, response, rng.randint(prompt + response, 4096), "", ()))
    cases = []
    for i, (p, r, s, why, catches) in enumerate(fixed + generated):
        request = OneRequest(prompt=p, response=r, generated=r, reserved_slots=s, block_size=16)
        cases.append(
            Case((p, r, s), request.never_used, kind="fixed" if i < len(fixed) else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


FORGOT_LAST = "the partly filled last block counts too: a block is taken by its first token."
ONE_TOO_MANY = "tokens that fill their blocks exactly take no extra block."

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
            Mistake(FORGOT_LAST, lambda n, b: n // b, "forgot_last"),
            Mistake(ONE_TOO_MANY, lambda n, b: n // b + 1, "one_too_many"),
        ],
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
                "full_is_b",
            ),
            Mistake(
                "that counts the tokens in the last block, not its empty slots.",
                lambda n, b: n % b,
                "counts_tokens",
            ),
            Mistake(FORGOT_LAST, lambda n, b: (n // b) * b - n, "forgot_last"),
        ],
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
            Mistake("the prompt's tokens use slots too.", lambda p, r, s: s - r, "no_prompt"),
            Mistake("the response's tokens use slots too.", lambda p, r, s: s - p, "no_response"),
        ],
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


_SLOT_SPECS = [
    (0, [0, 3], 4, 5, "position 0 is the first token: offset 0 of the first block",
     ("zero_based", "from_one")),
    (5, [7, 2], 4, 8, "blocks=[7, 2]: position 5 is in logical block 1, which is physical block 2",
     ("logical", "order")),
    (3, [4, 1], 4, 5, "the last slot of a block: offset block_size - 1", ("from_one",)),
    (4, [4, 1], 4, 5, "position 4 starts the second block (the example's token 5)", ("logical",)),
    (7, [6, 2, 5], 3, 9, "blocks of 3: a block size that is not a power of two", ()),
    (2, [9, 4, 0], 1, 3, "blocks of 1: every position is its own block", ("logical",)),
]  # fmt: skip


def _slot_cases() -> list[Case]:
    fixed = list(_SLOT_SPECS)
    rng = seeded(201)
    for _ in range(24):
        size = rng.choice([1, 2, 3, 4, 5, 8, 16])
        blocks = _random_blocks(rng, rng.randint(1, 6))
        num_tokens = rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)
        fixed.append((rng.randrange(num_tokens), blocks, size, num_tokens, "", ()))
    cases = []
    for _i, (pos, blocks, size, num_tokens, why, catches) in enumerate(fixed):
        expected = table_with(blocks, num_tokens, size).slot(pos)
        cases.append(
            Case((pos, blocks, size), expected, kind="fixed" if why else "generated", why=why,
                 catches=catches)
        )  # fmt: skip
    return cases


_MAPPING_SPECS = [
    ([4, 1], 5, 4, "the example: 5 tokens in blocks [4, 1]; the last block is partly filled",
     ("per_slot", "logical", "from_one", "added")),
    ([0, 1], 8, 4, "blocks [0, 1] filled exactly: slots 0 .. 7", ("from_one",)),
    ([3], 2, 4, "one partly filled block: one entry per token", ("per_slot",)),
    ([2, 0, 1], 12, 4, "blocks out of order: the mapping follows the table, not the block ids",
     ("logical",)),
    ([5, 1], 4, 3, "blocks of 3 (not a power of two): the slot of block 5's offset 0 is 15",
     ("added",)),
    ([3, 6, 1], 3, 1, "blocks of 1", ("added",)),
]  # fmt: skip


def _mapping_cases() -> list[Case]:
    fixed = list(_MAPPING_SPECS)
    rng = seeded(202)
    for _ in range(20):
        size = rng.choice([1, 2, 3, 4, 5, 8, 16])
        blocks = _random_blocks(rng, rng.randint(1, 6))
        num_tokens = rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)
        fixed.append((blocks, num_tokens, size, "", ()))
    cases = []
    for blocks, num_tokens, size, why, catches in fixed:
        expected = table_with(blocks, num_tokens, size).slot_mapping()
        cases.append(
            Case((blocks, num_tokens, size), expected, kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


_APPEND_SPECS = [
    (3, 1, 4, "3 tokens in a block of 4: the fourth fits in the last block's empty slot",
     ("no_room", "every_block", "forgot_last")),
    (4, 1, 4, "a full last block: the next token needs a new block", ("every_block",)),
    (0, 5, 4, "an empty table: 5 tokens take 2 blocks, the second partly filled",
     ("forgot_last",)),
    (5, 3, 4, "3 tokens fill the last block's 3 empty slots exactly: no new block",
     ("no_room", "every_block")),
    (5, 4, 4, "4 tokens after 5: 3 fill the last block, 1 needs a new block", ("no_room",)),
    (7, 10, 3, "blocks of 3 (not a power of two)", ()),
    (0, 1, 16, "the first token of a sequence takes its first block", ("forgot_last",)),
    (9, 30, 1, "blocks of 1: one new block per token", ()),
]  # fmt: skip


def _append_cases() -> list[Case]:
    fixed = list(_APPEND_SPECS)
    rng = seeded(203)
    fixed += [
        (rng.randint(0, 100), rng.randint(1, 40), rng.choice([1, 2, 3, 4, 5, 8, 16]), "", ())
        for _ in range(24)
    ]
    cases = []
    for num_tokens, n, size, why, catches in fixed:
        table = fresh_table(num_tokens + n, size)  # a pool large enough for both
        pool = table.allocator
        table.free()
        table = BlockTable(pool)
        if num_tokens:
            table.append_tokens(num_tokens)
        before = len(table.blocks)
        table.append_tokens(n)
        cases.append(
            Case((num_tokens, n, size), len(table.blocks) - before,
                 kind="fixed" if why else "generated", why=why, catches=catches)
        )  # fmt: skip
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
                "from_one",
            ),
            Mistake(
                "that is the logical block: look it up in blocks to get the physical one.",
                lambda p, bl, b: (p // b, p % b),
                "logical",
            ),
            Mistake(
                "(block, offset) in the wrong order.",
                lambda p, bl, b: (p % b, bl[p // b]),
                "order",
            ),
            Mistake(
                "positions are 0-based: position 0 is the first token.",
                lambda p, bl, b: (bl[(p - 1) // b], (p - 1) % b),
                "zero_based",
            ),
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
                "per_slot",
            ),
            Mistake(
                "those are logical positions: go through blocks.",
                lambda bl, n, b: list(range(n)),
                "logical",
            ),
            Mistake(
                "offset counted from 1.",
                lambda bl, n, b: [bl[p // b] * b + p % b + 1 for p in range(n)],
                "from_one",
            ),
            Mistake(
                "a block's first slot is its id times block_size: the block id is not a slot.",
                lambda bl, n, b: [bl[p // b] + p % b for p in range(n)],
                "added",
            ),
        ],
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
                "no_room",
            ),
            Mistake(
                "that is every block the table holds, not the new ones.",
                lambda t, n, b: -(-(t + n) // b),
                "every_block",
            ),
            Mistake(
                "a partly filled block is a block too, before and after the append.",
                lambda t, n, b: (t + n) // b - t // b,
                "forgot_last",
            ),
        ],
    ),
]
