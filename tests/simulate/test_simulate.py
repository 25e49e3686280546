"""pagedlab.simulate: conservation, hand-checked cases, exactness of the event-driven engine
against a naive step-by-step loop, paper ordering, bad input, widgets, and a cross-check of the
paged accounting against a real BlockAllocator/BlockTable run."""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab import BlockAllocator, BlockTable
from pagedlab.ground import paper
from pagedlab.simulate import (
    CATEGORIES,
    MAX_LEN,
    PAPER_POOL_SLOTS,
    BuddyAllocator,
    FirstFit,
    Policy,
    StepCost,
    Trace,
    block_size_sweep,
    breakdown_table,
    buddy_extent,
    compare_table,
    make_trace,
    orca_max,
    orca_oracle,
    orca_pow2,
    paper_policies,
    reserved_slots,
    simulate,
    sweep_table,
    vllm,
)
from pagedlab.simulate.policies import OneRequest
from pagedlab.simulate.report import fig2_table, fig13_table
from tests.refuses import refuses


def one(prompt: int, output: int, duration: float = 100.0) -> Trace:
    return Trace(np.zeros(1), np.array([prompt]), np.array([output]), duration)


NAN, INF = float("nan"), float("inf")
P, OUT = np.array([10]), np.array([5])
ONE = Trace(np.zeros(1), P, OUT, 10.0)  # one request: prompt 10, output 5


