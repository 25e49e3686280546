"""The scheduler refuses what it cannot do and changes nothing, under correct use mixed with
misuse, as a hostile user would mix them (a stateful test).

A small ``Scheduler`` (swap or recompute, whole or chunked prefill, a host pool that may be
small) with a fake K/V store (one value per slot: which request, stream and position wrote
it; copy-on-write and swaps move those values as the real store moves tensors). The rules
add requests and step, and misuse the scheduler: blocks taken or freed behind its back on
either pool, a running table freed or grown, settings and hooks replaced, bad requests
and arguments.

After every rule either the call succeeded, ``Scheduler.check_invariants`` holds and every running
sample's K/V reads back exactly, or it raised a clear error (TypeError, ValueError,
OutOfBlocksError, with a message) and nothing observable changed: queues, groups, tables,
both pools' ref counts and free lists, counters and the K/V store. A misuse the scheduler
cannot recover from (a block lost) is refused on every later step; the machine then checks
one refusal and starts a fresh scheduler with the same settings.

K/V is written only by executing each step's plan (swaps out, swaps in, copies, then the
pieces), so reading every running sample back checks the plan too.

``TestSchedulerMisuse`` (hypothesis, shrinking) runs a few hundred sequences; the ``slow``
test replays the same rules on 10,000 seeded random sequences of 30 steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import CopyOnWrite
from pagedlab.memory.requests import Group, Request, StepOutput, Work
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig
from tests.machine_steps import PICK, check, choose, integer, one_of, run_random, setup, step
from tests.refuses import refuses

CLEAR = (TypeError, ValueError, OutOfBlocksError)
BAD_INTS = [0, -1, True, 1.5, float("nan"), "2", np.bool_(True), None]


def expected(group: Group, sample: int, pos: int) -> tuple[str, int, int]:
    """What position ``pos`` of ``sample`` holds: prompt positions are shared (stream 0)."""
    stream = 0 if pos < group.request.prompt_len else 1 + sample
    return group.name, stream, pos


class FakeKV:
    """The scheduler's data plane in dicts: slot -> the value written there."""

    def __init__(self, block_size: int) -> None:
        self.size = block_size
        self.device: dict[int, tuple[str, int, int]] = {}
        self.host: dict[int, tuple[str, int, int]] = {}

    def forward(self, work: Sequence[Work], groups: dict[str, Group]) -> StepOutput:
        for w in work:
            positions = range(w.first, w.first + w.count)
            for pos, slot in zip(positions, w.slots(self.size), strict=True):
                self.device[slot] = expected(groups[w.group], w.sample, pos)
        return StepOutput()

    def _move(self, src: dict, dst: dict, s: int, d: int) -> None:  # type: ignore[type-arg]
        for offset in range(self.size):
            value = src.get(s * self.size + offset)
            if value is None:
                dst.pop(d * self.size + offset, None)
            else:
                dst[d * self.size + offset] = value

    def copy(self, cow: CopyOnWrite) -> None:
        self._move(self.device, self.device, cow.src, cow.dst)

    def swap_out(self, pairs: Any) -> None:
        for d, h in pairs:
            self._move(self.device, self.host, d, h)

    def swap_in(self, pairs: Any) -> None:
        for h, d in pairs:
            self._move(self.host, self.device, h, d)


