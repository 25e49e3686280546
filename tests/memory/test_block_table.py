"""The example of the paper (§4.1-4.3) and every bad input of contract §2."""

from __future__ import annotations

import numpy as np
import pytest

from pagedlab import BlockAllocator, BlockTable, CopyOnWrite, OutOfBlocksError
from pagedlab.memory.block_table import blocks_to_append
from tests.memory.bad_calls import (
    IntCall,
    OtherCall,
    misuse_tests,
    scene,
)
from tests.refuses import refuses

EXAMPLE_ORDER = [4, 1, 0, 2, 3, 5, 6, 7]


def example_table(length: int = 5) -> BlockTable:
    table = BlockTable(BlockAllocator(8, 4, free_order=EXAMPLE_ORDER))
    table.append_tokens(length)
    return table


def test_example_sequence_of_five_uses_blocks_4_and_1() -> None:
    table = example_table(5)
    assert table.blocks == [4, 1]
    assert table.num_tokens == 5
    assert table.num_slots == 8  # block 0 full, block 1 holds one entry and 3 empty slots
    assert [table.slot(p) for p in range(5)] == [(4, 0), (4, 1), (4, 2), (4, 3), (1, 0)]
    assert table.slot_mapping() == [16, 17, 18, 19, 4]


def test_four_to_five_allocates_one_block_and_moves_nothing() -> None:
    table = example_table(4)
    before = [table.slot(p) for p in range(4)]
    free_before = table.allocator.num_free
    with table.allocator.record() as events:
        copy = table.append_tokens()
    assert copy is None
    assert [table.slot(p) for p in range(4)] == before
    assert table.allocator.num_free == free_before - 1
    assert [e.kind for e in events] == ["allocate", "write"]
    assert (events[0].block, events[1].position, events[1].offset) == (1, 4, 0)


def test_token_by_token_equals_one_append() -> None:
    one_by_one = BlockTable(BlockAllocator(8, 4, free_order=EXAMPLE_ORDER))
    for _ in range(13):
        one_by_one.append_tokens()
    assert one_by_one.blocks == example_table(13).blocks == [4, 1, 0, 2]


def test_default_free_list_is_ascending_and_freed_blocks_join_the_back() -> None:
    alloc = BlockAllocator(4, 2)
    assert [alloc.allocate() for _ in range(3)] == [0, 1, 2]
    alloc.free(1)
    assert alloc.free_list() == [3, 1]
    assert alloc.allocate() == 3


def test_fork_shares_and_copy_on_write_copies_the_partly_filled_last_block() -> None:
    alloc = BlockAllocator(8, 4)
    parent = BlockTable(alloc)
    parent.append_tokens(6)  # blocks 0 (full) and 1 (2 of 4)
    child = parent.fork()
    assert child.blocks == [0, 1] and alloc.refcount(0) == alloc.refcount(1) == 2
    copy = child.append_tokens()
    assert copy == CopyOnWrite(src=1, dst=2)
    assert child.blocks == [0, 2] and parent.blocks == [0, 1]
    assert (alloc.refcount(1), alloc.refcount(2), alloc.refcount(0)) == (1, 1, 2)
    assert parent.append_tokens() is None  # block 1 is the parent's alone again: in place
    assert parent.blocks == [0, 1]


def test_fork_of_full_last_block_appends_a_new_block_without_copying() -> None:
    alloc = BlockAllocator(8, 4)
    parent = BlockTable(alloc)
    parent.append_tokens(4)
    child = parent.fork()
    assert child.append_tokens() is None
    assert child.blocks == [0, 1] and parent.blocks == [0]


def test_freeing_every_table_frees_every_block() -> None:
    alloc = BlockAllocator(6, 2)
    first = BlockTable(alloc)
    first.append_tokens(3)
    second = first.fork()
    second.append_tokens(2)
    first.free()
    second.free()
    assert alloc.num_free == 6 and alloc.refcounts() == [0] * 6


def test_hold_prefix_shares_held_blocks_and_reuses_free_ones() -> None:
    alloc = BlockAllocator(6, 2)
    owner = BlockTable(alloc)
    owner.append_tokens(4)  # blocks 0, 1
    alloc.free(alloc.allocate())  # block 2 goes to the back of the free list
    reader = BlockTable(alloc)
    reader.hold_prefix([0, 1])
    assert reader.num_tokens == 4 and alloc.refcount(0) == alloc.refcount(1) == 2
    owner.free()
    later = BlockTable(alloc)
    later.hold_prefix([3])  # free, taken back with its contents
    assert alloc.refcount(3) == 1 and 3 not in alloc.free_list()