POLICIES = [orca_max(), orca_pow2(), orca_oracle(), vllm(1), vllm(4), vllm(16), vllm(256)]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: f"{p.name}-{p.block_size}")
def test_conservation_every_step(policy: Policy) -> None:
    tr = make_trace(3.0, 60.0, seed=1)
    r = simulate(tr, policy, pool_slots=6000, record=True)
    h = r.history
    assert h is not None and len(h["t"]) == r.steps > 0
    total = sum(h[c] for c in CATEGORIES)
    assert np.array_equal(total, np.full(r.steps, 6000.0))
    for c in CATEGORIES:
        assert h[c].min() >= 0, c
    assert math.isclose(sum(r.shares().values()), 1.0)
    assert math.isclose(sum(r.fig2_shares().values()), 1.0)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(0.5, 8.0),
    block=st.sampled_from([1, 2, 3, 8, 16, 100]),
    pool=st.integers(2100, 9000),
)
def test_paged_invariants(seed: int, rate: float, block: int, pool: int) -> None:
    tr = make_trace(rate, 20.0, seed=seed)
    r = simulate(tr, vllm(block), pool_slots=pool, record=True)
    h = r.history
    assert h is not None
    assert np.array_equal(sum(h[c] for c in CATEGORIES), np.full(r.steps, float(pool)))
    # internal fragmentation: less than one block per running sequence
    assert np.all(h["internal"] <= h["batch"] * (block - 1))
    assert np.all(h["reserved"] == 0)
    # used slots are whole blocks that fit in the pool
    used = h["tokens"] + h["internal"]
    assert np.all(used % block == 0) and np.all(used <= (pool // block) * block)


def test_five_tokens_block_four_wastes_three() -> None:
    r = simulate(one(4, 1), vllm(4), pool_slots=64, record=True)
    h = r.history
    assert h is not None and r.steps == 1
    assert (h["tokens"][0], h["internal"][0], h["idle"][0]) == (5, 3, 56)
    assert OneRequest(4, 1, 1, 2048, 4).paged_waste == 3


def test_max_reserves_2048() -> None:
    r = simulate(one(10, 5), orca_max(), pool_slots=4096, record=True)
    h = r.history
    assert h is not None and r.steps == 5
    assert list(h["tokens"]) == [11, 12, 13, 14, 15]
    assert list(h["tokens"] + h["reserved"]) == [15] * 5
    assert list(h["internal"]) == [2048 - 15] * 5
    assert list(h["idle"]) == [4096 - 2048] * 5
    prompt, output = np.array([10, 10, 10, 10, 1500]), np.array([5, 6, 7, 25, 548])
    assert list(orca_pow2().reservation(prompt, output)) == [18, 18, 18, 42, 2048]
    assert list(orca_oracle().reservation(prompt, output)) == [15, 16, 17, 35, 2048]
    assert list(orca_max().reservation(prompt, output)) == [2048] * 5


def test_paper_fig3_example() -> None:
    s = OneRequest(prompt=8, response=2, generated=0, reserved_slots=2048, block_size=16)
    assert (s.tokens, s.future, s.never_used, s.paged_blocks, s.paged_waste) == (8, 2, 2038, 1, 8)


def test_first_fit_external_fragmentation() -> None:
    ff = FirstFit(100)
    a, b, c = ff.alloc(30), ff.alloc(30), ff.alloc(30)
    assert (a, b, c) == (0, 30, 60)
    ff.free(30)
    assert ff.holes() == [30, 10]
    assert ff.alloc(35) is None and ff.holes() == [30, 10]  # 40 free, no hole of 35
    assert ff.alloc(25) == 30 and ff.holes() == [5, 10]
    with pytest.raises(ValueError, match="17"):
        ff.free(17)


def test_waiting_request_makes_free_slots_external() -> None:
    tr = Trace(np.zeros(2), np.array([10, 10]), np.array([20, 20]), 100.0)
    r = simulate(tr, orca_max(), pool_slots=3000, record=True)
    h = r.history
    assert h is not None
    assert h["external"][0] == 3000 - 2048 and h["idle"][0] == 0  # second request waits
    assert h["idle"][-1] == 3000 - 2048 and h["external"][-1] == 0  # nobody waits


def test_same_seed_same_result() -> None:
    a = simulate(make_trace(2.0, 120.0, seed=7), vllm(16))
    b = simulate(make_trace(2.0, 120.0, seed=7), vllm(16))
    c = simulate(make_trace(2.0, 120.0, seed=8), vllm(16))
    assert a.mean_slots == b.mean_slots and a.steps == b.steps
    assert a.mean_slots != c.mean_slots


def test_workload_means_and_caps() -> None:
    tr = make_trace(10.0, 2000.0, seed=0)
    (p_mean, o_mean), (ap_mean, ao_mean) = (
        paper.MEAN_LENGTHS["sharegpt"],
        paper.MEAN_LENGTHS["alpaca"],
    )
    assert abs(tr.prompt.mean() - p_mean) < 8 and abs(tr.output.mean() - o_mean) < 12
    assert tr.final_len.max() <= 2048 and tr.prompt.min() >= 1 and tr.output.min() >= 1
    assert np.all(np.diff(tr.arrival) >= 0) and tr.arrival.max() < 2000.0
    al = make_trace(10.0, 2000.0, "alpaca", seed=0)
    assert abs(al.prompt.mean() - ap_mean) < 1.5 and abs(al.output.mean() - ao_mean) < 3


# (call, exception, words the message must contain); the trace's own: test_workload, the
# reservation rules' and the contiguous allocators': test_simulate_baselines
BAD_CALLS: list[tuple[Callable[[], object], type[Exception], str]] = [
    # policies
    (lambda: vllm(0), ValueError, "block_size must be >= 1, got 0"),
    (lambda: vllm(True), TypeError, "block_size must be an integer, got True"),
    (lambda: vllm(4096), ValueError, "block_size must be <= 2048, got 4096"),
    (
        lambda: Policy("x", reserve="half"),
        ValueError,
        "reserve must be one of ('max', 'pow2', 'oracle'), got 'half'",
    ),
    (lambda: Policy(3, reserve="max"), TypeError, "name must be a str, got 3"),
    (lambda: Policy("x", reserve="max", block_size=16), ValueError, "block_size must be <= 0"),
    (lambda: orca_max(max_len=1), ValueError, "max_len must be >= 2, got 1"),
    (lambda: orca_pow2(allocator="best_fit"), ValueError, "allocator must be one of"),
    (lambda: paper_policies(block_size=2.5), TypeError, "block_size must be an integer, got 2.5"),
    (lambda: orca_max().reservation(P, OUT.astype(float)), TypeError, "output must hold integers"),
    (lambda: orca_max().reservation(P, np.array([0])), ValueError, "output must be >= 1"),
    (lambda: orca_max().reservation(P, np.array([5, 5])), ValueError, "same shape, got (1,), (2,)"),
    (lambda: orca_max().reservation(P, np.array([2040])), ValueError, "<= max_len=2048, got 2050"),
    (lambda: orca_max().extent(np.array([0])), ValueError, "reserved must be >= 1"),
    # simulate and its step cost
    (lambda: simulate("trace", vllm()), TypeError, "trace must be a Trace, got 'trace'"),
    (lambda: simulate(ONE, "vllm"), TypeError, "policy must be a Policy, got 'vllm'"),
    (lambda: simulate(ONE, vllm(), pool_slots=0), ValueError, "pool_slots must be >= 1, got 0"),
    (lambda: simulate(ONE, vllm(), pool_slots=1e4), TypeError, "pool_slots must be an integer"),
    (lambda: simulate(ONE, vllm(), watermark=1.5), ValueError, "watermark must be < 1, got 1.5"),
    (lambda: simulate(ONE, vllm(), watermark=NAN), ValueError, "watermark must be finite"),
    (lambda: simulate(ONE, vllm(), cost=0.03), TypeError, "cost must be a StepCost, got 0.03"),
    (lambda: simulate(ONE, vllm(), record=1), TypeError, "record must be a bool, got 1"),
    (lambda: simulate(ONE, orca_max(), pool_slots=2000), ValueError, "extent of 2048"),
    (lambda: simulate(ONE, vllm(16), pool_slots=15), ValueError, "pool_slots=15 (0 blocks"),
    (lambda: simulate(one(300, 200), vllm(16), pool_slots=480), ValueError, "500 tokens"),
    (lambda: simulate(one(300, 200), orca_oracle(), pool_slots=500), ValueError, "extent of 512"),
    (lambda: StepCost(base_s=0.0), ValueError, "base_s must be > 0, got 0.0"),
    (lambda: StepCost(per_seq_s=-1e-3), ValueError, "per_seq_s must be >= 0, got -0.001"),
    (lambda: StepCost(per_prefill_token_s=INF), ValueError, "per_prefill_token_s must be finite"),
    (lambda: StepCost().seconds(-1), ValueError, "batch must be >= 0, got -1"),
    (lambda: StepCost().scaled(0), ValueError, "factor must be > 0, got 0"),
    # reports and the sweep
    (lambda: block_size_sweep(ONE, sizes=(16, 0)), ValueError, "sizes[1] must be >= 1, got 0"),
    (lambda: block_size_sweep(ONE, sizes=()), ValueError, "sizes must name at least one"),
    (lambda: block_size_sweep("x"), TypeError, "trace must be a Trace, got 'x'"),
    (lambda: compare_table([1]), TypeError, "results[0] must be a SimResult, got 1"),
    (lambda: fig2_table([None]), TypeError, "results[0] must be a SimResult, got None"),
    (lambda: fig13_table(["x"]), TypeError, "results[0] must be a SimResult"),
    (lambda: breakdown_table([0.5]), TypeError, "results[0] must be a SimResult"),
    (lambda: sweep_table([3]), TypeError, "rows[0] must be a SweepRow, got 3"),
    # beyond what the model represents
    (
        lambda: Policy("p", block_size=16, max_len=10**30),
        ValueError,
        "max_len must be <= 2147483647",
    ),
    (lambda: vllm(max_len=2**31), ValueError, "max_len must be <= 2147483647, got 2147483648"),
    (lambda: orca_max(max_len=2**62), ValueError, "max_len must be <= 2147483647"),
    (lambda: simulate(ONE, vllm(), pool_slots=10**30), ValueError, "pool_slots must be <= "),
    (lambda: simulate(ONE, orca_max(), pool_slots=2**62), ValueError, "pool_slots must be <= "),
    (lambda: StepCost(10**400), ValueError, "base_s must be finite"),
    (
        lambda: orca_pow2().reservation(np.array([2**63 + 1], np.uint64), np.array([1])),
        ValueError,
        "prompt must be <= 2147483647",
    ),
]


@pytest.mark.parametrize(("call", "kind", "words"), BAD_CALLS, ids=[c[2][:40] for c in BAD_CALLS])
def test_bad_values(call: Callable[[], object], kind: type[Exception], words: str) -> None:
    """A wrong kind is a TypeError, a wrong value a ValueError, naming the argument and value."""
    refuses(call, kind, match=re.escape(words))


def test_numpy_integers_are_accepted() -> None:
    assert reserved_slots("pow2", np.int64(100), np.int32(25)) == 132
    assert buddy_extent(np.int16(132)) == 256
    tr = make_trace(np.float64(2.0), np.int64(5), seed=np.int64(1))
    assert len(simulate(tr, vllm(np.int64(16)), pool_slots=np.int64(4096)).mean_slots) == 6


def test_paper_ordering_and_magnitudes() -> None:
    tr = make_trace(2.0, 900.0, seed=0)
    res = [simulate(tr, p) for p in paper_policies(16)]
    tok = [r.fig2_shares()["tokens"] for r in res]
    batch = [r.mean_batch for r in res]
    assert tok == sorted(tok) and batch == sorted(batch)
    assert tok[0] < 0.30 and tok[3] > 0.90
    assert math.isclose(batch[0], PAPER_POOL_SLOTS // MAX_LEN, abs_tol=0.05)  # 7 extents fit
    assert res[0].preemptions == res[1].preemptions == res[2].preemptions == 0
    table = compare_table(res)
    vllm_paper = f"{100 * paper.FIG2_TOKEN_SHARE['vLLM']:.1f}"
    assert "Orca (Max)" in table and f"{vllm_paper}%" in table
    assert vllm_paper not in compare_table(res, with_paper=False)


def test_block_sweep_tradeoff() -> None:
    rows = block_size_sweep(make_trace(2.0, 120.0, seed=0), sizes=(1, 16, 256))
    assert rows[0].internal_share == 0.0
    assert rows[0].internal_share < rows[1].internal_share < rows[2].internal_share
    assert [r.table_entries_max for r in rows] == [2048, 128, 8]
    assert rows[0].shareable_prompt == 1.0 > rows[1].shareable_prompt > rows[2].shareable_prompt


# --- exactness: the event-driven engine equals a naive loop, one step at a time -------------


def naive(trace: Trace, policy: Policy, pool: int, cost: StepCost, wm: float = 0.01) -> dict:
    """The module docstring's rules, one step at a time, no jumps."""
    B = policy.block_size
    nb = pool // B if policy.paged else 0
    ctx, left = trace.prompt.tolist(), trace.output.tolist()
    final = trace.final_len.tolist()
    res = ext = []
    if not policy.paged:
        res = policy.reservation(trace.prompt, trace.output).tolist()
        ext = policy.extent(np.array(res)).tolist()
    space = BuddyAllocator(pool) if policy.allocator == "buddy" else FirstFit(pool)
    off: dict[int, int] = {}
    run: list[int] = []
    q: deque[int] = deque()
    nxt, t, steps, pre, sums = 0, 0.0, 0, 0, dict.fromkeys(CATEGORIES, 0)
    while t < trace.duration_s:
        while nxt < len(trace) and trace.arrival[nxt] <= t:
            q.append(nxt)
            nxt += 1
        new = []
        if policy.paged:
            use = sum(-(-(ctx[i] + 1) // B) for i in run)
            while use > nb:
                v = run.pop()
                use -= -(-(ctx[v] + 1) // B)
                q.appendleft(v)
                pre += 1
            while q:
                need = -(-(ctx[q[0]] + 1) // B)
                if use + need + (int(wm * nb) if run else 0) > nb:
                    break
                use += need
                run.append(q.popleft())
                new.append(run[-1])
        else:
            while q and (o := space.alloc(res[q[0]])) is not None:
                off[q[0]] = o
                run.append(q.popleft())
                new.append(run[-1])
        if not run:
            if nxt >= len(trace):
                break
            t = max(t, float(trace.arrival[nxt]))
            continue
        t += cost.seconds(len(run), sum(ctx[i] for i in new))
        steps += 1
        for i in run:
            ctx[i] += 1
            left[i] -= 1
        tok = sum(ctx[i] for i in run)
        if policy.paged:
            used = B * sum(-(-ctx[i] // B) for i in run)
            free = nb * B - used
            sums["internal"] += used - tok
            sums["external"] += pool - nb * B + (free if q else 0)
        else:
            free = pool - sum(ext[i] for i in run)
            sums["reserved"] += sum(final[i] for i in run) - tok
            sums["internal"] += sum(res[i] - final[i] for i in run)
            sums["rounding"] += sum(ext[i] - res[i] for i in run)
            sums["external"] += free if q else 0
        sums["idle"] += 0 if q else free
        sums["tokens"] += tok
        for i in [i for i in run if left[i] == 0]:
            run.remove(i)
            if not policy.paged:
                space.free(off.pop(i))
    return {"steps": steps, "preemptions": pre, "sums": sums}


@pytest.mark.parametrize(
    "policy",
    [
        orca_max(),
        orca_pow2(),
        orca_oracle(),
        orca_pow2(allocator="first_fit"),
        orca_oracle(allocator="first_fit"),
        vllm(16),
        vllm(5),
    ],
    ids=lambda p: f"{p.name}-{p.allocator}-{p.block_size}",
)
def test_event_driven_equals_naive_loop(policy: Policy) -> None:
    tr = make_trace(4.0, 30.0, seed=3)
    cost = StepCost()
    fast = simulate(tr, policy, pool_slots=5000, cost=cost)
    ref = naive(tr, policy, 5000, cost)
    assert fast.steps == ref["steps"]
    assert fast.preemptions == ref["preemptions"]
    if policy.paged:
        assert fast.preemptions > 0  # the case exercises preemption
    for c in CATEGORIES:
        assert math.isclose(fast.mean_slots[c] * fast.steps, ref["sums"][c], abs_tol=1e-6), c


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(0.5, 8.0),
    policy=st.sampled_from(
        [orca_max(), orca_pow2(), orca_oracle(), orca_oracle(allocator="first_fit"), vllm(7)]
    ),
    pool=st.integers(2100, 9000),
)
def test_conservation_any_trace(seed: int, rate: float, policy: Policy, pool: int) -> None:
    r = simulate(make_trace(rate, 15.0, seed=seed), policy, pool_slots=pool, record=True)
    h = r.history
    assert h is not None
    assert np.array_equal(sum(h[c] for c in CATEGORIES), np.full(r.steps, float(pool)))
    assert all(h[c].min(initial=0) >= 0 for c in CATEGORIES)
    if not policy.paged:  # a contiguous system never preempts and never over-commits
        assert r.preemptions == 0
        held = h["tokens"] + h["reserved"] + h["internal"] + h["rounding"]
        assert np.all(held <= pool)


def test_pictures_are_pure() -> None:
    from pagedlab.pictures.at_scale import plot_batch, plot_block_sweep, plot_breakdown
    from pagedlab.pictures.png import to_png

    tr = make_trace(2.0, 30.0, seed=0)
    res = [simulate(tr, p) for p in paper_policies()]
    before = [dict(r.mean_slots) for r in res]
    rows = block_size_sweep(tr, sizes=(4, 16))
    for fig in (plot_breakdown(res), plot_batch(res), plot_block_sweep(rows, highlight=4)):
        assert to_png(fig)[:4] == b"\x89PNG" and len(fig.axes) >= 1
    assert [r.mean_slots for r in res] == before


# --- widgets, headless ----------------------------------------------------------------------


def test_reservation_explorer_updates_by_assignment() -> None:
    from pagedlab.explorers.waste import ReservationExplorer

    e = ReservationExplorer()
    assert "2038 never used" in e.readout.value and e.picture.value[:4] == b"\x89PNG"
    e.response.value = 100
    e.generated.value = 50
    assert "1940 never used" in e.readout.value and "6 empty slots" in e.readout.value
    e.reserved.value = 64  # response clamps to 64 - 8 = 56
    assert e.response.value == 56 and e.state.never_used == 0
    e.block_size.value = 1
    assert e.state.paged_waste == 0
    e.set(response=1000, generated=999, reserved=1024, block_size=256)
    assert (e.state.never_used, e.state.paged_waste) == (16, 17)
    with pytest.raises(ValueError, match="reserved must be >= 64, got 9"):
        e.set(response=2, generated=0, reserved=9, block_size=16)


def test_block_size_explorer_indexes_the_sweep() -> None:
    from pagedlab.explorers.waste import BlockSizeExplorer

    rows = block_size_sweep(make_trace(2.0, 60.0, seed=0), sizes=(4, 16, 64))
    e = BlockSizeExplorer(rows)
    assert e.readout.value.startswith("B = 16:")
    e.block_size.value = 64
    assert e.readout.value.startswith("B = 64:") and e.picture.value[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="32"):
        BlockSizeExplorer(rows, value=32)


# --- cross-check with the real allocator (the contract in ARCHITECTURE.md) -------------------


def test_paged_counts_match_block_allocator() -> None:
    """All requests arrive at once into a roomy pool: per step, the simulator's held slots equal
    the blocks a real BlockAllocator hands to BlockTables growing the same way."""
    B, nb = 4, 64
    prompt, output = np.array([3, 5, 8, 1]), np.array([6, 2, 9, 4])
    tr = Trace(np.zeros(4), prompt, output, 100.0)
    r = simulate(tr, vllm(B), pool_slots=nb * B, record=True)
    h = r.history
    assert h is not None and r.steps == int(output.max())
    alloc = BlockAllocator(nb, B)
    tables = [BlockTable(alloc) for _ in range(4)]
    for step in range(r.steps):
        live = [i for i in range(4) if step < output[i]]
        for i in live:
            tables[i].append_tokens(int(prompt[i]) + 1 if step == 0 else 1)
        slots = sum(tables[i].num_slots for i in live)
        tokens = sum(tables[i].num_tokens for i in live)
        assert all(len(tables[i].blocks) == -(-tables[i].num_tokens // B) for i in live)
        assert (nb - alloc.num_free) * B == slots == h["tokens"][step] + h["internal"][step]
        assert tokens == h["tokens"][step] and slots - tokens == h["internal"][step]
        for i in live:
            if step + 1 == output[i]:
                tables[i].free()
    assert alloc.num_free == nb


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(1.0, 8.0),
    policy=st.sampled_from([orca_pow2(), orca_oracle(), orca_oracle(allocator="first_fit")]),
    pool=st.integers(2048, 6000),
)
def test_buddy_engine_equals_naive_loop_any_trace(
    seed: int, rate: float, policy: Policy, pool: int
) -> None:
    tr = make_trace(rate, 8.0, seed=seed)
    fast = simulate(tr, policy, pool_slots=pool)
    ref = naive(tr, policy, pool, StepCost())
    assert fast.steps == ref["steps"]
    for c in CATEGORIES:
        assert math.isclose(fast.mean_slots[c] * fast.steps, ref["sums"][c], abs_tol=1e-6), c


def test_fig2_table_prints_every_paper_segment() -> None:
    res = [simulate(make_trace(2.0, 30.0, seed=0), p) for p in paper_policies()]
    table = fig2_table(res)
    for row in paper.FIG2_BREAKDOWN.values():
        for v in row.values():
            assert (f"{100 * v:.1f}%" if v is not None else "–") in table
    assert table.count("paper") >= 4 and table.count("ours") == 4
    batch = fig13_table(res)
    assert all(f"{v:.2f}" in batch for v in paper.FIG13_MEAN_BATCH.values())
