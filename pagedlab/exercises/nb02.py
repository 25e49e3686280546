"""Notebook 02 (the block table): addressing through a block list, and the capstone
``block_table``, replayed beside pagedlab's BlockTable on seeded appends and frees (several
tables, one pool), compared after every event. Answers: a real BlockTable's. No torch.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.exercises.nb01 import fresh_table, table_with
from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function, Replay
from pagedlab.grade.drivers import Event, table_log
from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable

NB02 = "02_block_table"


# --- the solutions ---------------------------------------------------------------------------
def slot(pos: int, blocks: list[int], block_size: int) -> tuple[int, int]:
    """(physical block, offset) of position ``pos`` (0-based) through the block list."""
    return blocks[pos // block_size], pos % block_size


def slot_mapping(blocks: list[int], num_tokens: int, block_size: int) -> list[int]:
    """Flat slot ``block * block_size + offset`` of every position, in order."""
    return [blocks[p // block_size] * block_size + p % block_size for p in range(num_tokens)]


def new_blocks(num_tokens: int, n: int, block_size: int) -> int:
    """Blocks that appending ``n`` tokens allocates when the table holds ``num_tokens``."""
    return ceil_div(num_tokens + n, block_size) - ceil_div(num_tokens, block_size)


class MyBlockTable:
    """One sequence's block table over a real BlockAllocator (no sharing here).

    blocks: the physical block of each logical block, in order; num_tokens: tokens held.
    The allocator's API: allocator.block_size, allocator.allocate() -> a free block id (the
    front of its free list), allocator.free(block) (joins the back of the free list).
    """

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator
        self.blocks: list[int] = []
        self.num_tokens = 0

    def append_tokens(self, n: int) -> None:
        """Make room for n more tokens: fill the last block, then take new blocks."""
        size = self.allocator.block_size
        room = len(self.blocks) * size - self.num_tokens  # empty slots of the last block
        for _ in range(ceil_div(n - room, size) if n > room else 0):
            self.blocks.append(self.allocator.allocate())
        self.num_tokens += n

    def free(self) -> None:
        """Give every block back, the last block first, and hold nothing."""
        for block in reversed(self.blocks):
            self.allocator.free(block)
        self.blocks = []
        self.num_tokens = 0


# --- the cases -------------------------------------------------------------------------------
SLOTS = [
    (0, [0, 3], 4, "position 0 is the first token: offset 0 of the first block",
     ("zero_based", "from_one")),
    (5, [7, 2], 4, "blocks=[7, 2]: position 5 is in logical block 1, which is physical block 2",
     ("logical", "order")),
    (3, [4, 1], 4, "the last slot of a block: offset block_size - 1", ("from_one",)),
    (4, [4, 1], 4, "position 4 starts the second block (the example's token 5)", ("logical",)),
    (7, [6, 2, 5], 3, "blocks of 3: a block size that is not a power of two"),
    (2, [9, 4, 0], 1, "blocks of 1: every position is its own block", ("logical",)),
]  # fmt: skip
MAPPINGS = [
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
APPENDS = [
    (3, 1, 4, "3 tokens in a block of 4: the fourth fits in the last block's empty slot",
     ("no_room", "every_block", "forgot_last")),
    (4, 1, 4, "a full last block: the next token needs a new block", ("every_block",)),
    (0, 5, 4, "an empty table: 5 tokens take 2 blocks, the second partly filled",
     ("forgot_last",)),
    (5, 3, 4, "3 tokens fill the last block's 3 empty slots exactly: no new block",
     ("no_room", "every_block")),
    (5, 4, 4, "4 tokens after 5: 3 fill the last block, 1 needs a new block", ("no_room",)),
    (7, 10, 3, "blocks of 3 (not a power of two)"),
    (0, 1, 16, "the first token of a sequence takes its first block", ("forgot_last",)),
    (9, 30, 1, "blocks of 1: one new block per token"),
]  # fmt: skip
EVENTS = [
    (8, 4, [4, 1, 0, 2, 3, 5, 6, 7], [("append", 0, 5)],
     "the example: 5 tokens take blocks 4 and 1, the front of the free list"),
    (8, 4, list(range(8)), [("append", 0, 3), ("append", 0, 1), ("append", 0, 1)],
     "3 tokens, then 1 fills the block's last slot, then 1 more needs a new block"),
    (8, 4, list(range(8)), [("append", 0, 6), ("append", 0, 7)],
     "6 tokens then 7: the last block's 2 empty slots are filled before new blocks"),
    (8, 4, list(range(8)), [("append", 0, 9), ("free", 0, 0)],
     "free gives the blocks back last block first: the free list ends ... 2, 1, 0"),
    (8, 4, list(range(8)), [("append", 0, 4), ("append", 1, 4), ("free", 0, 0),
                            ("append", 2, 8)],
     "a freed block joins the back of the free list: the next table takes it last"),
    (6, 3, list(range(6)), [("append", 0, 7), ("append", 1, 2), ("append", 0, 2)],
     "blocks of 3 (not a power of two), two tables taking turns"),
    (5, 1, [3, 1, 4, 0, 2], [("append", 0, 2), ("append", 1, 1), ("append", 0, 2)],
     "blocks of 1: one block per token"),
    (48, 64, list(range(48)), [("append", 0, 3000)],
     "3,000 tokens in one call take 47 blocks: no limit on the blocks, no step per token"),
    (8, 4, list(range(8)), [("append", 0, 1)] * 20,
     "20 appends of one token: every fourth takes a new block, up to the twentieth"),
]  # fmt: skip


def _blocks(rng: random.Random) -> tuple[int, list[int], int]:
    """(block size, a random block list, a token count that needs all of it)."""
    size = rng.choice([1, 2, 3, 4, 5, 8, 16])
    count = rng.randint(1, 6)
    blocks = rng.sample(range(count + rng.randint(0, 6)), count)
    return size, blocks, rng.randint((len(blocks) - 1) * size + 1, len(blocks) * size)


def _slot_args(rng: random.Random) -> tuple[Any, ...]:
    size, blocks, num_tokens = _blocks(rng)
    return rng.randrange(num_tokens), blocks, size


def _mapping_args(rng: random.Random) -> tuple[Any, ...]:
    size, blocks, num_tokens = _blocks(rng)
    return blocks, num_tokens, size


def _appended(num_tokens: int, n: int, size: int) -> int:
    pool = fresh_table(num_tokens + n, size).allocator  # a pool large enough for both
    table = BlockTable(BlockAllocator(pool.num_blocks, size))
    if num_tokens:
        table.append_tokens(num_tokens)
    before = len(table.blocks)
    table.append_tokens(n)
    return len(table.blocks) - before


def _events(rng: random.Random, num_blocks: int, block_size: int) -> list[Event]:
    """Seeded appends and frees that never run out of blocks (pagedlab's table is the judge)."""
    pool = BlockAllocator(num_blocks, block_size)
    live: dict[int, BlockTable] = {}
    events: list[Event] = []
    next_id = 0
    for _ in range(rng.randint(4, 12)):
        if live and (rng.random() < 0.25 or pool.num_free == 0):
            which = rng.choice(sorted(live))
            live.pop(which).free()
            events.append(("free", which, 0))
            continue
        if live and rng.random() < 0.6:
            which = rng.choice(sorted(live))
        else:
            which, next_id = next_id, next_id + 1
            live[which] = BlockTable(pool)
        table = live[which]
        room = len(table.blocks) * block_size - table.num_tokens + pool.num_free * block_size
        if room == 0:
            continue
        n = rng.randint(1, min(room, 3 * block_size))
        table.append_tokens(n)
        events.append(("append", which, n))
    return [e for e in events if e[0] == "free" or e[2] > 0]


def _trace(rng: random.Random) -> tuple[Any, ...]:
    num_blocks, size = rng.randint(4, 12), rng.choice([1, 2, 3, 4, 8])
    order = rng.sample(range(num_blocks), num_blocks)
    return num_blocks, size, order, _events(rng, num_blocks, size)


def _said(event: Event) -> str:
    kind, t, n = event
    return f"T{t}.append_tokens({n})" if kind == "append" else f"T{t}.free()"


def _table_label(num_blocks: int, size: int, order: list[int], events: list[Event]) -> str:
    said = ", ".join(map(_said, events))
    return f"a pool of {num_blocks} blocks of {size}, free list {order}; then {said}"


EXERCISES_02 = [
    Function(slot, NB02,
        task="Where does position pos (0-based) live? Return (physical block, offset) "
        "through the sequence's block list blocks.",
        cases=lambda: cases(SLOTS, _slot_args, 24, 201, expect=lambda p, bl, b: table_with(
            bl, len(bl) * b, b).slot(p)),
        mistakes=[
            Mistake("offset counted from 1: offsets run 0 .. block_size - 1.",
                    lambda p, bl, b: (bl[p // b], p % b + 1), "from_one"),
            Mistake("that is the logical block: look it up in blocks to get the physical one.",
                    lambda p, bl, b: (p // b, p % b), "logical"),
            Mistake("(block, offset) in the wrong order.",
                    lambda p, bl, b: (p % b, bl[p // b]), "order"),
            Mistake("positions are 0-based: position 0 is the first token.",
                    lambda p, bl, b: (bl[(p - 1) // b], (p - 1) % b), "zero_based"),
        ],
    ),
    Function(slot_mapping, NB02,
        task="The flat slot (physical block x block_size + offset) of every position 0 .. "
        "num_tokens - 1, as a list.",
        cases=lambda: cases(MAPPINGS, _mapping_args, 20, 202, expect=lambda bl, n, b: (
            table_with(bl, n, b).slot_mapping())),
        mistakes=[
            Mistake("one entry per token, not per slot: the empty slots of the last block get "
                    "none.", lambda bl, n, b: [x * b + o for x in bl for o in range(b)],
                    "per_slot"),
            Mistake("those are logical positions: go through blocks.",
                    lambda bl, n, b: list(range(n)), "logical"),
            Mistake("offset counted from 1.",
                    lambda bl, n, b: [bl[p // b] * b + p % b + 1 for p in range(n)], "from_one"),
            Mistake("a block's first slot is its id times block_size: the block id is not a "
                    "slot.", lambda bl, n, b: [bl[p // b] + p % b for p in range(n)], "added"),
        ],
    ),
    Function(new_blocks, NB02,
        task="A table holds num_tokens tokens. How many new blocks does appending n tokens "
        "allocate?",
        cases=lambda: cases(APPENDS, lambda rng: (
            rng.randint(0, 100), rng.randint(1, 40), rng.choice([1, 2, 3, 4, 5, 8, 16])),
            24, 203, expect=_appended),
        mistakes=[
            Mistake("the last block may still have room: fill it before allocating.",
                    lambda t, n, b: ceil_div(n, b), "no_room"),
            Mistake("that is every block the table holds, not the new ones.",
                    lambda t, n, b: ceil_div(t + n, b), "every_block"),
            Mistake("a partly filled block is a block too, before and after the append.",
                    lambda t, n, b: (t + n) // b - t // b, "forgot_last"),
        ],
    ),
    Replay(
        name="block_table",
        notebook=NB02,
        task="Build a block table: complete MyBlockTable's append_tokens and free (about 30 "
        "lines with the class). check(MyBlockTable) replays seeded appends and frees on your "
        "tables and on pagedlab's BlockTable, over real allocators, and compares after every "
        "event: blocks, num_tokens, the free list (its order too) and the ref counts.",
        params=("num_blocks", "block_size", "free_order", "events"),
        cases=lambda: cases(EVENTS, _trace, 12, 1002, expect=lambda *args: table_log(
            BlockTable, *args), label=_table_label),
        solution=MyBlockTable,
        driver="table",
        parts=("blocks", "num_tokens", "free list", "ref counts"),
        steps=lambda n, b, o, events: [f"event {k} ({_said(e)})"
                                       for k, e in enumerate(events, start=1)],
        todo="Write append_tokens and free",
        setup="from pagedlab import BlockAllocator",
        entry="MyBlockTable",
    ),
]  # fmt: skip
