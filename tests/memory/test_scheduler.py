"""The scheduler's rules (§4.5) on the real allocator: FCFS, group preemption, swap, recompute."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.ground.checks import ArgumentTypeError
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.requests import Request, StepOutput, StepPlan
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig
from tests.refuses import refuses

SCENE = [("A", 10, 14, 1), ("B", 6, 10, 2), ("C", 14, 8, 1), ("D", 5, 12, 1), ("E", 8, 9, 1)]


def scheduler(mode: str = "swap", chunked: bool = False, blocks: int = 14, size: int = 4):
    s = Scheduler(
        BlockAllocator(blocks, size),
        SchedulerConfig(mode=mode, token_budget=16 if chunked else None, chunked_prefill=chunked),
    )
    for name, prompt, output, samples in SCENE:
        s.add(Request(name, prompt, output, samples))
    return s


def run_checked(s: Scheduler) -> list[StepPlan]:
    results = []
    while not s.done:
        result = s.step()
        s.check_invariants()
        if result.admitted:  # admission comes last, only if nothing is (still) swapped out
            assert not s.swapped and not result.preempted
        for group in s.swapped:
            assert group.tables == [] and group.device_blocks() == []
        results.append(result)
        assert len(results) < 10_000
    return results


@pytest.mark.parametrize("mode", ["swap", "recompute"])
@pytest.mark.parametrize("chunked", [False, True])
def test_scene_runs_to_the_end_without_leaks(mode: str, chunked: bool) -> None:
    s = scheduler(mode, chunked)
    run_checked(s)
    assert s.preemptions > 0  # the scene is tight enough to preempt
    assert s.device.num_free == s.device.num_blocks and s.host.num_free == s.host.num_blocks
    assert sorted(g.name for g in s.finished) == ["A", "B", "C", "D", "E"]
    if mode == "swap":
        assert s.blocks_swapped_out == s.blocks_swapped_in > 0 and s.tokens_recomputed == 0
    else:
        assert s.blocks_swapped_out == 0 and s.tokens_recomputed > 0


def test_the_most_recent_group_is_preempted_first() -> None:
    s = scheduler("swap")
    results = run_checked(s)
    first = next(r for r in results if r.preempted)
    assert first.preempted == ["E"]  # E arrived last
    order = [s.groups[n].order for r in results for n in r.preempted]
    assert order[:2] == sorted(order[:2], reverse=True)


def test_groups_move_together() -> None:
    s = Scheduler(BlockAllocator(12, 2), SchedulerConfig(mode="swap"))
    s.add(Request("old", 4, 12))
    pair = s.add(Request("pair", 3, 6, num_samples=2))
    seen_swapped = False
    while not s.done:
        s.step()
        s.check_invariants()
        if pair.status == "swapped":
            seen_swapped = True
            assert len(pair.host) == 2 and pair.tables == []
        if pair.status == "running" and not pair.prefilling:
            assert len(pair.tables) == 2
            # the samples share their full prompt block(s) and nothing else
            shared = set(pair.tables[0].blocks) & set(pair.tables[1].blocks)
            assert len(shared) in (pair.request.prompt_len // 2, len(pair.tables[0].blocks))
    assert seen_swapped and pair.preemptions >= 1


def test_swapped_sequence_comes_back_on_new_blocks() -> None:
    s = Scheduler(BlockAllocator(6, 2), SchedulerConfig(mode="swap"))
    s.add(Request("A", 4, 6))
    b = s.add(Request("B", 4, 6))
    before = None
    while not s.done:
        if b.status == "running" and not b.prefilling:
            before = b.tables[0].blocks
        result = s.step()
        if "B" in result.swapped_in:
            assert b.tables[0].num_tokens == b.num_tokens and before is not None
            break
    assert b.preemptions == 1


@pytest.mark.parametrize("mode", ["swap", "recompute"])
@pytest.mark.parametrize("chunked", [False, True])
def test_fcfs_order_of_completion_for_equal_lengths(mode: str, chunked: bool) -> None:
    s = Scheduler(
        BlockAllocator(10, 2),
        SchedulerConfig(mode=mode, token_budget=8 if chunked else None, chunked_prefill=chunked),
    )
    for i in range(6):
        s.add(Request(f"r{i}", 5, 7))
    run_checked(s)
    assert [g.name for g in s.finished] == [f"r{i}" for i in range(6)]
    steps = [g.finished_at for g in s.finished]
    assert steps == sorted(steps) and steps[-1] == s.steps  # each records its finishing step


def test_recompute_counts_prompt_and_generated_tokens() -> None:
    s = Scheduler(BlockAllocator(6, 2), SchedulerConfig(mode="recompute"))
    s.add(Request("A", 4, 6))
    b = s.add(Request("B", 4, 6))
    while not s.done:
        result = s.step()
        if result.preempted == ["B"]:
            dropped = b.work  # prompt + generated, rebuilt in one prefill
            assert dropped == 4 + b.generated and b.recompute_left == dropped
            break
    run_checked(s)
    assert s.tokens_recomputed == dropped


def test_chunked_prefill_keeps_decoding_beside_a_long_prompt() -> None:
    def stalls(chunked: bool) -> int:
        s = Scheduler(
            BlockAllocator(64, 4), SchedulerConfig(token_budget=16, chunked_prefill=chunked)
        )
        s.add(Request("short", 4, 20))
        s.step()  # short's prefill
        s.add(Request("long", 96, 4))
        steps = [s.step() for _ in range(8)]
        assert all(r.tokens <= 16 for r in steps) or not chunked
        return sum("short" not in r.decoded for r in steps)

    assert stalls(chunked=False) == 1  # the long prompt's prefill step decodes nothing
    assert stalls(chunked=True) == 0  # decodes first, then 15 prompt tokens a step


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"mode": "evict"}, ValueError, "mode"),
        ({"token_budget": 0}, ValueError, "token_budget"),
        ({"token_budget": 2.5}, ArgumentTypeError, "token_budget"),
        ({"chunked_prefill": True}, ValueError, "token_budget"),
        ({"chunked_prefill": 1}, TypeError, "chunked_prefill"),
        ({"host": BlockAllocator(4, 8)}, ValueError, "block_size"),
        ({"host": "cpu"}, TypeError, "host"),
    ],
)
def test_bad_settings(kwargs: dict, error: type, words: str) -> None:
    host = kwargs.pop("host", None)
    with pytest.raises(error, match=words):
        Scheduler(BlockAllocator(4, 4), SchedulerConfig(**kwargs), host)


@pytest.mark.parametrize("config", ["swap", None, {"mode": "swap"}])
def test_a_config_that_is_not_a_config_is_named(config: object) -> None:
    with pytest.raises(TypeError, match="config must be a SchedulerConfig"):
        Scheduler(BlockAllocator(4, 4), config)  # type: ignore[arg-type]


def test_one_config_travels_frozen_and_mode_reads_it() -> None:
    config = SchedulerConfig("swap", 8, True)
    s = Scheduler(BlockAllocator(8, 2), config)
    assert s.config is config and s.mode == "swap" and SchedulerConfig().mode == "recompute"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.mode = "recompute"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s.mode = "recompute"  # type: ignore[misc]
    with pytest.raises(ArgumentTypeError, match="token_budget must be an integer, got True"):
        SchedulerConfig(token_budget=True)


def test_bad_requests_change_nothing() -> None:
    s = Scheduler(BlockAllocator(4, 4))
    s.add(Request("A", 4, 4))
    with pytest.raises(ValueError, match="already added"):
        s.add(Request("A", 1, 1))
    with pytest.raises(ValueError, match="could never run"):
        s.add(Request("huge", 16, 1))
    with pytest.raises(TypeError, match="Request"):
        s.add(("B", 1, 1))  # type: ignore[arg-type]
    assert [g.name for g in s.waiting] == ["A"] and list(s.groups) == ["A"]
    with pytest.raises(ValueError, match="prompt_len"):
        Request("x", 0, 1)
    with pytest.raises(ArgumentTypeError, match="num_samples"):
        Request("x", 1, 1, num_samples=True)
    with pytest.raises(TypeError, match="name"):
        Request("", 1, 1)


requests = st.lists(
    st.tuples(st.integers(1, 12), st.integers(1, 12), st.sampled_from([1, 1, 2, 3])),
    min_size=1,
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(
    requests,
    st.sampled_from(["swap", "recompute"]),
    st.sampled_from([1, 2, 4]),
    st.integers(8, 20),
    st.one_of(st.none(), st.integers(4, 40)),
    st.booleans(),
    st.integers(4, 20),
)
def test_random_traces_keep_every_rule(
    reqs, mode, size, blocks, budget, chunked, host_blocks
) -> None:
    s = Scheduler(
        BlockAllocator(blocks, size),
        SchedulerConfig(
            mode=mode,
            token_budget=budget if budget is not None or not chunked else 8,
            chunked_prefill=chunked,
        ),
        host=BlockAllocator(host_blocks, size),  # small swap spaces fall back to recompute
    )
    for i, (prompt, output, samples) in enumerate(reqs):
        request = Request(f"r{i}", prompt, output, samples)
        if peak_blocks(request, size) <= blocks:
            s.add(request)  # it fits: it must be accepted, and it must finish
        else:
            with pytest.raises(ValueError, match="could never run"):
                s.add(request)
    run_checked(s)
    assert s.device.num_free == blocks and s.host.num_free == host_blocks
    assert len(s.finished) == len(s.groups)
    for group in s.finished:
        assert group.generated == group.request.output_len


def test_swap_space_as_large_as_the_device_can_still_run_out() -> None:
    """§4.5 bounds the swap space by the device pool; groups swapped at different times can
    need more. Here C (8 blocks) is swapped out, A and B grow into the freed blocks, and B (5
    blocks) must go too: 13 host blocks on a 10-block device. pagedlab recomputes B instead."""
    s = Scheduler(
        BlockAllocator(10, 1), SchedulerConfig(mode="swap")
    )  # host pool: 10 blocks, like the device
    s.add(Request("A", 1, 9))
    b = s.add(Request("B", 1, 9))
    s.add(Request("C", 8, 2))
    results = run_checked(s)
    assert results[1].swapped_out == {"C": 8}
    fallback = next(r for r in results if r.preempted == ["B"])
    assert "B" not in fallback.swapped_out and b.status == "finished"
    assert s.host.num_blocks < 8 + 5  # what swapping both would have needed
    assert s.blocks_swapped_out == 8 and s.tokens_recomputed == 1 + 4  # B's prompt + generated


def test_a_recompute_is_one_prefill_over_prompt_and_generated() -> None:
    s = Scheduler(BlockAllocator(14, 2), SchedulerConfig(mode="recompute"))
    for i in range(5):
        s.add(Request(f"r{i}", 5, 7, num_samples=1 + i % 2))
    recomputes = 0
    while not s.done:
        result = s.step()
        s.check_invariants()
        for name, tokens in result.recomputed.items():
            group = s.groups[name]
            assert name in result.admitted  # re-admitted, and rebuilt in this one step
            assert result.prefill_tokens[name] == tokens == group.work
            assert group.work == 5 + group.request.num_samples * group.generated
            assert group.status == "running" and not group.prefilling
            recomputes += 1
    assert recomputes > 0


# --- one capacity rule, atomic steps, clear refusals ----------------------------------------


class PeakKV:
    """K/V hooks that only record the most device blocks in use after any write."""

    def __init__(self, device: BlockAllocator) -> None:
        self.device, self.peak = device, 0

    def forward(self, work, groups) -> StepOutput:  # type: ignore[no-untyped-def]
        self.peak = max(self.peak, self.device.num_blocks - self.device.num_free)
        return StepOutput()

    def copy(self, cow) -> None:  # type: ignore[no-untyped-def]
        pass

    def swap_out(self, pairs) -> None:  # type: ignore[no-untyped-def]
        pass

    def swap_in(self, pairs) -> None:  # type: ignore[no-untyped-def]
        pass


def peak_blocks(request: Request, size: int) -> int:
    """The most blocks ``request`` ever holds, measured: run alone on a pool that never fills."""
    device = BlockAllocator(1 << 12, size)
    hooks = PeakKV(device)
    s = Scheduler(device, kv=hooks)
    s.add(request)
    s.run()
    return hooks.peak


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 20), st.integers(1, 4), st.sampled_from([1, 2, 3, 4, 8]))
def test_add_accepts_exactly_the_requests_that_fit(prompt, output, samples, size) -> None:
    """A request whose group fits the pool at its longest (its samples sharing the prompt's
    full blocks, §4.4) is accepted and runs alone; one block fewer and it is refused."""
    request = Request("r", prompt, output, samples)
    peak = peak_blocks(request, size)
    s = Scheduler(BlockAllocator(peak, size))
    s.add(request)
    run_checked(s)
    assert s.finished[0].generated == output
    if peak > 1:
        with pytest.raises(ValueError, match=f"more than the pool's {peak - 1}: it could never"):
            Scheduler(BlockAllocator(peak - 1, size)).add(request)


def test_add_used_to_refuse_a_two_sample_request_that_fits() -> None:
    """16 prompt tokens in 4 shared blocks, then 4 tokens per sample: 6 blocks, not 2 x 5."""
    s = Scheduler(BlockAllocator(6, 4))
    s.add(Request("x", 16, 4, num_samples=2))
    run_checked(s)
    assert s.finished[0].name == "x" and Request("x", 16, 4, 2).max_blocks(4) == 10


def state_of(s: Scheduler) -> tuple:
    """Everything a step could change, by value."""
    groups = [
        (g.name, g.status, g.generated, g.work, g.prefilled, g.recompute_left, g.preemptions,
         [list(h) for h in g.host], [(t.blocks, t.num_tokens, t.freed, t.lost) for t in g.tables])
        for g in s.groups.values()
    ]  # fmt: skip
    queues = [[g.name for g in q] for q in (s.waiting, s.running, s.swapped, s.finished)]
    counters = (s.steps, s.preemptions, s.tokens_recomputed, s.blocks_swapped_out,
                s.blocks_swapped_in)  # fmt: skip
    pools = (s.device.refcounts(), s.device.free_list(), s.host.refcounts(), s.host.free_list())
    return groups, queues, counters, pools


@pytest.mark.parametrize("whole_table", [False, True])
def test_a_block_freed_behind_a_table_is_refused_before_the_step(whole_table: bool) -> None:
    """Before: another sample was appended and the step counted before the error."""
    s = Scheduler(BlockAllocator(16, 2))
    s.add(Request("a", 3, 8, num_samples=2))
    s.step()
    group = s.running[0]
    if whole_table:
        group.tables[1].free()
    else:
        s.device.free(group.tables[1].blocks[-1])  # the second sample's own last block
    before = state_of(s)
    with pytest.raises(ValueError, match="group 'a' sample 1: cannot step table"):
        s.step()
    assert state_of(s) == before and s.steps == 1


def test_a_host_block_freed_behind_a_swapped_group_is_refused() -> None:
    s = Scheduler(BlockAllocator(4, 2), SchedulerConfig(mode="swap"))
    s.add(Request("A", 1, 7))
    b = s.add(Request("B", 3, 3))
    while b.status != "swapped":
        s.step()
    s.host.free(b.host[0][0])
    before = state_of(s)
    with pytest.raises(ValueError, match="swapped group 'B': host block 0 has ref count 0"):
        s.step()
    assert state_of(s) == before


@pytest.mark.parametrize("pool", ["device", "host"])
def test_outside_holders_are_refused_not_a_livelock(pool: str) -> None:
    """Before: run() preempted tens of thousands of times, then an unnamed RuntimeError."""
    s = Scheduler(BlockAllocator(8, 2), SchedulerConfig(mode="swap"))
    s.add(Request("a", 4, 8))
    s.add(Request("b", 4, 8))
    s.step()
    allocator = s.device if pool == "device" else s.host
    outside = BlockTable(allocator)
    outside.append_tokens(2 * allocator.num_free)  # every free block, held outside
    before = state_of(s)
    with pytest.raises(ValueError, match=r"block\(s\) \[.*\] are held outside the scheduler"):
        s.run()
    assert state_of(s) == before and s.preemptions == 0
    outside.free()  # given back: the scheduler goes on
    run_checked(s)
    assert len(s.finished) == 2


def test_pools_the_scheduler_cannot_own_are_refused_when_built() -> None:
    used = BlockAllocator(8, 2)
    block = used.allocate()
    with pytest.raises(
        ValueError, match=rf"allocator has 1 block\(s\) in use already \(\[{block}\]\)"
    ):
        Scheduler(used)
    with pytest.raises(ValueError, match="host has 1 block"):
        Scheduler(BlockAllocator(8, 2), host=used)
    fresh = BlockAllocator(8, 2)
    with pytest.raises(ValueError, match="host must be a pool of its own"):
        Scheduler(fresh, host=fresh)
    assert used.refcounts()[block] == 1 and used.num_free == 7 and fresh.num_free == 8


@pytest.mark.parametrize("mode", [None, 1, ["swap"], "SWAP"])
def test_a_mode_that_is_not_a_mode_is_named(mode) -> None:
    with pytest.raises(ValueError, match=r"mode must be (a str, )?one of"):
        Scheduler(BlockAllocator(4, 2), SchedulerConfig(mode=mode))


def test_max_steps_names_itself() -> None:
    s = Scheduler(BlockAllocator(8, 2))
    s.add(Request("a", 4, 8))
    with pytest.raises(RuntimeError, match="not done after max_steps = 3 steps"):
        s.run(max_steps=3)
    with pytest.raises(ArgumentTypeError, match="max_steps"):
        s.run(max_steps=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "kind", "words"),
    [
        ("config", "swap", TypeError, "config must be a SchedulerConfig, got 'swap'"),
        ("config", None, TypeError, "config must be a SchedulerConfig, got None"),
        ("device", BlockAllocator(8, 2), ValueError, "cannot be replaced"),
        ("host", BlockAllocator(8, 2), ValueError, "cannot be replaced"),
    ],
)
def test_settings_reassigned_after_build_are_refused_before_the_step(
    name: str, value: object, kind: type[Exception], words: str
) -> None:
    s = Scheduler(
        BlockAllocator(8, 2), SchedulerConfig(mode="swap", token_budget=4, chunked_prefill=True)
    )
    s.add(Request("a", 3, 4))
    s.step()
    before, original = state_of(s), getattr(s, name)
    setattr(s, name, value)
    with pytest.raises(kind, match=words):
        s.step()
    setattr(s, name, original)
    assert state_of(s) == before
    run_checked(s)  # put back, it goes on


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(prompt_len=2**31), "prompt_len must be <= 2147483646"),
        (dict(prompt_len=10, output_len=2**31 - 10), "output_len must be <= 2147483637"),
        (dict(num_samples=2**21), "num_samples must be <= 1048576"),
    ],
)
def test_requests_no_pool_could_hold_are_named(kwargs: dict, words: str) -> None:
    args = dict(name="r", prompt_len=1, output_len=1) | kwargs
    with pytest.raises(ValueError, match=words):
        Request(**args)


def test_a_table_grown_behind_the_scheduler_is_refused() -> None:
    s = Scheduler(BlockAllocator(16, 2), SchedulerConfig(token_budget=4, chunked_prefill=True))
    s.add(Request("a", 7, 3, num_samples=2))
    s.step()  # 4 of the 7 prompt tokens
    s.running[0].tables[0].append_tokens(1)
    before = state_of(s)
    with pytest.raises(
        ValueError, match=r"its tables hold \[5\] tokens, the scheduler expects \[4\]"
    ):
        s.step()
    assert state_of(s) == before


def test_policy_is_the_seam_a_subclass_overrides_and_its_blocks_refuse_a_group_elsewhere() -> None:
    """step() decides through policy(out); the building blocks refuse a group that is not in
    the queue they work on, changing nothing; False from a block that does not fit, too."""
    calls: list[int] = []

    class Idle(Scheduler):
        def policy(self, out: StepPlan) -> None:
            calls.append(out.step)

    s = Idle(BlockAllocator(4, 4))
    s.add(Request("A", 4, 2))
    s.step()
    assert calls == [1] and [g.name for g in s.waiting] == ["A"] and s.device.num_free == 4

    s = Scheduler(BlockAllocator(4, 4))  # A takes 3 blocks; B needs 2: it does not fit beside A
    s.add(Request("A", 12, 2))
    s.add(Request("B", 6, 1))
    out = s.schedule()
    a, b = s.groups["A"], s.groups["B"]

    def state() -> tuple[object, ...]:
        names = [g.name for g in s.waiting], [g.name for g in s.running]
        return (*names, repr(out), s.device.num_free)

    for call, words in [
        (lambda: s.decode(b, out), "'B' is not running (it is waiting)"),
        (lambda: s.admit(a, out), "'A' is not waiting (it is running)"),
        (lambda: s.swap_in(a, out), "'A' is not swapped (it is running)"),
        (lambda: s.recompute(b, out), "'B' is not running"),
        (lambda: s.swap_out(b, out), "'B' is not running"),
    ]:
        refuses(call, ValueError, match=re.escape(words), state=state)
    assert s.admit(b, out) is False and state() == (["B"], ["A"], repr(out), 1)


def test_a_policy_may_admit_a_group_behind_the_head() -> None:
    """admit(group) starts that group, not the queue's head: a policy that admits out of order
    (cache-aware admission does) leaves both queues consistent and the head still waiting."""

    class Newest(Scheduler):
        def policy(self, out: StepPlan) -> None:
            if self.waiting:
                self.admit(self.waiting[-1], out)

    scheduler = Newest(BlockAllocator(16, 4))
    first, second = (scheduler.add(Request(n, 5, 2)) for n in ("A", "B"))
    plan = scheduler.step()
    assert plan.admitted == ["B"]
    assert scheduler.waiting == [first] and scheduler.running == [second]