def test_out_of_blocks_changes_nothing() -> None:
    alloc = BlockAllocator(3, 4)
    table = BlockTable(alloc)
    table.append_tokens(5)
    state = lambda: (table.blocks, table.num_tokens, alloc.num_free)  # noqa: E731
    refuses(lambda: table.append_tokens(8), OutOfBlocksError, match="needs 2 free", state=state)
    assert state() == ([0, 1], 5, 1)
    assert issubclass(OutOfBlocksError, RuntimeError)


def test_copy_on_write_needs_a_free_block_too() -> None:
    alloc = BlockAllocator(2, 4)
    parent = BlockTable(alloc)
    parent.append_tokens(2)
    child = parent.fork()
    child.append_tokens(2)  # copies block 0 into block 1
    with pytest.raises(OutOfBlocksError):
        parent.fork().append_tokens()
    assert alloc.refcounts() == [2, 1]  # the extra fork holds block 0; nothing else changed


def test_bad_calls_name_the_value_and_change_nothing() -> None:
    alloc = BlockAllocator(4, 4)
    table = BlockTable(alloc)
    table.append_tokens(5)
    state = lambda: (table.blocks, table.num_tokens, alloc.refcounts(), alloc.free_list())  # noqa: E731
    cases = [
        (lambda: alloc.free(2), "block 2 is already free"),
        (lambda: alloc.free(4), r"block 4 is out of range \[0, 4\)"),
        (lambda: alloc.free(-1), "block -1 is out of range"),
        (lambda: alloc.refcount(9), "block 9 is out of range"),
        (lambda: table.slot(5), r"position 5 is outside \[0, 5\)"),
        (lambda: table.slot(-1), "position -1"),
        (lambda: table.append_tokens(0), "n must be >= 1, got 0"),
        (lambda: table.append_tokens(-3), "n must be >= 1, got -3"),
        (lambda: table.append_tokens(True), "n must be an integer, got True"),
        (lambda: table.append_tokens(1.0), "n must be an integer, got 1.0"),
        (lambda: alloc.share(3), "block 3 is free"),
        (lambda: alloc.reuse(0), "block 0 is not free"),
        (lambda: table.hold_prefix([2]), "already holds blocks"),
    ]
    for call, message in cases:
        refuses(call, match=message, state=state)


def test_a_freed_table_refuses_everything() -> None:
    alloc = BlockAllocator(4, 4)
    table = BlockTable(alloc)
    table.append_tokens(2)
    table.free()
    for call in (table.append_tokens, table.fork, table.free):
        with pytest.raises(ValueError, match=f"table {table.id}: it was already freed"):
            call()
    assert alloc.num_free == 4


def test_events_replay_a_fork_and_copy() -> None:
    alloc = BlockAllocator(4, 2)
    table = BlockTable(alloc)
    table.append_tokens(3)
    with alloc.record() as events:
        child = table.fork()
        child.append_tokens()
        child.free()
    assert [(e.kind, e.block) for e in events] == [
        ("share", 0), ("share", 1),
        ("allocate", 2), ("copy", 2), ("release", 1), ("write", 2),
        ("free", 2), ("release", 0),
    ]  # fmt: skip
    assert str(events[3]) == f"table {child.id}: copy block 1 -> block 2"
    table.append_tokens()  # after the block: nobody listens, nothing is recorded
    assert len(events) == 8


def test_freeing_a_table_whose_block_was_freed_behind_its_back_changes_nothing() -> None:
    alloc = BlockAllocator(4, 2)
    table = BlockTable(alloc)
    table.append_tokens(4)  # blocks 0 and 1
    alloc.free(0)  # misuse: drops the table's own reference
    state = (alloc.refcounts(), alloc.free_list())
    with pytest.raises(ValueError, match="block 0 is already free"):
        table.free()
    assert (alloc.refcounts(), alloc.free_list(), table.blocks) == (*state, [0, 1])


def test_append_token_is_append_tokens_of_one() -> None:
    one, many = example_table(3), example_table(3)
    for _ in range(6):
        one.append_token()
        many.append_tokens(1)
    assert one.blocks == many.blocks and one.num_tokens == many.num_tokens == 9
    one.free()
    with pytest.raises(ValueError, match="already freed"):
        one.append_token()


