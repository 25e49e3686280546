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

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from pagedlab import HAS_TORCH
from pagedlab.exercises import nb01, nb02, nb05, nb06, nb07, nb09, nb11
from pagedlab.grade.cases import CheckResult, forget_results, results, with_article
from pagedlab.grade.core import Exercise

_ALL: list[Exercise] = [
    *nb01.EXERCISES_01,
    *nb02.EXERCISES_02,
    *nb05.EXERCISES_05,
    *nb06.EXERCISES_06,
    *nb07.EXERCISES_07,
    *nb09.EXERCISES_09,
    *nb11.EXERCISES_11,
]
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


class Source(str):
    """Code shown as code in a notebook (its repr is the text itself)."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def solution(name: str) -> Source:
    """The reference solution of exercise ``name``, as source code."""
    exercise = _exercise(name)
    target = exercise.solution
    target = getattr(target, "fn", target)  # a @triton.jit kernel wraps its Python function
    return Source(textwrap.dedent(inspect.getsource(target)))  # pastes as a top-level cell


def stub(name: str) -> str:
    """The starter cell of exercise ``name``: a function whose body is still ``...``, or the
    solution class with each public method but ``__init__`` raising NotImplementedError."""
    exercise = _exercise(name)
    setup = f"{exercise.setup}\n\n\n" if exercise.setup else ""
    if exercise.stub_code:
        return exercise.stub_code
    if isinstance(exercise.solution, type):
        return setup + _class_stub(exercise.solution)
    doc = "\n    ".join(textwrap.wrap(exercise.task, 88, break_on_hyphens=False))
    return setup + (
        f"def my_{exercise.name}({', '.join(exercise.params)}):\n"
        f'    """{doc}"""\n'
        f"    ...  # your code here; the answer is {with_article(exercise.returns)}\n"
    )


def _class_stub(cls: type) -> str:
    """``cls``'s source: its docstring, ``__init__`` whole, each public method's signature and
    docstring then ``raise NotImplementedError("write <method>")``, private methods left out."""
    lines = inspect.getsource(cls).splitlines()
    node = ast.parse(textwrap.dedent("\n".join(lines))).body[0]
    assert isinstance(node, ast.ClassDef)
    parts = ["\n".join(lines[: node.body[1].lineno - 1]).rstrip()]  # header and docstring
    for method in node.body[1:]:
        if not isinstance(method, ast.FunctionDef):
            continue
        if method.name == "__init__":
            parts.append("\n".join(lines[method.lineno - 1 : method.end_lineno]))
        elif not method.name.startswith("_"):
            head = "\n".join(lines[method.lineno - 1 : method.body[0].end_lineno])
            parts.append(f'{head}\n        raise NotImplementedError("write {method.name}")')
    return "\n\n".join(parts) + "\n"


@dataclass(frozen=True)
class Progress:
    """How many of a notebook's exercises passed in this kernel."""

    notebook: str
    done: tuple[str, ...]
    todo: tuple[str, ...]

    @property
    def text(self) -> str:
        total = len(self.done) + len(self.todo)
        line = f"exercises in this notebook: {len(self.done)} of {total} done"
        if self.todo:
            line += f" (to do: {', '.join(self.todo)})"
        return line

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text)


def in_notebook(notebook: str) -> list[Exercise]:
    """The exercises of the notebook whose file name starts with ``notebook`` (e.g. "01")."""
    return [e for e in _ALL if e.notebook.startswith(notebook)]


def progress(notebook: str) -> Progress:
    """Exercises of ``notebook`` whose latest check in this kernel passed, and the rest."""
    passed = results()
    names = [e.name for e in in_notebook(notebook)]
    return Progress(
        notebook,
        tuple(n for n in names if passed.get(n)),
        tuple(n for n in names if not passed.get(n)),
    )


__all__ = [
    "EXERCISES",
    "CheckResult",
    "Exercise",
    "Progress",
    "forget_results",
    "in_notebook",
    "progress",
    "results",
    "solution",
    "stub",
]
