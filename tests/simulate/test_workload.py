"""pagedlab.simulate.workload: a trace refuses bad input, a TypeError (wrong kind) or a
ValueError (wrong value) naming the argument and the value, and keeps exact int64 copies of
small integer lengths, so no sum overflows.

The trace's statistics (means, caps, the same seed giving the same trace): test_simulate.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from pagedlab.simulate import (
    Trace,
    block_size_sweep,
    make_trace,
    orca_max,
    orca_pow2,
    simulate,
    vllm,
)
from pagedlab.simulate.workload import LengthDist
from tests.refuses import refuses

NAN, INF = float("nan"), float("inf")
Z = np.zeros(1)
P, OUT = np.array([10]), np.array([5])

# (call, exception, words the message must contain)
BAD_CALLS: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: make_trace(0.0, 10.0), ValueError, "rate must be > 0, got 0.0"),
    (lambda: make_trace(-1, 10.0), ValueError, "rate must be > 0, got -1"),
    (lambda: make_trace(NAN, 10.0), ValueError, "rate must be finite, got nan"),
    (lambda: make_trace("2", 10.0), TypeError, "rate must be a real number, got '2'"),
    (lambda: make_trace(True, 10.0), TypeError, "rate must be a real number, got True"),
    (lambda: make_trace(2.0, INF), ValueError, "duration_s must be finite, got inf"),
    (lambda: make_trace(2.0, -1), ValueError, "duration_s must be > 0, got -1"),
    (lambda: make_trace(1e6, 1e6), ValueError, "rate x duration_s must be <="),
    (
        lambda: make_trace(2.0, 10.0, "wiki"),
        ValueError,
        "workload must be one of ('sharegpt', 'alpaca'), got 'wiki'",
    ),
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
    (lambda: LengthDist(100.0, 0.0), ValueError, "sigma must be > 0, got 0.0"),
    (lambda: LengthDist("100", 1.0), TypeError, "mean must be a real number"),
    # beyond what the model represents
    (
        lambda: Trace(np.zeros(1), np.array([2**63 + 5], np.uint64), np.ones(1, int), 1.0),
        ValueError,
        "prompt length must be <= 2147483647",
    ),
    (
        lambda: Trace(np.zeros(1), np.ones(1, int), np.array([2**40]), 1.0),
        ValueError,
        "output length must be <= 2147483647",
    ),
    (lambda: make_trace(1, 2, max_len=10**30), ValueError, "max_len must be <= 2147483647"),
]


@pytest.mark.parametrize(("call", "kind", "words"), BAD_CALLS, ids=[c[2][:40] for c in BAD_CALLS])
def test_bad_values(call: Callable[[], object], kind: type[Exception], words: str) -> None:
    refuses(call, kind, match=re.escape(words))


def test_wrong_kinds_are_type_errors_not_only_value_errors() -> None:
    """A wrong kind is a TypeError; it is also a ValueError (pagedlab.ground.checks' contract)."""
    refuses(lambda: make_trace("2", 10.0), TypeError)
    refuses(lambda: make_trace("2", 10.0), ValueError)


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
