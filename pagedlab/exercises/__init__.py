"""Graded exercises, the content: each notebook's tasks, cases with their why, mistakes and
reference solutions, one module per notebook (``nb01`` ... ``nb12``; notebook 04's Triton
ladder and puzzle in ``nb04_ladder`` and ``nb04_puzzle``, 09's torch-priced decision in
``nb09_cost``). The judge, its child process and the drivers are :mod:`pagedlab.grade`'s.

``EXERCISES[name].check(fn)`` grades ``fn`` (it never raises); ``solution(name)`` shows the
reference solution's source, ``stub(name)`` the starter cell, ``progress("01")`` the exercises
of notebook 01 passed in this kernel. ``EXERCISES`` is ordered by notebook, then definition.
Without torch (the live site's browser) it holds only the exercises whose graders need none
(``nb01``, ``nb02``, ``nb05``, ``nb06``, ``nb07``, ``nb09``, ``nb11``). Importing this package
imports torch when it is installed, never ipywidgets.
"""

from __future__ import annotations

from pagedlab import HAS_TORCH
from pagedlab.exercises import nb01, nb02, nb05, nb06, nb07, nb09, nb11
from pagedlab.grade import show
from pagedlab.grade.cases import CheckResult, forget_results, results
from pagedlab.grade.core import Exercise
from pagedlab.grade.show import Progress, Source

_ALL: list[Exercise] = [*nb01.EXERCISES_01, *nb02.EXERCISES_02, *nb05.EXERCISES_05,
                        *nb06.EXERCISES_06, *nb07.EXERCISES_07, *nb09.EXERCISES_09,
                        *nb11.EXERCISES_11]  # fmt: skip
if HAS_TORCH:  # the data plane's exercises, and those that run the engine's parts
    from pagedlab.attention import backend
    from pagedlab.exercises import nb03, nb04, nb04_ladder, nb04_puzzle, nb08, nb09_cost, nb10, nb12

    _ALL += [*nb03.EXERCISES_03, *nb04.EXERCISES_04, *nb08.EXERCISES_08]
    _ALL += [*nb09_cost.EXERCISES_09_DECISION, *nb10.EXERCISES_10, *nb12.EXERCISES_12]
    if backend.BACKEND != "unavailable":  # the Triton ladder and puzzle need triton
        _ALL += [*nb04_ladder.make_ladder(), nb04_puzzle.make_puzzle()]
_ALL.sort(key=lambda exercise: exercise.notebook)  # stable: each notebook's in definition order
EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in _ALL}


def _exercise(name: str) -> Exercise:
    if name not in EXERCISES:
        raise ValueError(f"no exercise named {name!r}; there are: {', '.join(EXERCISES)}")
    return EXERCISES[name]


def solution(name: str) -> Source:
    """The reference solution of exercise ``name``, as source code."""
    return show.solution(_exercise(name))


def stub(name: str) -> str:
    """The starter cell of exercise ``name`` (:func:`pagedlab.grade.show.stub`)."""
    return show.stub(_exercise(name))


def in_notebook(notebook: str) -> list[Exercise]:
    """The exercises of the notebook whose file name starts with ``notebook`` (e.g. "01")."""
    return [e for e in _ALL if e.notebook.startswith(notebook)]


def progress(notebook: str) -> Progress:
    """Exercises of ``notebook`` whose latest check in this kernel passed, and the rest."""
    return show.progress(notebook, in_notebook(notebook))


__all__ = ["EXERCISES", "CheckResult", "Exercise", "Progress", "forget_results", "in_notebook",
           "progress", "results", "solution", "stub"]  # fmt: skip
