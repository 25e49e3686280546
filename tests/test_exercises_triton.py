"""The Triton puzzle's grader: its solution passes, the stub is "not done yet", and wrong
kernels are rejected with the sequence, head and block that differ. Runs in the interpreter."""

# ruff: noqa: E741  (l is the running sum, as in the kernel and the paper's notation)

from __future__ import annotations

import pytest

from pagedlab.attention import backend

if backend.BACKEND == "unavailable":  # pragma: no cover - macOS / Windows
    pytest.skip("triton is not installed here", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pagedlab.exercises import EXERCISES, stub  # noqa: E402
from pagedlab.exercises.core import FAILED, PASSED, TODO  # noqa: E402

PUZZLE = EXERCISES["paged_kernel"]


@triton.jit
def _kernel(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, seq_lens_ptr, scale, max_blocks,
            NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr,
            BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
            MASK: tl.constexpr, RESCALE: tl.constexpr, LOOKUP: tl.constexpr,
            ALL_BLOCKS: tl.constexpr):  # fmt: skip
    """The solution with one switch per common mistake (all on: the right kernel)."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // (NUM_HEADS // NUM_KV_HEADS)
    seq_len = tl.load(seq_lens_ptr + seq)
    offs_t = tl.arange(0, BLOCK_SIZE)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d) * scale
    m = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)
    l = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    end = max_blocks if ALL_BLOCKS else tl.cdiv(seq_len, BLOCK_SIZE)
    for b in range(0, end):
        physical = tl.load(table_ptr + seq * max_blocks + b) if LOOKUP else b
        valid = b * BLOCK_SIZE + offs_t < seq_len
        if not MASK:
            valid = offs_t < BLOCK_SIZE
        offs = ((physical * BLOCK_SIZE + offs_t[:, None]) * NUM_KV_HEADS + kv_head) * HEAD_DIM
        k = tl.load(k_ptr + offs + offs_d[None, :], mask=valid[:, None], other=0.0)
        v = tl.load(v_ptr + offs + offs_d[None, :], mask=valid[:, None], other=0.0)
        scores = tl.where(valid, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=0))
        alpha = tl.exp(m - m_new) if RESCALE else 1.0
        p = tl.exp(scores - m_new)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, acc / l)


class _Variant:
    """``_kernel`` with some switches off, launched like a learner's kernel."""

    def __init__(self, **switches: bool) -> None:
        self.switches = {"MASK": True, "RESCALE": True, "LOOKUP": True, "ALL_BLOCKS": False}
        self.switches.update(switches)
        self.__name__ = "variant"

    def __getitem__(self, grid: tuple[int, int]):  # type: ignore[no-untyped-def]
        def launch(*args, **kwargs):  # type: ignore[no-untyped-def]
            return _kernel[grid](*args, **kwargs, **self.switches)

        return launch


def test_the_solution_and_the_switched_kernel_pass() -> None:
    assert PUZZLE.check(PUZZLE.solution).status == PASSED
    assert PUZZLE.check(_Variant()).passed


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


@pytest.mark.parametrize(
    ("switches", "words"),
    [
        ({"MASK": False}, ["sequence 0, head 0", "logical block 1", "partly filled"]),
        ({"RESCALE": False}, ["sequence", "head", "the max grows here"]),
        ({"LOOKUP": False}, ["sequence 0, head 0", "logical block 0 (physical 4", "table lookup"]),
        (
            {"MASK": False, "ALL_BLOCKS": True},
            ["sequence 0, head 0", "it reads a block it does not own"],
        ),
    ],
)
def test_wrong_kernels_name_sequence_head_and_block(switches: dict, words: list[str]) -> None:
    result = PUZZLE.check(_Variant(**switches))
    assert result.status == FAILED
    for part in ("inputs:", "expected:", "got:", "where:", *words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"


def test_not_a_kernel_is_a_failure_not_a_crash() -> None:
    result = PUZZLE.check(lambda *args: None)
    assert result.status == FAILED and "pass the @triton.jit kernel itself" in result.message
    assert PUZZLE.check(42).status == FAILED
