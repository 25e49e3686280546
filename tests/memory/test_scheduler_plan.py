"""A scheduler step decides a plan first, then it is executed, then the scheduler updates.

``Scheduler.schedule()`` touches no K/V and calls no hook; executing its plan (``step()``
through ``kv``) calls swaps out, swaps in, copies, then one forward, all after the
decision; ``update()`` appends the output's tokens and frees what finished. The K/V store
here is the hostile-use test's ``FakeKV`` (one value per slot: who wrote it), so every
running sample's K/V is read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from pagedlab.engine.prefix import PrefixCachingScheduler
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, Request, StepOutput, Work
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig, execute
from tests.memory.test_scheduler_refuses_hostile_use import FakeKV, expected
from tests.refuses import refuses


class Recorder(FakeKV):
    """A FakeKV that logs each hook call with the scheduler's state at that moment."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self.calls: list[tuple[str, int, tuple[str, ...]]] = []
        self.scheduler: Scheduler | None = None

    def _log(self, name: str) -> None:
        s = self.scheduler
        assert s is not None
        self.calls.append((name, s.device.num_free, tuple(g.name for g in s.running)))

    def forward(self, work: Sequence[Work], groups: dict[str, Group]) -> StepOutput:
        self._log("forward")
        return super().forward(work, groups)

    def copy(self, cow: Any) -> None:
        self._log("copy")
        super().copy(cow)

    def swap_out(self, pairs: Any) -> None:
        self._log("swap_out")
        super().swap_out(pairs)

    def swap_in(self, pairs: Any) -> None:
        self._log("swap_in")
        super().swap_in(pairs)


def read_back(s: Scheduler, kv: FakeKV) -> None:
    """Every running sample's K/V is what it should hold."""
    for group in s.running:
        for sample, table in enumerate(group.tables):
            read = [kv.device.get(slot) for slot in table.slot_mapping()]
            want = [expected(group, sample, pos) for pos in range(table.num_tokens)]
            assert read == want, f"{group} sample {sample} lost its K/V"


ORDER = {"swap_out": 0, "swap_in": 1, "copy": 2, "forward": 3}
WORKLOADS = [  # (blocks, size, mode, budget, chunked, requests): swaps, copies, preemptions
    (3, 4, "swap", 8, True, [("A", 4, 4, 2), ("B", 7, 1, 1), ("C", 3, 2, 1), ("D", 3, 2, 1)]),
    (8, 2, "swap", None, False, [("A", 5, 6, 1), ("B", 5, 6, 1), ("C", 5, 6, 1), ("D", 2, 2)]),
    (6, 4, "recompute", 6, True, [("A", 3, 4, 1), ("B", 11, 2, 2)]),
    (12, 4, "swap", None, False, [("A", 6, 6, 2), ("B", 6, 6, 2), ("C", 9, 3, 3)]),
]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_hooks_run_after_the_decision_in_the_executor_order(workload: tuple[Any, ...]) -> None:
    """No hook is called while a step decides: every call of a step sees the state the
    decision left (the same free blocks, the same running groups), and the calls come as
    swaps out, swaps in, copies, then writes."""
    blocks, size, mode, budget, chunked, specs = workload
    kv = Recorder(size)
    s = Scheduler(
        BlockAllocator(blocks, size),
        SchedulerConfig(mode, budget, chunked),
        BlockAllocator(blocks, size),
        kv,
    )
    kv.scheduler = s
    for spec in specs:
        s.add(Request(*spec))
    kinds: set[str] = set()
    while not s.done:
        kv.calls.clear()
        s.step()
        names = [c[0] for c in kv.calls]
        assert names == sorted(names, key=ORDER.__getitem__), names
        assert len({c[1:] for c in kv.calls}) <= 1, kv.calls  # nothing moved between calls
        kinds.update(names)
        s.check_invariants()
        read_back(s, kv)
    assert kinds >= {"forward", "copy"} or kinds >= {"forward", "swap_out", "swap_in"}


def test_schedule_alone_calls_no_hook_and_update_frees_what_finished() -> None:
    """``schedule()`` returns the plan and calls nobody; a group finishing in it leaves
    ``running`` but holds its blocks until ``update(plan, output)``; a second ``schedule()``
    before that, or completing another plan, is refused and changes nothing."""
    kv = Recorder(4)
    s = Scheduler(BlockAllocator(6, 4), kv=kv)
    kv.scheduler = s
    group = s.add(Request("A", 5, 1))
    s.step()  # the prefill
    kv.calls.clear()
    plan = s.schedule()
    assert kv.calls == [] and plan.finished == ["A"] and plan.decoded == ["A"]
    assert group.tables and group not in s.running and not s.done
    held = s.device.num_blocks - s.device.num_free
    assert held == 2
    state = lambda: (s.device.refcounts(), s.steps, [g.name for g in s.finished])  # noqa: E731
    refuses(s.schedule, RuntimeError, match="update", state=state)
    refuses(lambda: s.update(object(), StepOutput()), ValueError, naming="plan", state=state)  # type: ignore[arg-type]
    refuses(lambda: s.update(plan, {}), TypeError, naming="StepOutput", state=state)  # type: ignore[arg-type]
    refuses(lambda: s.update(plan, StepOutput({"Z": [[1]]})), ValueError, naming="Z", state=state)
    s.update(plan, execute(plan, kv, s.groups))
    assert not group.tables and s.device.num_free == 6 and s.done and group.finished_at == 2
    assert [c[0] for c in kv.calls] == ["forward"]


