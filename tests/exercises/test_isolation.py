"""In-notebook checks never kill, hang or change the notebook's process.

Each test is a learner's mistake or trick that broke the notebook before: state that only the
first call gets right, a grandchild left running, settings changed for the session, a
process ended, an answer whose ``repr``/``==`` never returns, a ``__reduce__`` aimed at the
notebook, 1 MB printed, a ``__getattr__`` that never returns, a capstone that patches pagedlab
from its diagnosis, a Triton kernel that reads far out of bounds, a segfault.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import types
from pathlib import Path
from typing import Any

import pytest

from pagedlab.exercises import EXERCISES
from pagedlab.grade.cases import FAILED, PASSED
from pagedlab.grade.core import Exercise
from pagedlab.grade.sandbox import can_isolate
from pagedlab.grade.wire import PRINT_LIMIT

pytestmark = pytest.mark.skipif(not can_isolate(), reason="no fork: checks run in-process")

HURRIED_S = 0.5  # a case's budget where the point is what happens at the budget, not its length


def hurried(name: str) -> Exercise:
    """The exercise ``name`` with a budget of ``HURRIED_S`` per case (the default: 3 s), for a
    learner's function that never answers: the same kill, sooner."""
    return dataclasses.replace(EXERCISES[name], budget_s=HURRIED_S)


