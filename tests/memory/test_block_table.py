"""The example of the paper (§4.1-4.3) and every bad input of contract §2."""

from __future__ import annotations

import pytest

from pagedlab import BlockAllocator, BlockTable, CopyOnWrite, OutOfBlocksError

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
    with pytest.raises(OutOfBlocksError, match="needs 2 free block"):
        table.append_tokens(8)
    assert (table.blocks, table.num_tokens, alloc.num_free) == ([0, 1], 5, 1)
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


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: BlockAllocator(0, 4), "num_blocks must be >= 1, got 0"),
        (lambda: BlockAllocator(4, -2), "block_size must be >= 1, got -2"),
        (lambda: BlockAllocator(4, 2.5), "block_size must be an integer, got 2.5"),  # type: ignore[arg-type]
        (
            lambda: BlockAllocator(3, 4, free_order=[0, 1, 1]),
            r"permutation of range\(3\), got \[0, 1, 1\]",
        ),
        (lambda: BlockAllocator(3, 4, free_order=[0, 1]), "permutation"),
        (lambda: BlockAllocator(3, 4, free_order=[0, 1, "x"]), "permutation"),  # type: ignore[list-item]
    ],
)
def test_bad_construction_names_the_value(make, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_calls_name_the_value_and_change_nothing() -> None:
    alloc = BlockAllocator(4, 4)
    table = BlockTable(alloc)
    table.append_tokens(5)
    state = (table.blocks, table.num_tokens, alloc.refcounts(), alloc.free_list())
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
        with pytest.raises(ValueError, match=message):
            call()
        assert (table.blocks, table.num_tokens, alloc.refcounts(), alloc.free_list()) == state


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
    from pagedlab.checks import check_int

    assert check_int(4, "width", minimum=1, maximum=4) == 4
    with pytest.raises(ValueError, match="width must be <= 4, got 5"):
        check_int(5, "width", minimum=1, maximum=4)
    with pytest.raises(ValueError, match="width must be >= 1, got 0"):
        check_int(0, "width", minimum=1, maximum=4)