class SchedulerMisuse(RuleBasedStateMachine):
    @setup(
        blocks=integer(3, 12),
        size=integer(1, 4),
        host_blocks=integer(1, 12),
        mode=one_of(["swap", "recompute"]),
        budget=one_of([None, 2, 4, 8, 32]),
        chunked=one_of([False, True]),
    )
    def start(
        self, blocks: int, size: int, host_blocks: int, mode: str, budget: int | None, chunked: bool
    ) -> None:
        budget = budget if budget is not None or not chunked else 8
        self.settings = (blocks, size, host_blocks, mode, budget, chunked)
        self.names = count()
        self.fresh()

    def fresh(self) -> None:
        blocks, size, host_blocks, mode, budget, chunked = self.settings
        self.kv = FakeKV(size)
        self.s = Scheduler(
            BlockAllocator(blocks, size),
            SchedulerConfig(mode=mode, token_budget=budget, chunked_prefill=chunked),
            host=BlockAllocator(host_blocks, size),
            kv=self.kv,
        )
        self.outside: list[tuple[BlockAllocator, int]] = []  # blocks taken behind its back
        self.broken = False  # a block was lost: every step must be refused

    # --- helpers -------------------------------------------------------------------------
    def _state(self) -> tuple[object, ...]:
        s = self.s
        groups = [
            (g.name, g.status, g.generated, g.work, g.prefilled, g.recompute_left, g.preemptions,
             g.finished_at, [list(h) for h in g.host], list(g.host_tokens),
             [(t.blocks, t.num_tokens, t.freed, t.lost) for t in g.tables])
            for g in s.groups.values()
        ]  # fmt: skip
        queues = [[g.name for g in q] for q in (s.waiting, s.running, s.swapped, s.finished)]
        counters = (s.steps, s.preemptions, s.tokens_recomputed, s.blocks_swapped_out,
                    s.blocks_swapped_in, s.kv is self.kv)  # fmt: skip
        pools = (s.device.refcounts(), s.device.free_list(), s.host.refcounts(), s.host.free_list())
        return groups, queues, counters, pools, dict(self.kv.device), dict(self.kv.host)

    def _refused(self, call) -> bool:  # type: ignore[no-untyped-def]
        """Run ``call``; True if it raised a clear error that changed nothing."""
        before = self._state()
        try:
            call()
        except CLEAR as error:
            assert str(error), f"{type(error).__name__} without a message"
            assert self._state() == before, f"{error!r} changed the state"
            return True
        return False

    def _healthy(self) -> bool:
        return not self.broken and not self.outside

    # --- correct use -----------------------------------------------------------------------
    @step(prompt=integer(1, 14), output=integer(1, 10), samples=one_of([1, 1, 2, 3]))
    def add(self, prompt: int, output: int, samples: int) -> None:
        request = Request(f"r{next(self.names)}", prompt, output, samples)
        if self._refused(lambda: self.s.add(request)):
            blocks, size = self.s.device.num_blocks, self.s.block_size
            too_big = samples * -(-(prompt + output) // size) > blocks
            too_wide = (
                self.s.config.token_budget is not None and samples > self.s.config.token_budget
            )
            assert too_big or too_wide, f"{request} refused though it fits"

    @step(pre=lambda m: not m.s.done, times=integer(1, 4))
    def steps(self, times: int) -> None:
        for _ in range(times):
            if self.s.done:
                return
            if self._healthy():
                result = self.s.step()
                if result.admitted:
                    assert not self.s.swapped and not result.preempted
            else:
                assert self._refused(self.s.step), "a step over a misused pool was not refused"
                if self.broken:
                    self.fresh()
                return

    @step(pre=lambda m: m._healthy() and not m.s.done)
    def run_to_the_end(self) -> None:
        self.s.run(max_steps=5_000)
        assert self.s.done

    # --- misuse --------------------------------------------------------------------------
    @step(which=one_of(["device", "host"]))
    def take_a_block_behind_its_back(self, which: str) -> None:
        pool = self.s.device if which == "device" else self.s.host
        if pool.num_free:
            self.outside.append((pool, pool.allocate()))

    @step(pre=lambda m: bool(m.outside))
    def give_the_blocks_back(self) -> None:
        for pool, block in self.outside:
            pool.free(block)
        self.outside = []

    @step(pick=PICK, whole=one_of([False, True]))
    def free_a_running_block_behind_its_back(self, pick: int, whole: bool) -> None:
        tables = [t for g in self.s.running for t in g.tables if t.blocks]
        if not tables or self.broken:
            return
        table = choose(tables, pick)
        if whole:
            table.free()
        else:
            self.s.device.free(choose(table.blocks, pick))
        self.broken = True

    @step(pick=PICK)
    def grow_a_running_table_behind_its_back(self, pick: int) -> None:
        if self.broken:
            return
        tables = [t for g in self.s.running for t in g.tables if t.can_append(1)]
        if not tables:
            return
        choose(tables, pick).append_tokens(1)
        self.broken = True  # its K/V position would be written twice: refused from now on

    @step(pick=PICK)
    def free_a_host_block_behind_its_back(self, pick: int) -> None:
        held = [b for g in self.s.swapped for b in g.host_blocks()]
        if not held or self.broken:
            return
        self.s.host.free(choose(held, pick))
        self.broken = True

    @step(bad=one_of([object(), "kv", 3]))
    def replace_the_hooks(self, bad: object) -> None:
        self.s.kv = bad  # type: ignore[assignment]
        if not self.s.done:
            refuses(self.s.step, CLEAR, naming="KVHooks", state=self._state)
        self.s.kv = self.kv

    @step(
        setting=one_of(
            [("config", "swap"), ("config", None), ("config", {"token_budget": 0}),
             ("device", None), ("host", "other")]
        )
    )  # fmt: skip
    def reassign_a_setting(self, setting: tuple[str, object]) -> None:
        name, bad = setting
        if name == "device":
            bad = BlockAllocator(self.s.device.num_blocks, self.s.block_size)
        before, original = self._state(), getattr(self.s, name)
        setattr(self.s, name, bad)
        try:
            self.s.step()
        except CLEAR as error:
            assert str(error)
        else:
            raise AssertionError(f"a step with {name} = {bad!r} was not refused")
        finally:
            setattr(self.s, name, original)
        assert self._state() == before

    @step(pick=PICK)
    def add_bad_requests(self, pick: int) -> None:
        blocks = self.s.device.num_blocks
        bad = [None, "r", 3, ("a", 1, 1), Request("huge", blocks * self.s.block_size, 1)]
        if self.s.groups:
            bad.append(Request(choose(list(self.s.groups), pick), 1, 1))  # a name already used
        if self.s.config.token_budget is not None:
            bad.append(Request("wide", 1, 1, self.s.config.token_budget + 1))
        assert self._refused(lambda: self.s.add(choose(bad, pick)))  # type: ignore[arg-type]

    @step(bad=one_of(BAD_INTS))
    def run_with_bad_max_steps(self, bad: object) -> None:
        refuses(lambda: self.s.run(max_steps=bad), CLEAR, naming="max_steps", state=self._state)  # type: ignore[arg-type]

    @step(pick=PICK)
    def build_with_impossible_settings(self, pick: int) -> None:
        blocks, size, host_blocks, *_ = self.settings
        used = BlockAllocator(blocks, size)
        used.allocate()
        cases = [
            lambda: Scheduler(self.s.device, host=self.s.device),
            lambda: Scheduler(used),
            lambda: Scheduler(BlockAllocator(blocks, size), host=used),
            lambda: Scheduler(used, host=used),
            lambda: Scheduler(
                BlockAllocator(blocks, size), SchedulerConfig(mode=choose(["SWAP", None, 1], pick))
            ),
            lambda: Scheduler(
                BlockAllocator(blocks, size),
                SchedulerConfig(token_budget=choose(BAD_INTS[:-2], pick)),
            ),
            lambda: Scheduler(BlockAllocator(blocks, size), SchedulerConfig(chunked_prefill=True)),
            lambda: Scheduler(BlockAllocator(blocks, size), host=BlockAllocator(4, size + 1)),
            lambda: Scheduler(BlockAllocator(blocks, size), kv=object()),  # type: ignore[arg-type]
        ]
        free_before = used.free_list()
        assert self._refused(choose(cases, pick))
        assert used.free_list() == free_before

    # --- invariants --------------------------------------------------------------------------
    @check
    def all_invariants(self) -> None:
        if not hasattr(self, "s") or not self._healthy():
            return
        self.s.check_invariants()
        for group in self.s.running:
            for sample, table in enumerate(group.tables):
                read = [self.kv.device.get(slot) for slot in table.slot_mapping()]
                want = [expected(group, sample, pos) for pos in range(table.num_tokens)]
                assert read == want, f"{group} sample {sample} lost its K/V"
        for group in self.s.finished:
            assert group.generated == group.request.output_len

    def teardown(self) -> None:
        if not hasattr(self, "s"):
            return
        if self.outside and not self.broken:
            self.give_the_blocks_back()
        if not self.broken:
            self.s.run(max_steps=5_000)
            self.all_invariants()
            assert self.s.device.num_free == self.s.device.num_blocks
            assert self.s.host.num_free == self.s.host.num_blocks


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

TestSchedulerMisuse = SchedulerMisuse.TestCase
TestSchedulerMisuse.settings = settings(max_examples=200, stateful_step_count=25, **COMMON)  # type: ignore[arg-type]


@pytest.mark.slow
def test_scheduler_misuse_10000_random_sequences() -> None:
    assert run_random(SchedulerMisuse, 10_000, steps=30) > 200_000
