"""The live site's grade(): a budget around a cell's top-level code, a fresh namespace per
grade, and pagedlab put back whatever the code changed (before, a patched verdict made every
later grade pass, and a top-level loop hung the page's worker)."""

from __future__ import annotations

from pagedlab.explorers.site import live
from pagedlab.grade.core import Exercise

RIGHT = "def my_blocks_needed(n, b):\n    return -(-n // b)\n"
WRONG = "def my_blocks_needed(n, b):\n    return n // b\n"


def test_a_top_level_loop_is_stopped() -> None:
    got = live.grade("blocks_needed", "while True:\n    pass\n" + RIGHT)
    assert got["status"] == "failed" and "top-level statements ran past" in got["message"]


def test_a_patched_grader_is_put_back_and_refused() -> None:
    verdict = Exercise._verdict
    patch = "from pagedlab.grade.core import Exercise\nExercise._verdict = lambda *a, **k: None\n"
    got = live.grade("blocks_needed", patch + WRONG)
    assert got["status"] == "failed" and "changed pagedlab itself" in got["message"]
    assert Exercise._verdict is verdict
    assert live.grade("blocks_needed", WRONG)["status"] == "failed"  # later grades still judge


def test_a_patch_made_while_checked_is_put_back() -> None:
    verdict = Exercise._verdict
    sneaky = (
        "def my_blocks_needed(n, b):\n"
        "    from pagedlab.grade.core import Exercise\n"
        "    Exercise._verdict = lambda *a, **k: None\n"
        "    return 0\n"
    )
    got = live.grade("blocks_needed", sneaky)
    assert got["status"] == "failed"
    assert Exercise._verdict is verdict


def test_each_grade_starts_from_a_fresh_namespace() -> None:
    assert live.grade("blocks_needed", RIGHT)["status"] == "passed"
    leftover = "def my_empty_slots(n, b):\n    return my_blocks_needed(n, b) * b - n\n"
    got = live.grade("empty_slots", leftover)
    assert got["status"] == "failed" and "NameError" in got["message"]


def test_swapped_function_code_is_put_back() -> None:
    """Issue 38: a cell that swapped the grader's function code (``__code__``) was not put
    back: that grade and every later one passed, honest wrong answers included."""
    code = Exercise._verdict.__code__
    swap = (
        "from pagedlab.grade.core import Exercise\n"
        "def _none(self, case, outcome, cases=(), answers=None, make=None):\n    return None\n"
        "Exercise._verdict.__code__ = _none.__code__\n"
    )
    got = live.grade("blocks_needed", swap + WRONG)
    assert got["status"] == "failed" and "Exercise._verdict.__code__" in got["message"], got
    assert Exercise._verdict.__code__ is code
    assert live.grade("blocks_needed", WRONG)["status"] == "failed"  # later grades still judge
