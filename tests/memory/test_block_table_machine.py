"""Block tables under a hostile learner: correct use mixed with misuse, around the allocator,
the prefix cache and beam_step that tables meet.

After every step, either the call succeeded and the invariants hold, or it raised a clear
error (TypeError, ValueError or OutOfBlocksError with a message) and nothing observable
changed: ref counts, free list, every table, the prefix cache and its counters.

Misuse includes freeing a table's block behind its back (``allocator.free``): the table that
lost the reference must refuse every later operation, and no other table's data may be
overwritten. A fake KV store (one value per slot, unique per write) checks the data.

``TestMisuse`` (hypothesis, shrinking) runs a few hundred sequences; the ``slow`` test replays
the same rules on 10,000 seeded random sequences of 30 steps, without hypothesis's per-draw cost.
"""

from __future__ import annotations

from collections import Counter
from itertools import count

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError, PrefixCache
from pagedlab.memory.sharing import beam_step
from tests.machine_steps import (
    PICK,
    check,
    choose,
    integer,
    integers,
    one_of,
    run_random,
    setup,
    step,
)

BAD_COUNTS = [0, -1, True, np.bool_(True), 1.5, float("nan"), "2", None, 2**70, np.int64(-3)]
CLEAR = (TypeError, ValueError, OutOfBlocksError)


