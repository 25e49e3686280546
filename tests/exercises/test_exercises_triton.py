"""The Triton puzzle's grader: its solution passes, the stub is "not done yet", and wrong
kernels are rejected with the sequence, head and block that differ. Runs in the interpreter."""

# ruff: noqa: E741  (l is the running sum, as in the kernel and the paper's notation)

from __future__ import annotations

import html

import pytest

from pagedlab.attention import backend

if backend.BACKEND == "unavailable":  # pragma: no cover - macOS / Windows
    pytest.skip("triton is not installed here", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pagedlab.exercises import EXERCISES, stub  # noqa: E402
from pagedlab.grade.cases import FAILED, PASSED, TODO  # noqa: E402

PUZZLE = EXERCISES["paged_kernel"]


@triton.jit
def _kernel(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, seq_lens_ptr, scale, max_blocks,
            NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr,
            BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
            MASK: tl.constexpr, MASK_V: tl.constexpr, RESCALE: tl.constexpr,
            LOOKUP: tl.constexpr, ALL_BLOCKS: tl.constexpr, RUNNING_MAX: tl.constexpr,
            BLOCK_MAX: tl.constexpr, KEEP_M: tl.constexpr, GROUPS: tl.constexpr,
            K_LOAD_MASK: tl.constexpr, OLD_MAX: tl.constexpr, NO_OFFSET: tl.constexpr,
            ROW0: tl.constexpr):  # fmt: skip
    """The solution with one switch per common mistake (all default: the right kernel)."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // (NUM_HEADS // NUM_KV_HEADS) if GROUPS else head % NUM_KV_HEADS
    seq_len = tl.load(seq_lens_ptr + seq)
    offs_t = tl.arange(0, BLOCK_SIZE)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d) * scale
    m = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)
    l = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    end = max_blocks if ALL_BLOCKS else tl.cdiv(seq_len, BLOCK_SIZE)
    for b in range(0, end):
        row = 0 if ROW0 else seq
        physical = tl.load(table_ptr + row * max_blocks + b) if LOOKUP else b
        valid = (0 if NO_OFFSET else b * BLOCK_SIZE) + offs_t < seq_len
        every = offs_t < BLOCK_SIZE
        k_mask = valid if MASK else every
        v_mask = valid if (MASK and MASK_V) else every
        offs = ((physical * BLOCK_SIZE + offs_t[:, None]) * NUM_KV_HEADS + kv_head) * HEAD_DIM
        k_load = k_mask if K_LOAD_MASK else every
        k = tl.load(k_ptr + offs + offs_d[None, :], mask=k_load[:, None], other=0.0)
        v = tl.load(v_ptr + offs + offs_d[None, :], mask=v_mask[:, None], other=0.0)
        scores = tl.where(k_mask, tl.sum(k * q[None, :], axis=1), float("-inf"))
        if RUNNING_MAX:
            if BLOCK_MAX:  # noqa: SIM108  (a kernel reads best with the mistake on its own line)
                m_new = tl.max(scores, axis=0)  # the block's own max, not the running one
            else:
                m_new = tl.maximum(m, tl.max(scores, axis=0))
            alpha = tl.exp(m - m_new) if RESCALE else 1.0
            p = tl.exp(scores - m) if OLD_MAX else tl.exp(scores - m_new)
        else:  # plain exp(scores): the same softmax in exact arithmetic
            m_new = m
            alpha = 1.0
            p = tl.exp(scores)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        if KEEP_M:
            m = m_new
    tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, acc / l)


RIGHT = {"MASK": True, "MASK_V": True, "RESCALE": True, "LOOKUP": True, "ALL_BLOCKS": False,
         "RUNNING_MAX": True, "BLOCK_MAX": False, "KEEP_M": True, "GROUPS": True,
         "K_LOAD_MASK": True, "OLD_MAX": False, "NO_OFFSET": False, "ROW0": False}  # fmt: skip


class _Variant:
    """``_kernel`` with some switches flipped, launched like a learner's kernel."""

    def __init__(self, **switches: bool) -> None:
        self.switches = {**RIGHT, **switches}
        self.__name__ = "variant"

    def __getitem__(self, grid: tuple[int, int]):  # type: ignore[no-untyped-def]
        def launch(*args, **kwargs):  # type: ignore[no-untyped-def]
            return _kernel[grid](*args, **kwargs, **self.switches)

        return launch


def test_the_solution_and_the_switched_kernel_pass() -> None:
    assert PUZZLE.check(PUZZLE.solution).status == PASSED
    assert PUZZLE.check(_Variant()).passed


def test_the_cases_poison_every_slot_the_batch_does_not_own() -> None:
    import torch

    cases = PUZZLE.cases()
    assert len(cases) >= 10
    for case in cases:
        query, key, value, tables, seq_lens = case.args
        size, owned = key.shape[1], 0
        for row, n in zip(tables.tolist(), seq_lens.tolist(), strict=True):
            owned += n
            if n % size:  # the empty tail of the last block
                assert bool(torch.isnan(value[row[(n - 1) // size], n % size :]).all())
        assert int(torch.isnan(value[..., 0, 0]).logical_not().sum()) == owned
        assert bool(torch.isfinite(case.expected).all())
    sizes = {case.args[1].shape[1] for case in cases}
    dims = {case.args[0].shape[2] for case in cases}
    assert {1, 16} <= sizes and 16 in dims
    big = max(
        float((c.args[0][:, :, None] * c.args[1].nan_to_num()[None]).sum(-1).max())
        * c.args[0].shape[2] ** -0.5
        for c in cases[:5]
        if c.args[1].shape[2] == 1
    )
    assert big >= 99.0  # a score of about 100 after scaling


def test_the_stub_is_not_done_yet(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # triton.jit needs the kernel's source in a file, as a notebook cell has it
    (tmp_path / "stub_kernel.py").write_text(stub("paged_kernel"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import stub_kernel  # type: ignore[import-not-found]

    result = PUZZLE.check(stub_kernel.my_paged_kernel)
    assert result.status == TODO, result.message
    assert result.message == (
        "… paged_kernel: not done yet: my_paged_kernel raised NotImplementedError. "
        "Write the loop body, then run this cell again."
    )


# the wrong kernels a learner writes first; each must fail on the
# case that exists to catch it, with that case's reason
@pytest.mark.parametrize(
    ("switches", "words"),
    [
        ({"RUNNING_MAX": False}, ["case 5 of", "score of 100", "overflows", "(NaN)"]),
        ({"BLOCK_MAX": True}, ["case 5 of", "a block's own max", "logical block 1"]),
        ({"MASK_V": False}, ["case 2 of", "must be masked", "(NaN)"]),
        ({"MASK": False}, ["case 2 of", "must be masked", "logical block 0"]),
        ({"KEEP_M": False}, ["case 3 of", "m carries over"]),
        ({"RESCALE": False}, ["case 3 of", "rescaled", "logical block 2"]),
        ({"LOOKUP": False}, ["case 1 of", "physical block 3", "logical block 0 (physical 3"]),
        ({"GROUPS": False}, ["case 8 of", "kv head 0", "head 1"]),
        ({"MASK": False, "ALL_BLOCKS": True}, ["case 2 of", "(NaN)"]),
        # issue 38: each was told another case's purpose (an overflow, GQA, an inverted alpha)
        ({"OLD_MAX": True}, ["case 1 of", "or p subtracts the old max"]),
        ({"NO_OFFSET": True}, ["case 4 of", "counts from the block's first position"]),
        ({"ROW0": True}, ["case 7 of", "reads row s of the block table"]),
    ],
)
def test_wrong_kernels_fail_on_the_case_made_for_them(switches: dict, words: list[str]) -> None:
    result = PUZZLE.check(_Variant(**switches))
    assert result.status == FAILED
    for part in ("why:", "inputs:", "expected:", "got:", "where:", *words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"
    for never in ("mask its slots", "rescale l and acc"):  # no guessed mistake is named
        assert never not in result.message


def test_not_a_kernel_is_a_failure_not_a_crash() -> None:
    result = PUZZLE.check(lambda *args: 0)
    assert result.status == FAILED and "pass the @triton.jit kernel itself" in result.message
    assert PUZZLE.check(42).status == FAILED


# --- the ladder before the puzzle ------------------------------------------------------------


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK_STORE: tl.constexpr,
          PER_PROGRAM: tl.constexpr):  # fmt: skip
    p = tl.program_id(0)
    offs = (p * BLOCK if PER_PROGRAM else 0) + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside)
    if MASK_STORE:
        tl.store(out_ptr + offs, x, mask=inside)
    else:
        tl.store(out_ptr + offs, x)


@triton.jit
def _gather(x_ptr, index_ptr, out_ptr, D: tl.constexpr, LOOKUP: tl.constexpr,
            STRIDE: tl.constexpr):  # fmt: skip
    i = tl.program_id(0)
    offs_d = tl.arange(0, D)
    row = tl.load(index_ptr + i) if LOOKUP else i
    start = row * D if STRIDE else row
    tl.store(out_ptr + i * D + offs_d, tl.load(x_ptr + start + offs_d))


@triton.jit
def _softmax(q_ptr, k_ptr, out_ptr, n, scale, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
             MASK: tl.constexpr, MAX: tl.constexpr, SCALE: tl.constexpr,
             MASK_LOAD: tl.constexpr):  # fmt: skip
    offs_t = tl.arange(0, BLOCK_SIZE)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + offs_d)
    everywhere = offs_t < BLOCK_SIZE
    loaded = offs_t < n if MASK_LOAD else everywhere
    k = tl.load(
        k_ptr + offs_t[:, None] * HEAD_DIM + offs_d[None, :], mask=loaded[:, None], other=0.0
    )
    raw = tl.sum(k * q[None, :], axis=1)
    raw = raw * scale if SCALE else raw
    scores = tl.where(offs_t < n if MASK else everywhere, raw, float("-inf"))
    top = tl.max(scores, axis=0) if MAX else 0.0
    p = tl.exp(scores - top)
    tl.store(out_ptr + offs_t, p / tl.sum(p, axis=0))


class _Switched:
    def __init__(self, kernel, **switches):  # type: ignore[no-untyped-def]
        self.kernel, self.switches, self.__name__ = kernel, switches, "variant"

    def __getitem__(self, grid):  # type: ignore[no-untyped-def]
        return lambda *a, **k: self.kernel[grid](*a, **k, **self.switches)


COPY_OK = {"MASK_STORE": True, "PER_PROGRAM": True}
GATHER_OK = {"LOOKUP": True, "STRIDE": True}
SOFTMAX_OK = {"MASK": True, "MAX": True, "SCALE": True, "MASK_LOAD": True}
LADDER = [
    ("masked_copy", _copy, COPY_OK, {"MASK_STORE": False}, "case 1 of", "it must not store there"),
    ("masked_copy", _copy, COPY_OK, {"PER_PROGRAM": False}, "case 1 of", "program 1 stored"),
    (
        "gather_rows",
        _gather,
        GATHER_OK,
        {"LOOKUP": False},
        "case 1 of",
        "stored x's row 0, expected x's row 4",
    ),
    ("gather_rows", _gather, GATHER_OK, {"STRIDE": False}, "case 1 of", "row 0 of out"),
    ("block_softmax", _softmax, SOFTMAX_OK, {"MASK": False}, "case 2 of", "wrong weights at"),
    # issue 38: the scores masked, the load of k not: the stub asks for a masked load
    ("block_softmax", _softmax, SOFTMAX_OK, {"MASK_LOAD": False}, "case 2 of", "slots [3]"),
    ("block_softmax", _softmax, SOFTMAX_OK, {"MAX": False}, "case 4 of", "overflows"),
    ("block_softmax", _softmax, SOFTMAX_OK, {"SCALE": False}, "case 1 of", "small scores"),
]


@pytest.mark.parametrize("rung", ["masked_copy", "gather_rows", "block_softmax"])
def test_each_rung_takes_its_solution_and_its_right_switched_kernel(rung: str) -> None:
    exercise = EXERCISES[rung]
    assert exercise.check(exercise.solution).passed
    kernel, right = next((k, ok) for name, k, ok, *_ in LADDER if name == rung)
    assert exercise.check(_Switched(kernel, **right)).passed


@pytest.mark.parametrize(("rung", "kernel", "right", "wrong", "where", "why"), LADDER)
def test_each_rung_rejects_the_first_wrong_kernels(rung, kernel, right, wrong, where, why) -> None:  # type: ignore[no-untyped-def]
    result = EXERCISES[rung].check(_Switched(kernel, **{**right, **wrong}))
    assert result.status == FAILED
    for part in ("why:", "inputs:", "expected:", "got:", where, why):
        assert part in result.message, f"{part!r} not in:\n{result.message}"


@pytest.mark.parametrize("rung", ["masked_copy", "gather_rows", "block_softmax"])
def test_each_rung_stub_is_not_done_yet(rung: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / f"stub_{rung}.py").write_text(stub(rung))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(f"stub_{rung}")
    assert EXERCISES[rung].check(getattr(module, f"my_{rung}")).status == TODO


DRAWN = [  # a wrong kernel -> the rows its feedback must draw (read off the interpreter's run)
    ("masked_copy", _copy, COPY_OK, {"MASK_STORE": False},
     ["offset     01234567", "program 0  ====", "program 1      =!!!"]),
    ("masked_copy", _copy, COPY_OK, {"PER_PROGRAM": False},
     ["program 0  ====", "program 1      ."]),
    ("gather_rows", _gather, GATHER_OK, {"LOOKUP": False},
     ["x's row    0 1 2 3 4 5", "program 0  #       *", "program 1    o"]),
    ("block_softmax", _softmax, SOFTMAX_OK, {"MASK": False},  # loads masked, scores not
     ["slot       0123", "weight     xxxx", "key        kkk-"]),
]  # fmt: skip


@pytest.mark.parametrize(("rung", "kernel", "right", "wrong", "rows"), DRAWN)
def test_a_wrong_rung_draws_what_each_program_touched(rung, kernel, right, wrong, rows) -> None:  # type: ignore[no-untyped-def]
    result = EXERCISES[rung].check(_Switched(kernel, **{**right, **wrong}))
    lines = [line.strip() for line in result.message.splitlines()]
    for row in rows:
        assert row in lines, f"{row!r} not drawn in:\n{result.message}"
    assert html.escape(rows[0]) in result._repr_html_()  # the <pre> keeps the grid's columns


PYTHON_BODIED = """import sys

import triton
import triton.language as tl


@triton.jit
def my_masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    frame = sys._getframe(1)
    while frame is not None and "padded" not in frame.f_locals:
        frame = frame.f_back
    frame.f_locals["out"][:n] = frame.f_locals["padded"][:n]
"""


def test_a_python_bodied_kernel_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 38: a ``@triton.jit`` masked_copy whose body is Python walking the frames to the
    driver's padded input passed (Triton's interpreter runs any Python)."""
    (tmp_path / "frames.py").write_text(PYTHON_BODIED)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = EXERCISES["masked_copy"].check(__import__("frames").my_masked_copy)
    assert result.status == FAILED and "the kernel's body uses" in result.message, result.message
    assert "f_back, f_locals" in result.message


def test_the_ladder_data_is_never_its_own_offsets() -> None:
    """Issue 38: gather_rows accepted a kernel storing the source offsets (x held them)."""
    for name in ("masked_copy", "gather_rows"):
        for case in EXERCISES[name].cases():
            x = case.args[0].flatten()
            assert not bool((x == torch.arange(len(x), dtype=x.dtype)).any()), (name, case.label)
        assert any(c.kind == "generated" for c in EXERCISES[name].cases()), name  # held back


def test_an_unmasked_k_load_with_masked_scores_is_refused() -> None:
    """Issue 38: K loaded unmasked (NaN in the empty slots) and the scores masked gave the
    right output; the stub asks for a masked load, and so does every real kernel."""
    result = PUZZLE.check(_Variant(K_LOAD_MASK=False))
    assert result.status == FAILED and "case 2 of" in result.message, result.message
    assert "loaded K or V at slots no sequence owns ([11])" in result.message