def test_check_int_names_the_value_and_its_bounds() -> None:
    from pagedlab.ground.checks import check_int

    assert check_int(4, "width", minimum=1, maximum=4) == 4
    with pytest.raises(ValueError, match="width must be <= 4, got 5"):
        check_int(5, "width", minimum=1, maximum=4)
    with pytest.raises(ValueError, match="width must be >= 1, got 0"):
        check_int(0, "width", minimum=1, maximum=4)


# --- bad values: a TypeError or ValueError naming the value, nothing changed ----------------
INT_ARGUMENTS: list[tuple[str, IntCall]] = [
    ("n", lambda s, v: s.table.append_tokens(v)),
    ("n", lambda s, v: s.table.blocks_needed(v)),
    ("n", lambda s, v: s.table.can_append(v)),
    ("pos", lambda s, v: s.table.slot(v)),
    ("block", lambda s, v: BlockTable(s.alloc).hold_prefix([v])),
    ("num_tokens", lambda s, v: blocks_to_append(v, 1, 4)),
    ("n", lambda s, v: blocks_to_append(4, v, 4)),
    ("block_size", lambda s, v: blocks_to_append(4, 1, v)),
]


OTHER_CALLS: list[OtherCall] = [
    (lambda s: BlockTable(s.cache), TypeError, "BlockTable needs a BlockAllocator"),
    (lambda s: s.table.hold_prefix(5), TypeError, "blocks must be a sequence"),
    (lambda s: BlockTable(s.alloc).hold_prefix([3, 3]), ValueError, "repeat a block"),
    (lambda s: BlockTable(s.alloc).hold_prefix([8]), ValueError, "block 8 is out of range"),
    (lambda s: BlockTable(s.alloc).hold_prefix(np.array(1)), TypeError, "blocks must be"),
]
(
    test_wrong_kinds_are_type_errors,
    test_wrong_values_are_value_errors,
    test_other_bad_arguments,
) = misuse_tests(INT_ARGUMENTS, OTHER_CALLS)


def test_a_table_whose_block_was_freed_behind_its_back_refuses_fork_and_append() -> None:
    """Freeing a table's block through the allocator makes the table refuse fork and append,
    naming the block, changing nothing; BlockTable(None) names what it needs."""
    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(4)
    a.free(1)  # behind the table's back
    snapshot = lambda: (a.refcounts(), a.free_list(), t.blocks)  # noqa: E731
    refuses(t.fork, match="block 1 was freed behind its back", state=snapshot)
    assert snapshot() == ([1, 0, 0, 0], [2, 3, 1], [0, 1])

    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(3)
    a.free(1)
    refuses(lambda: t.append_tokens(1), match="block 1 was freed behind its back")
    assert (t.num_tokens, a.refcounts()) == (3, [1, 0, 0, 0])

    refuses(
        lambda: BlockTable(None), TypeError, match="BlockTable needs a BlockAllocator.*got None"
    )  # type: ignore[arg-type]


def test_a_block_freed_behind_a_tables_back_is_never_freed_twice_or_overwritten() -> None:
    a = BlockAllocator(2, 2)
    t = BlockTable(a)
    t.append_tokens(3)  # blocks 0, 1
    a.free(1)
    other = BlockTable(a)
    other.append_tokens(2)  # is handed block 1
    assert other.blocks == [1] and t.lost == [1]
    for call in (t.free, t.append_token, t.slot_mapping, lambda: t.slot(0)):
        refuses(call, match="freed behind its back")
    assert a.refcounts() == [1, 1]  # the old table's free did not drop the new holder's block


def test_a_shared_block_freed_behind_the_back_costs_exactly_one_holder() -> None:
    a = BlockAllocator(4, 2)
    parent = BlockTable(a)
    parent.append_tokens(3)  # blocks 0 (full), 1 (one of two slots)
    child = parent.fork()
    a.free(1)  # drops the most recent holder's reference: the child's
    assert child.lost == [1] and parent.lost == [] and a.refcount(1) == 1
    assert parent.append_tokens() is None  # the parent alone holds block 1: in place
    refuses(child.append_tokens, match="table 1: block 1 was freed behind its back")


def test_table_ids_are_read_only() -> None:
    s = scene()
    with pytest.raises(AttributeError):
        s.table.id = 7  # type: ignore[misc]