class Misuse(RuleBasedStateMachine):
    @setup(num_blocks=integer(1, 8), block_size=integer(1, 3))
    def start(self, num_blocks: int, block_size: int) -> None:
        self.alloc = BlockAllocator(num_blocks, block_size)
        self.cache = PrefixCache(self.alloc)
        self.tables: list[BlockTable] = []  # every table made, freed or not
        self.data: dict[int, list[int]] = {}  # table id -> value written at each position
        self.anon: Counter[int] = Counter()  # references held directly (allocate / share)
        self.store: dict[tuple[int, int], int] = {}  # (block, offset) -> value: the fake KV
        self.values = count()

    # --- helpers -------------------------------------------------------------------------
    def _state(self) -> tuple[object, ...]:
        return (
            self.alloc.refcounts(),
            self.alloc.free_list(),
            [(t.blocks, t.num_tokens, t.freed, t.lost) for t in self.tables],
            self.cache.cached_blocks(),
            repr(self.cache.stats),
        )

    def _attempt(self, call):  # type: ignore[no-untyped-def]
        """Run ``call``; on an error, check that it is clear and that nothing changed."""
        before = self._state()
        try:
            return True, call()
        except CLEAR as error:
            assert str(error), f"{type(error).__name__} without a message"
            assert self._state() == before, f"{error!r} changed the state"
            return False, None

    def _usable(self) -> list[BlockTable]:
        return [t for t in self.tables if not t.freed and not t.lost]

    def _write(self, table: BlockTable, first: int) -> None:
        values = self.data[table.id]
        for pos in range(first, table.num_tokens):
            value = next(self.values)
            values.append(value)
            self.store[table.slot(pos)] = value

    def _appended(self, table: BlockTable, copy, first: int) -> None:  # type: ignore[no-untyped-def]
        if copy is not None:
            for offset in range(self.alloc.block_size):
                if (copy.src, offset) in self.store:
                    self.store[copy.dst, offset] = self.store[copy.src, offset]
        self._write(table, first)

    # --- correct use -----------------------------------------------------------------------
    @step(n=integer(1, 6))
    def new_table(self, n: int) -> None:
        table = BlockTable(self.alloc)
        self.tables.append(table)
        self.data[table.id] = []
        ok, copy = self._attempt(lambda: table.append_tokens(n))
        if ok:
            self._appended(table, copy, 0)

    @step(pre=lambda self: self._usable(), pick=PICK, n=integer(1, 5))
    def append(self, pick: int, n: int) -> None:
        table = choose(self._usable(), pick)
        first = table.num_tokens
        needed, free = table.blocks_needed(n), self.alloc.num_free
        assert table.can_append(n) == (needed <= free)
        ok, copy = self._attempt(lambda: table.append_tokens(n))
        assert ok == (needed <= free), "the pure check disagreed with append_tokens"
        assert free - self.alloc.num_free == (needed if ok else 0)
        if ok:
            self._appended(table, copy, first)

    @step(pre=lambda self: self._usable(), pick=PICK)
    def fork(self, pick: int) -> None:
        table = choose(self._usable(), pick)
        child = table.fork()
        self.tables.append(child)
        self.data[child.id] = list(self.data[table.id])

    @step(pre=lambda self: self._usable(), pick=PICK)
    def free_table(self, pick: int) -> None:
        choose(self._usable(), pick).free()

    @step(pre=lambda self: self._usable(), picks=integers(0, 99, 1, 3), kept=integers(0, 99, 1, 3))
    def beam(self, picks: list[int], kept: list[int], n: int = 1) -> None:
        usable = self._usable()
        beams = list(dict.fromkeys(choose(usable, p) for p in picks))
        parents = [k % len(beams) for k in kept]
        ok, step = self._attempt(lambda: beam_step(beams, parents, n))
        if not ok:
            return
        for copy in step.copies:
            for offset in range(self.alloc.block_size):
                if (copy.src, offset) in self.store:
                    self.store[copy.dst, offset] = self.store[copy.src, offset]
        for table, parent in zip(step.beams, parents, strict=True):
            self.tables.append(table)
            self.data[table.id] = list(self.data[beams[parent].id])
            self._write(table, table.num_tokens - n)

    @step(tokens=integers(0, 1, 1, 7))
    def admit(self, tokens: list[int]) -> None:
        ok, admission = self._attempt(lambda: self.cache.admit(tokens))
        if ok:
            table = admission.table
            self.tables.append(table)
            # a hit's positions hold what the cached blocks hold
            self.data[table.id] = [self.store[table.slot(p)] for p in range(admission.hit_tokens)]
            self._write(table, admission.hit_tokens)

    @step()
    def allocate_directly(self) -> None:
        ok, block = self._attempt(self.alloc.allocate)
        if ok:
            self.anon[block] += 1

    @step(pre=lambda self: +self.anon, pick=PICK)
    def free_own_block(self, pick: int) -> None:
        block = choose(sorted(+self.anon), pick)
        self.alloc.free(block)
        self.anon[block] -= 1

    @step(pick=PICK)
    def share_directly(self, pick: int) -> None:
        block = pick % self.alloc.num_blocks
        ok, _ = self._attempt(lambda: self.alloc.share(block))
        if ok:
            self.anon[block] += 1

    # --- misuse ----------------------------------------------------------------------------
    @step(pick=PICK)
    def free_behind_a_tables_back(self, pick: int) -> None:
        """``allocator.free(b)`` on any block: a table's, an anonymous one, or a free one."""
        block = pick % self.alloc.num_blocks
        holders = [
            (t, len(t.lost))
            for t in self.tables
            if not t.freed and block in t.blocks and block not in t.lost
        ]
        ok, _ = self._attempt(lambda: self.alloc.free(block))
        if not ok:
            return
        losers = [t for t, lost in holders if len(t.lost) > lost]
        if self.anon[block]:
            self.anon[block] -= 1
            assert not losers
        else:  # exactly one table lost its reference, and refuses from now on
            assert len(losers) == 1 and losers[0].lost[-1] == block

    @step(
        pre=lambda self: self.tables,
        pick=PICK,
        bad=one_of(BAD_COUNTS),
        which=one_of(["append", "slot", "needed", "can_allocate"]),
    )
    def bad_count(self, pick: int, bad: object, which: str) -> None:
        table = choose(self.tables, pick)
        call = {
            "append": lambda: table.append_tokens(bad),  # type: ignore[arg-type]
            "slot": lambda: table.slot(bad),  # type: ignore[arg-type]
            "needed": lambda: table.blocks_needed(bad),  # type: ignore[arg-type]
            "can_allocate": lambda: self.alloc.can_allocate(bad),  # type: ignore[arg-type]
        }[which]
        ok, _ = self._attempt(call)
        answers = (  # valid after all: a position, a pure question, or nothing to allocate
            which == "slot"
            or (which == "needed" and bad is BAD_COUNTS[8])
            or (which == "can_allocate" and (bad is BAD_COUNTS[0] or bad is BAD_COUNTS[8]))
        )
        assert not ok or answers, f"{which}({bad!r}) was accepted"

    @step(pre=lambda self: any(t.freed or t.lost for t in self.tables), pick=PICK)
    def use_a_refusing_table(self, pick: int) -> None:
        """Freed tables and tables that lost a block refuse everything and change nothing."""
        table = choose([t for t in self.tables if t.freed or t.lost], pick)
        for call in (table.append_tokens, table.append_token, table.fork, table.free):
            assert not self._attempt(call)[0]
        assert not self._attempt(lambda: beam_step([table], [0]))[0]
        assert not self._attempt(lambda: self.cache.register(table, []))[0]

    @step(
        bad=one_of(["num_blocks", -1, 1.0, True, "0", None, 2**40]),
        method=one_of(["free", "share", "reuse", "refcount"]),
        shape=integer(0, 4),
    )
    def bad_blocks(self, bad: object, method: str, shape: int) -> None:
        n = self.alloc.num_blocks
        bad = n if bad == "num_blocks" else bad
        assert not self._attempt(lambda: getattr(self.alloc, method)(bad))[0]
        table = BlockTable(self.alloc)
        self.tables.append(table)
        self.data[table.id] = []
        blocks = [[bad], [0, 0], 5, "01", [n - 1, bad]][shape]
        assert not self._attempt(lambda: table.hold_prefix(blocks))[0]  # type: ignore[arg-type]

    @step()
    def close_the_cache(self) -> None:
        self.cache.close()
        assert self.cache.cached_blocks() == {}
        assert not self._attempt(lambda: self.cache.admit([0, 1, 0]))[0]
        assert not self._attempt(lambda: self.cache.lookup([0, 1, 0]))[0]
        self.cache = PrefixCache(self.alloc)  # a fresh one goes on

    # --- invariants --------------------------------------------------------------------------
    @check
    def all_invariants(self) -> None:
        self.refcount_is_the_number_of_holders()
        self.every_usable_table_reads_back_its_data()
        self.cached_blocks_hold_a_full_block()

    def refcount_is_the_number_of_holders(self) -> None:
        held = Counter(self.anon)
        for t in self.tables:
            if not t.freed:
                held.update(b for b in t.blocks if b not in t.lost)
        assert self.alloc.refcounts() == [held[b] for b in range(self.alloc.num_blocks)]
        free = self.alloc.free_list()
        assert sorted(free) == [b for b in range(self.alloc.num_blocks) if not held[b]]

    def every_usable_table_reads_back_its_data(self) -> None:
        for t in self._usable():
            assert t.num_slots - self.alloc.block_size < t.num_tokens <= t.num_slots or not t.blocks
            read = [self.store.get(t.slot(p)) for p in range(t.num_tokens)]
            assert read == self.data[t.id], f"table {t.id} lost its data"

    def cached_blocks_hold_a_full_block(self) -> None:
        for block in self.cache.cached_blocks():
            assert len(self.cache.tokens_of(block)) == self.alloc.block_size

    def teardown(self) -> None:
        if not hasattr(self, "alloc"):
            return
        for table in self._usable():
            table.free()
        for block, n in self.anon.items():
            for _ in range(n):
                self.alloc.free(block)
        leaked = Counter(b for t in self.tables if t.lost and not t.freed for b in t.blocks)
        for block in leaked:
            assert self.alloc.refcount(block) <= leaked[block]


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

TestMisuse = Misuse.TestCase
TestMisuse.settings = settings(max_examples=300, stateful_step_count=20, **COMMON)  # type: ignore[arg-type]


@pytest.mark.slow
def test_misuse_10000_random_sequences() -> None:
    assert run_random(Misuse, 10_000, steps=30) > 200_000
