"""Property-based tests: the allocator's invariants hold after any sequence of operations."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError
from tests.machine_steps import PICK, check, choose, integer, run_random, setup, step


class Allocation(RuleBasedStateMachine):
    @setup(num_blocks=integer(1, 12), block_size=integer(1, 5), seed=integer(0, 2**32))
    def start(self, num_blocks: int, block_size: int, seed: int) -> None:
        order = list(range(num_blocks))
        random.Random(seed).shuffle(order)
        self.alloc = BlockAllocator(num_blocks, block_size, free_order=order)
        self.live: list[BlockTable] = []
        self.slots: dict[int, list[tuple[int, int]]] = {}  # table id -> slot of each position

    def _snapshot(self) -> tuple[object, ...]:
        return (
            self.alloc.refcounts(),
            self.alloc.free_list(),
            [(t.blocks, t.num_tokens) for t in self.live],
        )

    @step(n=integer(1, 10))
    def new_sequence(self, n: int) -> None:
        table = BlockTable(self.alloc)
        before = self._snapshot()
        try:
            table.append_tokens(n)
        except OutOfBlocksError:
            assert self._snapshot() == before
            return
        self.live.append(table)
        self.slots[table.id] = [table.slot(p) for p in range(n)]

    @step(pre=lambda self: self.live, pick=PICK, n=integer(1, 6))
    def append(self, pick: int, n: int) -> None:
        table = choose(self.live, pick)
        before = self._snapshot()
        try:
            copy = table.append_tokens(n)
        except OutOfBlocksError:
            assert self._snapshot() == before
            return
        old = self.slots[table.id]
        size = self.alloc.block_size
        full = len(old) - len(old) % size
        now = [table.slot(p) for p in range(table.num_tokens)]
        assert now[:full] == old[:full], "a position in a full block moved"
        if copy is None:
            assert now[: len(old)] == old, "a written position moved without a copy"
        else:
            assert all(block == copy.src for block, _ in old[full:])
            assert all(block == copy.dst for block, _ in now[full : len(old)])
        written = {block for block, _ in now[len(old) :]}
        assert all(self.alloc.refcount(b) == 1 for b in written), "wrote into a shared block"
        self.slots[table.id] = now

    @step(pre=lambda self: self.live, pick=PICK)
    def fork(self, pick: int) -> None:
        table = choose(self.live, pick)
        child = table.fork()
        self.live.append(child)
        self.slots[child.id] = list(self.slots[table.id])

    @step(pre=lambda self: self.live, pick=PICK)
    def free(self, pick: int) -> None:
        table = choose(self.live, pick)
        table.free()
        self.live.remove(table)

    @check
    def refcount_is_the_number_of_holders(self) -> None:
        holders = Counter(b for t in self.live for b in t.blocks)
        assert self.alloc.refcounts() == [holders[b] for b in range(self.alloc.num_blocks)]

    @check
    def free_list_is_exactly_the_unheld_blocks(self) -> None:
        free = self.alloc.free_list()
        assert len(free) == len(set(free)) == self.alloc.num_free
        assert set(free) == {b for b, c in enumerate(self.alloc.refcounts()) if c == 0}

    @check
    def only_the_last_block_has_empty_slots(self) -> None:
        for t in self.live:
            assert t.num_slots == len(t.blocks) * self.alloc.block_size
            assert t.num_slots - self.alloc.block_size < t.num_tokens <= t.num_slots

    def teardown(self) -> None:
        for table in list(self.live):
            table.free()
        assert self.alloc.num_free == self.alloc.num_blocks
        assert not any(self.alloc.refcounts())


TestAllocation = Allocation.TestCase
TestAllocation.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


@pytest.mark.slow
def test_allocation_10000_random_sequences() -> None:
    assert run_random(Allocation, 10_000, steps=30) > 200_000