def test_a_group_preempted_after_it_decoded_leaves_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunked prefill preempts running[-1] after it decoded in the same step: its piece
    and counters are taken back (it is recomputed, never swapped with K/V no forward
    wrote), and every sample still reads back its K/V."""
    taken_back: list[str] = []
    unschedule = Scheduler._unschedule

    def record(self: Scheduler, group: Group, out: Any) -> None:
        taken_back.append(group.name)
        unschedule(self, group, out)

    monkeypatch.setattr(Scheduler, "_unschedule", record)
    kv = FakeKV(4)
    s = Scheduler(BlockAllocator(3, 4), SchedulerConfig("swap", 8, True), BlockAllocator(3, 4), kv)
    for spec in [("A", 4, 4, 2), ("B", 7, 1, 1), ("C", 3, 2, 1), ("D", 3, 2, 1)]:
        s.add(Request(*spec))
    d = s.groups["D"]
    seen = False
    while not s.done:
        generated = d.generated
        plan = s.step()
        if taken_back == ["D"] and not seen:
            seen = True
            assert "D" in plan.preempted and d.status == "waiting"
            assert d.generated == generated and "D" not in plan.decoded
            assert all(w.group != "D" for w in plan.work)
            assert all(c.group != "D" for c in plan.copies)
        s.check_invariants()
        read_back(s, kv)
    assert seen, "the workload no longer preempts a group that decoded in its step"
    assert all(g.generated == g.request.output_len for g in s.finished)


def test_a_copy_from_a_block_the_plan_writes_is_computed_instead() -> None:
    """A recompute writes a two-sample prompt whose last block is partly filled, then each
    sample's tokens in the same step: the first sample's copy of that block would read it
    before the forward writes it, so there is no copy; its piece starts at the block's first
    position instead, and the K/V read back."""
    kv = FakeKV(4)
    s = Scheduler(
        BlockAllocator(6, 4), SchedulerConfig("recompute", 32), host=BlockAllocator(9, 4), kv=kv
    )
    s.add(Request("r0", 3, 4))
    s.add(Request("r1", 11, 2, 2))
    redone = []
    for _ in range(6):
        plan = s.step()
        pieces = [(w.sample, w.first, w.count) for w in plan.work if w.group == "r1"]
        if pieces and pieces[0] == (0, 0, 11) and len(pieces) == 3:
            redone.append(plan)
            assert pieces == [(0, 0, 11), (0, 8, 4), (1, 11, 1)] and plan.copies == []
        read_back(s, kv)
    assert redone


def test_a_prefix_scheduled_in_a_step_is_hit_in_that_step() -> None:
    """A prefix-caching scheduler registers a full block when its K/V is scheduled: a
    request admitted later in the same step (nothing computed yet) starts on it."""
    device = BlockAllocator(16, 4)
    s = PrefixCachingScheduler(
        device, PrefixCache(device), SchedulerConfig(token_budget=32, chunked_prefill=True)
    )
    prompt = tuple(range(10, 24))  # 14 tokens: three full blocks
    s.add(Request("A", 14, 2, prompt=prompt))
    s.add(Request("B", 15, 2, prompt=prompt[:12] + (1, 2, 3)))
    plan = s.schedule()
    a, b = s.groups["A"], s.groups["B"]
    assert plan.admitted == ["A", "B"] and s.hit_tokens == 12
    assert b.tables[0].blocks[:3] == a.tables[0].blocks[:3]
    assert [(w.group, w.first, w.count) for w in plan.work] == [("A", 0, 14), ("B", 12, 3)]
    s.update(plan, StepOutput())
    s.run()
    assert device.num_free == 16


def test_blocks_registered_for_work_taken_back_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decode that fills a block registers it when scheduled; if its group is preempted
    later in the same step, the piece never runs, so the block is forgotten: after every
    step each cached block holds, slot by slot, the positions it is cached for."""
    forgotten: list[int] = []
    unschedule = Scheduler._unschedule

    def record(self: PrefixCachingScheduler, group: Group, out: Any) -> None:
        before = set(self.cache.cached_blocks())
        unschedule(self, group, out)
        forgotten.extend(before - set(self.cache.cached_blocks()))

    monkeypatch.setattr(Scheduler, "_unschedule", record)
    size, device, kv = 3, BlockAllocator(4, 3), FakeKV(3)
    s = PrefixCachingScheduler(
        device, PrefixCache(device), SchedulerConfig("swap", 3, True), BlockAllocator(4, 3)
    )
    for name, prompt, output in [("A", 2, 6), ("B", 9, 2), ("C", 4, 1), ("D", 2, 3)]:
        s.add(Request(name, prompt, output, prompt=(7,) * prompt))
    while not s.done:
        plan = s.schedule()
        execute(plan, kv, s.groups)
        output = StepOutput()  # as the engine's runner: a piece at the end of its tokens yields one
        for w in plan.work:
            group = s.groups[w.group]
            known, limit = group.token_ids[w.sample], group.request.prompt_len + 1
            if w.first + w.count == len(known) < limit + group.request.output_len:
                tokens = output.tokens.setdefault(w.group, [[] for _ in group.token_ids])
                tokens[w.sample].append(len(known) % 5)
        s.update(plan, output)
        for block, _ in s.cache.cached_blocks().items():
            values = [kv.device.get(block * size + j) for j in range(size)]
            assert None not in values and len({v[2] // size for v in values}) == 1, values
    assert forgotten, "the workload no longer takes back a decode that filled a block"


def test_prefix_cache_forget_drops_a_block_and_what_was_computed_after_it() -> None:
    """``PrefixCache.forget(block)`` un-caches the block and its descendants (0 when it is
    not cached); a block id out of range is refused, naming it, with nothing forgotten."""
    device = BlockAllocator(8, 2)
    cache = PrefixCache(device)
    s = PrefixCachingScheduler(device, cache)
    s.add(Request("A", 7, 1, prompt=(1, 2, 3, 4, 5, 6, 7)))
    s.step()
    table = s.groups["A"].tables[0]
    assert set(cache.cached_blocks()) == set(table.blocks[:3])
    refuses(lambda: cache.forget(8), ValueError, naming="block", state=cache.cached_blocks)
    assert cache.forget(table.blocks[1]) == 2  # block 1 and block 2, computed after it
    assert set(cache.cached_blocks()) == {table.blocks[0]}
    assert cache.forget(table.blocks[1]) == 0


def test_a_preempted_groups_tokens_return_to_the_token_budget() -> None:
    """vLLM V1's scheduler gives a preempted request's scheduled tokens back to the token
    budget. Here, in step 12, B and D decode (1 + 2 tokens), then C's prefill needs D's
    blocks: D is preempted, its 2 tokens leave the plan, and C prefills 8, so the step uses
    all 9 tokens of its budget (without the refund C got 6 and 2 tokens went unused)."""
    scheduler = Scheduler(
        BlockAllocator(10, 4), SchedulerConfig(mode="swap", token_budget=9, chunked_prefill=True)
    )
    specs = [("A", 15, 7, 2), ("B", 9, 6, 1), ("C", 17, 1, 1), ("D", 8, 6, 2), ("E", 7, 9, 2),
             ("F", 20, 4, 3)]  # fmt: skip
    for spec in specs:
        scheduler.add(Request(*spec))
    for _ in range(11):
        scheduler.step()
    plan = scheduler.step()
    assert plan.preempted == ["D"] and plan.decoded == ["B"]
    assert plan.prefill_tokens == {"C": 8}
    assert plan.decode_tokens + sum(plan.prefill_tokens.values()) == 9
    scheduler.check_invariants()


def test_update_is_the_only_writer_and_ends_a_request_at_eos() -> None:
    """The executor returns tokens and writes none; ``update`` appends them, ends a request
    whose sample 0 drew EOS (its blocks freed, ``plan.finished`` names it) and frees the
    finished; ``abort`` then ends every other request, and both pools are whole."""
    s = Scheduler(BlockAllocator(8, 2), SchedulerConfig("swap"), host=BlockAllocator(8, 2))
    for name in "AB":
        s.add(Request(name, 3, 4, prompt=(1, 2, 3)))
    plan = s.schedule()
    output = StepOutput({"A": [[9]], "B": [[5]]})
    assert s.groups["A"].token_ids == [[1, 2, 3]]  # nothing written before update
    s.update(plan, output, eos_token_id=9)
    assert plan.finished == ["A"] and s.groups["A"].status == "finished"
    assert s.groups["A"].token_ids == [[1, 2, 3, 9]] and s.groups["B"].token_ids == [[1, 2, 3, 5]]
    assert s.device.num_free == 8 - 2  # A's two blocks back, B's two held
    s.schedule()  # pending: abort drops it
    s.abort()
    assert s.done and s.device.num_free == 8 and s.host.num_free == 8
    s.check_invariants()


def test_abort_mid_step_forgets_the_prefix_blocks_its_plan_was_to_fill() -> None:
    """A plan registers full blocks when scheduled; aborted before the forward, none of them
    holds K/V, so the cache forgets them (a later request must not hit them)."""
    device = BlockAllocator(8, 4)
    cache = PrefixCache(device)
    s = PrefixCachingScheduler(device, cache)
    s.add(Request("A", 9, 2, prompt=tuple(range(9))))
    s.schedule()
    assert cache.cached_blocks()  # two full blocks registered by the plan
    s.abort()
    assert not cache.cached_blocks() and s.done and device.num_free == 8