def test_state_carries_from_case_to_case() -> None:
    """A function right on its first call only fails (each case once ran in a fresh fork)."""
    calls = [0]

    def my_blocks_needed(num_tokens: int, block_size: int) -> int:
        calls[0] += 1
        return -(-num_tokens // block_size) if calls[0] == 1 else 0

    result = EXERCISES["blocks_needed"].check(my_blocks_needed)
    assert result.status == FAILED and "case 2 of" in result.message
    assert calls == [0]  # the calls ran in the child, not here


def test_a_grandchild_is_killed_with_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    def my_blocks_needed(num_tokens: int, block_size: int) -> int:
        import subprocess

        process = subprocess.Popen(["sleep", "60"], start_new_session=False)
        marker.write_text(str(process.pid))
        while True:
            pass

    result = hurried("blocks_needed").check(my_blocks_needed)
    assert f"no answer within {HURRIED_S:g} s" in result.message
    pid = int(marker.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        for _ in range(20):  # killed; it may take a moment to be reaped by init
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/status").read_text().find("zombie") >= 0:
                raise ProcessLookupError
            time.sleep(0.1)


def test_settings_changed_by_the_function_stay_in_the_child() -> None:
    import torch

    def my_gather_kv(key_cache: Any, blocks: list[int], num_tokens: int) -> Any:
        torch.set_default_dtype(torch.float64)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return None

    before = signal.getsignal(signal.SIGINT)
    EXERCISES["gather_kv"].check(my_gather_kv)
    assert torch.get_default_dtype() == torch.float32
    assert signal.getsignal(signal.SIGINT) == before


def test_os_exit_and_a_swallowed_alarm_fail_the_case() -> None:
    def exits(key_cache: Any, blocks: list[int], num_tokens: int) -> Any:
        os._exit(3)

    def swallows(key_cache: Any, blocks: list[int], num_tokens: int) -> Any:
        while True:
            try:
                time.sleep(1)
            except BaseException:  # noqa: SIM105 (the learner's own swallowing loop)
                continue

    ended = EXERCISES["gather_kv"].check(exits)
    assert ended.status == FAILED and "the process running it ended" in ended.message
    stopped = hurried("gather_kv").check(swallows)
    assert stopped.status == FAILED and "no answer within" in stopped.message


class _Stubborn:
    def __repr__(self) -> str:
        while True:
            pass

    def __eq__(self, other: object) -> bool:
        while True:
            pass

    __hash__ = object.__hash__


def test_an_answer_whose_repr_and_eq_never_return() -> None:
    started = time.monotonic()
    result = hurried("blocks_needed").check(lambda n, b: _Stubborn())
    assert result.status == FAILED
    assert time.monotonic() - started < 30


def test_a_learner_reduce_never_runs_in_the_notebook(tmp_path: Path) -> None:
    mark = tmp_path / "ran"

    class Boom:
        def __reduce__(self) -> Any:
            return (os.system, (f"touch {mark}",))

    def my_blocks_needed(num_tokens: int, block_size: int) -> Any:
        from pagedlab.grade import sandbox

        sandbox.plain = lambda value, depth=0: value  # the child's converter, patched out
        return Boom()

    result = EXERCISES["blocks_needed"].check(my_blocks_needed)
    assert result.status == FAILED
    assert not mark.exists()


def test_printed_output_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    def my_blocks_needed(num_tokens: int, block_size: int) -> int:
        print("x" * 1_000_000)
        return -(-num_tokens // block_size)

    result = EXERCISES["blocks_needed"].check(my_blocks_needed)
    assert result.status == PASSED
    printed = capsys.readouterr().out
    assert "more printed output cut" in printed
    assert len(printed) < PRINT_LIMIT + 200  # bounded per check (it was per case: 2.1 MB)


def test_a_getattr_that_never_returns() -> None:
    class Sly:
        def __getattr__(self, name: str) -> Any:
            while True:
                pass

        def __call__(self, num_tokens: int, block_size: int) -> int:
            return -(-num_tokens // block_size)

    started = time.monotonic()
    result = EXERCISES["blocks_needed"].check(Sly())
    assert result.status == PASSED
    assert time.monotonic() - started < 30


def test_a_diagnosis_that_patches_pagedlab_stays_in_its_child() -> None:
    from pagedlab.memory.allocator import BlockAllocator

    original = BlockAllocator.free_list

    class MyBlockTable:
        def __init__(self, allocator: Any) -> None:
            self.allocator, self.blocks, self.num_tokens = allocator, [], 0

        def append_tokens(self, n: int) -> None:
            BlockAllocator.free_list = lambda self: []  # type: ignore[method-assign]
            self.num_tokens += n

        def free(self) -> None:
            self.num_tokens = 0

    result = EXERCISES["block_table"].check(MyBlockTable)
    assert result.status == FAILED and "where:" in result.message
    assert BlockAllocator.free_list is original


@pytest.mark.skipif("masked_copy" not in EXERCISES, reason="needs triton")
def test_a_kernel_that_reads_far_out_of_bounds_fails_its_case() -> None:
    """Rung 2's likely slip (the index table read at ``i * D``): never a dead notebook."""
    import triton
    import triton.language as tl

    @triton.jit
    def my_gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.program_id(0)
        offs_d = tl.arange(0, D)
        row = tl.load(index_ptr + i * D * 100000)
        tl.store(out_ptr + i * D + offs_d, tl.load(x_ptr + row * D + offs_d))

    result = EXERCISES["gather_rows"].check(my_gather_rows)
    assert result.status == FAILED


def test_a_segfault_in_the_learners_code_fails_the_case_and_the_notebook_lives() -> None:
    """A crash in C code (here a read of address 0, as an out-of-bounds pointer in Triton's
    interpreter does) ends the child only: the case fails, said in words, and checks go on."""
    import ctypes

    result = EXERCISES["blocks_needed"].check(lambda n, b: ctypes.string_at(0))
    assert result.status == FAILED and "case 1 of" in result.message, result.message
    assert "the process running it ended" in result.message, result.message
    assert EXERCISES["blocks_needed"].check(EXERCISES["blocks_needed"].solution).passed


def test_an_object_that_lies_about_its_class_runs_no_code_here() -> None:
    """An object may claim to be a function (a ``__class__`` property) and hang once its
    ``__name__`` or ``__code__`` is read: the check reads neither here, and no property of
    it runs in the notebook's process (its calls run in the child)."""
    ran: list[str] = []

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            ran.append("__class__")
            return types.FunctionType

        @property
        def __name__(self) -> str:
            ran.append("__name__")
            while True:
                time.sleep(0.1)

        @property
        def __code__(self) -> Any:
            ran.append("__code__")
            while True:
                time.sleep(0.1)

        def __call__(self, num_tokens: int, block_size: int) -> int:
            return -(-num_tokens // block_size)

    result = EXERCISES["blocks_needed"].check(Liar())
    assert result.status == PASSED, result.message
    assert ran == []


def test_text_utf8_cannot_encode_is_shown_escaped() -> None:
    """A lone surrogate printed, raised or in a function's name reaches the message escaped: the
    notebook (and the instructor's results.json) can always print and encode it."""

    def prints(num_tokens: int, block_size: int) -> int:
        print("\ud800 printed")
        return 0

    def raises(num_tokens: int, block_size: int) -> int:
        raise ValueError("bad \udcff")

    def named(num_tokens: int, block_size: int) -> int:
        return 0

    named.__name__ = "named\ud801"
    for learner, shown in [(prints, "got:      0"), (raises, "bad \\udcff"),
                           (named, "named\\ud801(num_tokens=5")]:  # fmt: skip
        result = EXERCISES["blocks_needed"].check(learner)
        assert result.status == FAILED and shown in result.message, result.message
        result.message.encode("utf-8")  # never raises


def test_a_miss_from_state_an_earlier_case_left_is_said_so() -> None:
    """A mutable default argument, or a class attribute shared by every table: the case that
    fails is answered right alone, so the hint names the state, not the case's purpose."""

    def my_slot_mapping(blocks: list[int], num_tokens: int, block_size: int,
                        out: list[int] = []) -> list[int]:  # noqa: B006  # fmt: skip
        out += [blocks[p // block_size] * block_size + p % block_size for p in range(num_tokens)]
        return out

    class MyBlockTable:
        blocks: list[int] = []  # one list for every table: the mistake

        def __init__(self, allocator: Any) -> None:
            self.allocator, self.num_tokens = allocator, 0

        def append_tokens(self, n: int) -> None:
            while len(self.blocks) * self.allocator.block_size < self.num_tokens + n:
                self.blocks.append(self.allocator.allocate())
            self.num_tokens += n

        def free(self) -> None:
            for block in reversed(self.blocks):
                self.allocator.free(block)
            self.blocks.clear()
            self.num_tokens = 0

    for name, learner in [("slot_mapping", my_slot_mapping), ("block_table", MyBlockTable)]:
        result = EXERCISES[name].check(learner)
        assert result.status == FAILED and "case 2 of" in result.message, result.message
        assert "keeps something from an earlier case" in result.message, result.message
    wrong = EXERCISES["slot_mapping"].check(lambda bl, n, b: list(range(n)))  # no state
    assert "keeps something" not in wrong.message, wrong.message


def test_a_loop_is_called_once_not_once_per_case(tmp_path: Path) -> None:
    """Issue 38: a function that never returns was called again on every later fixed case to
    build the hint (199 s for kv_head); now the first timeout ends the check."""
    calls = tmp_path / "calls"

    def my_blocks_needed(num_tokens: int, block_size: int) -> int:
        with open(calls, "a") as file:
            file.write("call\n")
        while True:
            pass

    result = hurried("blocks_needed").check(my_blocks_needed)
    assert result.status == FAILED and "no answer within" in result.message
    assert calls.read_text().count("call") == 1
