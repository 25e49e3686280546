"""Notebook 01 (why paging): counting blocks and slots, a reservation's waste, and the capstone
``place_newcomer`` (a contiguous first fit, and paging, on a fragmented pool). Answers: a real
BlockTable built fresh per case, or ``simulate.reservation.OneRequest``. No torch.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.simulate.reservation import OneRequest

NB01 = "01_why_paging"


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


# --- the solutions ---------------------------------------------------------------------------
def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks for ``num_tokens`` tokens: ceiling division, the last block may be partly full."""
    return ceil_div(num_tokens, block_size)


def empty_slots(num_tokens: int, block_size: int) -> int:
    """Slots held but not yet written: those past the last token in the last block."""
    return ceil_div(num_tokens, block_size) * block_size - num_tokens


def reservation_waste(prompt: int, response: int, reserved_slots: int) -> int:
    """Slots of a contiguous reservation that no token ever uses."""
    return reserved_slots - prompt - response


def place_newcomer(
    refcounts: list[int], free_list: list[int], need: int
) -> tuple[int | None, list[int]]:
    """(first block of the first run of ``need`` free blocks in address order, or None;
    the blocks paging gives the newcomer: the first ``need`` of the free list)."""
    start, run = None, 0
    for block, count in enumerate(refcounts):
        run = run + 1 if count == 0 else 0
        if run == need:
            start = block - need + 1
            break
    return start, free_list[:need]


# --- the cases -------------------------------------------------------------------------------
SIZES = [1, 2, 3, 4, 5, 7, 8, 12, 16, 32]
BLOCKS = [
    (5, 4, "5 tokens in blocks of 4: the fifth token needs a second, partly filled block",
     ("forgot_last",)),
    (8, 4, "8 tokens fill 2 blocks of 4 exactly: no block is left over", ("one_too_many",)),
    (1, 16, "one token still takes a whole block of 16", ("forgot_last",)),
    (10, 3, "blocks of 3: a block size that is not a power of two"),
    (7, 1, "blocks of 1: one block per token"),
    (2038, 16, "a long request (notebook 1's 2038 tokens) in the paper's blocks of 16"),
    (12, 6, "blocks of 6 filled exactly", ("one_too_many",)),
    (0, 4, "an empty sequence holds no token, so no block"),
]  # fmt: skip
EMPTY = [
    (5, 4, "5 tokens in 2 blocks of 4: the last block has 3 empty slots",
     ("counts_tokens", "forgot_last")),
    (8, 4, "8 tokens fill their 2 blocks exactly: nothing is empty", ("full_is_b",)),
    (1, 16, "one token in a block of 16", ("counts_tokens",)),
    (10, 3, "blocks of 3: a block size that is not a power of two"),
    (7, 1, "blocks of 1 are never partly filled", ("full_is_b",)),
    (2038, 16, "a long request (notebook 1's 2038 tokens) in the paper's blocks of 16"),
    (13, 6, "blocks of 6 (not a power of two), the last one partly filled"),
    (0, 4, "an empty sequence holds no block, so no empty slot"),
]  # fmt: skip
RESERVATIONS = [
    (8, 2, 2048, "notebook 1's request: 8 prompt tokens, 2 response tokens, 2048 reserved",
     ("no_prompt", "no_response")),
    (300, 100, 2048, "a longer prompt than response: both use reserved slots",
     ("no_prompt", "no_response")),
    (56, 56, 112, "a reservation exactly as long as the request wastes nothing"),
    (1, 1, 2, "the smallest request"),
    (10, 500, 1024, "a long response in a smaller reservation", ("no_prompt", "no_response")),
]  # fmt: skip


def _count(rng: random.Random) -> tuple[int, int]:
    return rng.randint(1, 300), rng.choice(SIZES)


def _reservation(rng: random.Random) -> tuple[int, int, int]:
    prompt, response = rng.randint(1, 900), rng.randint(1, 900)
    return prompt, response, rng.randint(prompt + response, 4096)


def _waste(p: int, r: int, s: int) -> int:
    return OneRequest(prompt=p, response=r, generated=r, reserved_slots=s, block_size=16).never_used


def _fragmented(num_requests: int, blocks_each: int) -> BlockAllocator:
    """scenes.fragmented_pool's pool before its newcomer arrives (every other request gone)."""
    pool = BlockAllocator(num_requests * blocks_each, 4)
    requests = [BlockTable(pool) for _ in range(num_requests)]
    for table in requests:
        table.append_tokens(blocks_each * 4)
    for table in requests[::2]:
        table.free()
    return pool


def _holes_3_then_2() -> BlockAllocator:
    """Holes of 3 blocks (0-2) and of 2 (4-5): first fit takes the first long enough."""
    pool = BlockAllocator(8, 4)
    held = [BlockTable(pool) for _ in range(4)]
    for table, blocks in zip(held, (3, 1, 2, 2), strict=True):
        table.append_tokens(blocks * 4)
    held[0].free()
    held[2].free()
    return pool


def _tail_hole() -> BlockAllocator:
    """Blocks 0-1 held, 2-3 free: the one hole ends at the pool's last block."""
    pool = BlockAllocator(4, 4)
    BlockTable(pool).append_tokens(8)
    return pool


