"""pagedlab.simulate refuses bad input: every public function raises a TypeError
(wrong kind) or a ValueError (wrong value) that names the argument and the value, and a
refused call changes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
import torch

from pagedlab.simulate import (
    BuddyAllocator,
    FirstFit,
    OneRequest,
    Policy,
    StepCost,
    Trace,
    block_size_sweep,
    breakdown_table,
    buddy_extent,
    compare_table,
    make_trace,
    orca_max,
    orca_pow2,
    paper_policies,
    reserved_slots,
    simulate,
    sweep_table,
    vllm,
)
from pagedlab.simulate.report import fig2_table, fig13_table
from pagedlab.simulate.workload import LengthDist

NAN, INF = float("nan"), float("inf")


def one() -> Trace:
    return Trace(np.zeros(1), np.array([10]), np.array([5]), 10.0)


Z = np.zeros(1)
P, OUT = np.array([10]), np.array([5])

# (call, exception, words the message must contain)
CASES: list[tuple[Callable[[], object], type[Exception], str]] = [
    # reserved_slots / buddy_extent
    (lambda: reserved_slots("half", 10, 5), ValueError, "policy must be one of"),
    (lambda: reserved_slots(2, 10, 5), TypeError, "policy must be a str"),
    (lambda: reserved_slots("pow2", True, 5), TypeError, "prompt_len must be an integer, got True"),
    (lambda: reserved_slots("pow2", 1.5, 5), TypeError, "prompt_len must be an integer, got 1.5"),
    (lambda: reserved_slots("pow2", 0, 5), ValueError, "prompt_len must be >= 1, got 0"),
    (lambda: reserved_slots("pow2", 10, -3), ValueError, "output_len must be >= 1, got -3"),
    (lambda: reserved_slots("max", 2000, 49), ValueError, "output_len must be <= 48, got 49"),
    (lambda: reserved_slots("max", 10**30, 5), ValueError, "prompt_len must be <= 2047"),
    (lambda: reserved_slots("oracle", np.bool_(True), 5), TypeError, "prompt_len"),
    (lambda: reserved_slots("oracle", torch.tensor(True), 5), TypeError, "prompt_len"),
    (lambda: reserved_slots("oracle", 10, 5, max_len=1), ValueError, "max_len must be >= 2"),
    (lambda: buddy_extent(0), ValueError, "slots must be >= 1, got 0"),
    (
        lambda: buddy_extent(np.float64(3.0)),
        TypeError,
        "slots must be an integer, got np.float64(3.0)",
    ),
    (lambda: buddy_extent("4"), TypeError, "slots must be an integer, got '4'"),
    # allocators
    (lambda: BuddyAllocator(0), ValueError, "size must be >= 1, got 0"),
    (lambda: BuddyAllocator(16.0), TypeError, "size must be an integer, got 16.0"),
    (lambda: BuddyAllocator(16).alloc(0), ValueError, "slots must be >= 1, got 0"),
    (lambda: BuddyAllocator(16).alloc(None), TypeError, "slots must be an integer, got None"),
    (lambda: BuddyAllocator(16).free(3), ValueError, "no live extent starts at 3"),
    (lambda: BuddyAllocator(16).free(-1), ValueError, "start must be >= 0, got -1"),
    (lambda: FirstFit(-5), ValueError, "size must be >= 1, got -5"),
    (lambda: FirstFit(16).alloc(False), TypeError, "slots must be an integer, got False"),
    (lambda: FirstFit(16).free(2.0), TypeError, "start must be an integer, got 2.0"),
    # policies
    (lambda: vllm(0), ValueError, "block_size must be >= 1, got 0"),
    (lambda: vllm(True), TypeError, "block_size must be an integer, got True"),
    (lambda: vllm(4096), ValueError, "block_size must be <= 2048, got 4096"),
    (lambda: Policy("x", reserve="half"), ValueError, "reserve must be one of"),
    (lambda: Policy(3, reserve="max"), TypeError, "name must be a str, got 3"),
    (lambda: Policy("x", reserve="max", block_size=16), ValueError, "block_size must be <= 0"),
    (lambda: orca_max(max_len=1), ValueError, "max_len must be >= 2, got 1"),
    (lambda: orca_pow2(allocator="best_fit"), ValueError, "allocator must be one of"),
    (lambda: paper_policies(block_size=2.5), TypeError, "block_size must be an integer, got 2.5"),
    # traces
    (lambda: make_trace(0.0, 10.0), ValueError, "rate must be > 0, got 0.0"),
    (lambda: make_trace(NAN, 10.0), ValueError, "rate must be finite, got nan"),
    (lambda: make_trace("2", 10.0), TypeError, "rate must be a real number, got '2'"),
    (lambda: make_trace(True, 10.0), TypeError, "rate must be a real number, got True"),
    (lambda: make_trace(2.0, INF), ValueError, "duration_s must be finite, got inf"),
    (lambda: make_trace(2.0, -1), ValueError, "duration_s must be > 0, got -1"),
    (lambda: make_trace(1e6, 1e6), ValueError, "rate x duration_s must be <="),
    (lambda: make_trace(2.0, 10.0, "wiki"), ValueError, "workload must be one of"),
    (lambda: make_trace(2.0, 10.0, None), TypeError, "workload must be a str, one of"),
    (lambda: make_trace(2.0, 10.0, seed=-1), ValueError, "seed must be >= 0, got -1"),
    (lambda: make_trace(2.0, 10.0, seed=1.0), TypeError, "seed must be an integer, got 1.0"),
    (lambda: make_trace(2.0, 10.0, max_len=1), ValueError, "max_len must be >= 2, got 1"),
    (lambda: Trace([0.0], P, OUT, 10.0), TypeError, "arrival must be a ndarray, got [0.0]"),
    (lambda: Trace(Z, P.astype(float), OUT, 10.0), TypeError, "prompt must hold integers"),
    (lambda: Trace(Z, P, OUT[:, None], 10.0), ValueError, "output must be 1-D, got shape (1, 1)"),
    (lambda: Trace(np.array([NAN]), P, OUT, 10.0), ValueError, "arrival times must be finite"),
    (lambda: Trace(Z, np.array([0]), OUT, 10.0), ValueError, "must be >= 1"),
    (lambda: Trace(Z, P, OUT, 0.0), ValueError, "duration_s must be > 0, got 0.0"),
    (lambda: Trace(np.zeros(2), P, OUT, 10.0), ValueError, "equal lengths, got 2, 1, 1"),
    # simulate
    (lambda: simulate("trace", vllm()), TypeError, "trace must be a Trace, got 'trace'"),
    (lambda: simulate(one(), "vllm"), TypeError, "policy must be a Policy, got 'vllm'"),
    (lambda: simulate(one(), vllm(), pool_slots=0), ValueError, "pool_slots must be >= 1, got 0"),
    (lambda: simulate(one(), vllm(), pool_slots=1e4), TypeError, "pool_slots must be an integer"),
    (lambda: simulate(one(), vllm(), watermark=1.5), ValueError, "watermark must be < 1"),
    (lambda: simulate(one(), vllm(), watermark=NAN), ValueError, "watermark must be finite"),
    (lambda: simulate(one(), vllm(), cost=0.03), TypeError, "cost must be a StepCost, got 0.03"),
    (lambda: simulate(one(), vllm(), record=1), TypeError, "record must be a bool, got 1"),
    (lambda: simulate(one(), orca_max(), pool_slots=2000), ValueError, "extent of 2048"),
    (lambda: simulate(one(), vllm(16), pool_slots=15), ValueError, "pool_slots=15 (0 blocks"),
    (lambda: StepCost(base_s=0.0), ValueError, "base_s must be > 0, got 0.0"),
    (lambda: StepCost(per_seq_s=-1e-3), ValueError, "per_seq_s must be >= 0, got -0.001"),
    (lambda: StepCost(per_prefill_token_s=INF), ValueError, "per_prefill_token_s must be finite"),
    (lambda: StepCost().seconds(-1), ValueError, "batch must be >= 0, got -1"),
    (lambda: StepCost().scaled(0), ValueError, "factor must be > 0, got 0"),
    (lambda: orca_max().reservation(P, OUT.astype(float)), TypeError, "output must hold integers"),
    (lambda: orca_max().reservation(P, np.array([0])), ValueError, "output must be >= 1"),
    (lambda: orca_max().reservation(P, np.array([5, 5])), ValueError, "same shape, got (1,), (2,)"),
    (lambda: orca_max().reservation(P, np.array([2040])), ValueError, "<= max_len=2048, got 2050"),
    (lambda: orca_max().extent(np.array([0])), ValueError, "reserved must be >= 1"),
    (lambda: LengthDist(100.0, 0.0), ValueError, "sigma must be > 0, got 0.0"),
    (lambda: LengthDist("100", 1.0), TypeError, "mean must be a real number"),
    # one request, reports, sweep
    (lambda: OneRequest(8, 2, 3, 2048, 16), ValueError, "generated must be in [0, 2], got 3"),
    (lambda: OneRequest(8, 2, 0, 9, 16), ValueError, "reservation of 9 slots"),
    (lambda: OneRequest(8.0, 2, 0, 2048, 16), TypeError, "prompt must be an integer, got 8.0"),
    (lambda: OneRequest(8, 2, 0, 2048, 0), ValueError, "block_size must be >= 1, got 0"),
    (lambda: block_size_sweep(one(), sizes=(16, 0)), ValueError, "sizes[1] must be >= 1, got 0"),
    (lambda: block_size_sweep(one(), sizes=()), ValueError, "sizes must name at least one"),
    (lambda: block_size_sweep("x"), TypeError, "trace must be a Trace, got 'x'"),
    (lambda: compare_table([1]), TypeError, "results[0] must be a SimResult, got 1"),
    (lambda: fig2_table([None]), TypeError, "results[0] must be a SimResult, got None"),
    (lambda: fig13_table(["x"]), TypeError, "results[0] must be a SimResult"),
    (lambda: breakdown_table([0.5]), TypeError, "results[0] must be a SimResult"),
    (lambda: sweep_table([3]), TypeError, "rows[0] must be a SweepRow, got 3"),
]


@pytest.mark.parametrize(("call", "kind", "words"), CASES, ids=[c[2][:40] for c in CASES])
def test_bad_values(call: Callable[[], object], kind: type[Exception], words: str) -> None:
    with pytest.raises(kind, match=re.escape(words)):
        call()


def test_wrong_kinds_are_type_errors_not_only_value_errors() -> None:
    """A wrong kind is a TypeError; it is also a ValueError (pagedlab.checks' contract)."""
    with pytest.raises(TypeError):
        make_trace("2", 10.0)
    with pytest.raises(ValueError):
        make_trace("2", 10.0)


def test_refused_calls_change_nothing() -> None:
    for space in (BuddyAllocator(100), FirstFit(100)):
        space.alloc(30)
        before = space.used, (space.free_blocks() if isinstance(space, BuddyAllocator) else None)
        for bad in (0, -1, True, 2.5, "3"):
            with pytest.raises(ValueError):  # ArgumentTypeError is a ValueError too
                space.alloc(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            space.free(7)
        after = space.used, (space.free_blocks() if isinstance(space, BuddyAllocator) else None)
        assert after == before


def test_numpy_integers_are_accepted() -> None:
    assert reserved_slots("pow2", np.int64(100), np.int32(25)) == 132
    assert buddy_extent(np.int16(132)) == 256
    tr = make_trace(np.float64(2.0), np.int64(5), seed=np.int64(1))
    assert len(simulate(tr, vllm(np.int64(16)), pool_slots=np.int64(4096)).mean_slots) == 6


# --- small integer dtypes and values beyond what the model represents are refused ----------


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
def test_small_integer_traces_do_not_overflow(dtype: type) -> None:
    """int8 ``100 + 100`` is -56: a trace keeps int64 copies, so every sum is exact."""
    lengths = np.array([100, 100], dtype)
    small = Trace(np.array([0.0, 0.1]), lengths, lengths, 5.0)
    wide = Trace(np.array([0.0, 0.1]), lengths.astype(np.int64), lengths.astype(np.int64), 5.0)
    assert small.prompt.dtype == small.output.dtype == np.int64
    assert small.final_len.tolist() == [200, 200]
    assert lengths.dtype == dtype  # the caller's arrays are not changed
    for policy in (orca_max(), orca_pow2(), vllm()):
        a, b = simulate(small, policy), simulate(wide, policy)
        assert a.mean_slots == b.mean_slots and a.finished == b.finished
        assert all(v >= 0 for v in a.mean_slots.values())
    row = block_size_sweep(small, [16])[0]
    assert row.table_entries_mean > 0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: Trace(np.zeros(1), np.array([2**63 + 5], np.uint64), np.ones(1, int), 1.0),
         "prompt length must be <= 2147483647"),
        (lambda: Trace(np.zeros(1), np.ones(1, int), np.array([2**40]), 1.0),
         "output length must be <= 2147483647"),
        (lambda: Policy("p", block_size=16, max_len=10**30), "max_len must be <= 2147483647"),
        (lambda: vllm(max_len=2**31), "max_len must be <= 2147483647, got 2147483648"),
        (lambda: orca_max(max_len=2**62), "max_len must be <= 2147483647"),
        (lambda: make_trace(1, 2, max_len=10**30), "max_len must be <= 2147483647"),
        (lambda: reserved_slots("pow2", 1, 2**62, max_len=2**63), "max_len must be <= "),
        (lambda: simulate(one(), vllm(), pool_slots=10**30), "pool_slots must be <= "),
        (lambda: simulate(one(), orca_max(), pool_slots=2**62), "pool_slots must be <= "),
        (lambda: StepCost(10**400), "base_s must be finite"),
        (lambda: orca_pow2().reservation(np.array([2**63 + 1], np.uint64), np.array([1])),
         "prompt must be <= 2147483647"),
    ],
)  # fmt: skip
def test_values_beyond_the_model_are_named(call: Callable[[], object], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        call()