def _random_pool(rng: random.Random) -> BlockAllocator:
    pool = BlockAllocator(rng.randint(6, 16), 4)
    tables = []
    for _t in range(rng.randint(2, 6)):
        if pool.num_free == 0:
            break
        table = BlockTable(pool)
        table.append_tokens(rng.randint(1, min(pool.num_free, 3)) * 4)
        tables.append(table)
    for table in rng.sample(tables, rng.randint(1, len(tables))):
        table.free()
    return pool


def _placement(pool: BlockAllocator, need: int) -> tuple[list[int], list[int], int]:
    return pool.refcounts(), pool.free_list(), need


def _placed(refcounts: list[int], free_list: list[int], need: int) -> tuple[Any, list[int]]:
    """First fit over the ref counts; the blocks a real table gets from a real pool whose
    free list is ``free_list``."""
    held = [b for b, c in enumerate(refcounts) if c]
    pool = BlockAllocator(len(refcounts), 4, free_order=held + free_list)
    for _ in held:
        pool.allocate()  # the held blocks: what is left free is free_list, in its order
    table = BlockTable(pool)
    table.append_tokens(need * 4)
    return _first_fit(refcounts, need, last=False), list(table.blocks)


def _first_fit(refcounts: list[int], need: int, last: bool) -> Any:
    found = None
    for first in range(len(refcounts) - need + 1):
        if all(c == 0 for c in refcounts[first : first + need]):
            found = first
            if not last:
                break
    return found


def _place_cases() -> list[Any]:
    fixed = [
        (*_placement(_fragmented(8, 2), 4), "notebook 1's pool: holes of 2 blocks everywhere, "
         "the newcomer needs 4 in a row: first fit refuses it, paging places it",
         ("no_none", "sorted")),
        (*_placement(_fragmented(8, 2), 2), "a newcomer that fits a hole: first fit takes the "
         "first hole", ("last_hole",)),
        (*_placement(_fragmented(4, 3), 6), "holes of 3, a newcomer of 6", ("no_none",)),
        (*_placement(_fragmented(6, 1), 1), "holes of 1 block"),
        (*_placement(_holes_3_then_2(), 2), "holes of 3 and then of 2 blocks, a newcomer of 2: "
         "first fit takes the first hole"),
        (*_placement(_tail_hole(), 2), "the only hole long enough ends at the pool's last "
         "block: first fit looks there too"),
    ]  # fmt: skip

    def generate(rng: random.Random) -> tuple[Any, ...]:
        pool = _random_pool(rng)
        return _placement(pool, rng.randint(1, max(1, pool.num_free)))

    return cases(fixed, generate, 12, 1001, expect=_placed)


FORGOT_LAST = "the partly filled last block counts too: a block is taken by its first token."

EXERCISES_01 = [
    Function(blocks_needed, NB01,
        task="How many blocks does a sequence of num_tokens tokens need, block_size per block?",
        cases=lambda: cases(BLOCKS, _count, 24, 101,
                            expect=lambda n, b: len(fresh_table(n, b).blocks)),
        mistakes=[
            Mistake(FORGOT_LAST, lambda n, b: n // b, "forgot_last"),
            Mistake("tokens that fill their blocks exactly take no extra block.",
                    lambda n, b: n // b + 1, "one_too_many"),
        ],
    ),
    Function(empty_slots, NB01,
        task="How many slots of its blocks does a sequence of num_tokens tokens leave empty?",
        cases=lambda: cases(EMPTY, _count, 24, 101, expect=lambda n, b: (
            fresh_table(n, b).num_slots - n)),
        mistakes=[
            Mistake("a full last block has 0 empty slots, not block_size.",
                    lambda n, b: b - n % b, "full_is_b"),
            Mistake("that counts the tokens in the last block, not its empty slots.",
                    lambda n, b: n % b, "counts_tokens"),
            Mistake(FORGOT_LAST, lambda n, b: (n // b) * b - n, "forgot_last"),
        ],
    ),
    Function(reservation_waste, NB01,
        task="A request reserved reserved_slots contiguous slots and ends with prompt + response "
        "tokens. How many reserved slots are never used?",
        cases=lambda: cases(RESERVATIONS, _reservation, 20, 102, expect=_waste),
        mistakes=[
            Mistake("the prompt's tokens use slots too.", lambda p, r, s: s - r, "no_prompt"),
            Mistake("the response's tokens use slots too.", lambda p, r, s: s - p, "no_response"),
        ],
    ),
    Function(place_newcomer, NB01,
        task="Build both placements. refcounts[b] is 0 for a free block; free_list is the "
        "allocator's free list, front first. Return (the first block of the first run of "
        "`need` free blocks in address order, or None if there is none: where a contiguous "
        "first-fit allocator puts the newcomer; the blocks paging gives it).",
        cases=_place_cases,
        mistakes=[
            Mistake("paging does not need the blocks in a row: the newcomer takes the free "
                    "list's front, wherever those blocks are.",
                    lambda r, f, n: (place_newcomer(r, f, n)[0], sorted(f)[:n]), "sorted"),
            Mistake("no run of free blocks is long enough: a contiguous allocator must refuse "
                    "(None), even though enough blocks are free in total.",
                    lambda r, f, n: (r.index(0) if 0 in r else None, f[:n]), "no_none"),
            Mistake("first fit takes the first run that is long enough, in address order.",
                    lambda r, f, n: (_first_fit(r, n, last=True), f[:n]), "last_hole"),
        ],
    ),
]  # fmt: skip
