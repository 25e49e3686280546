"""Graded exercises: the learner writes a piece of the mechanism, pagedlab grades it.

``EXERCISES[name].check(fn)`` runs ``fn`` on fixed and seeded cases whose answers come from the
real allocator, block tables, prefix cache and kernels, and returns a result that names the
first failing case (inputs, expected, got, and a hint for the common mistake). It never
raises. ``EXERCISES[name].solution`` is a reference solution; ``solution(name)`` shows its
source. ``progress("01")`` counts the exercises of notebook 01 passed in this kernel.

Each notebook 01-10 has two or more exercises, in the notebook's order; ``stub(name)`` is the
starter cell a notebook holds. Importing this package imports torch when it is installed,
never ipywidgets (``pagedlab.exercises.predict`` holds the predict-then-reveal widget).
Without torch (the live site's browser) ``EXERCISES`` holds the exercises whose graders need
no torch (``blocks``, ``capstones``, ``sharing``, ``serving``, ``preemption``,
``scheduler_step``); the others need torch to import at all.

- :mod:`~pagedlab.exercises.core`           ``Exercise``, ``Case``, the verdict and its message
- :mod:`~pagedlab.exercises.sandbox`        the child process every check runs its cases in
- :mod:`~pagedlab.exercises.drivers`        replays and step states (no case, no answer)
- :mod:`~pagedlab.exercises.kernel_drivers` kernel launchers in fenced buffers (no answer)
- :mod:`~pagedlab.exercises.blocks`         notebooks 01-02; :mod:`~pagedlab.exercises.sharing`
  05-06; :mod:`~pagedlab.exercises.capstones` their capstones
- :mod:`~pagedlab.exercises.attention`      notebook 03; :mod:`~pagedlab.exercises.triton_ladder`
  and :mod:`~pagedlab.exercises.triton_puzzle` notebook 04 (Triton)
- :mod:`~pagedlab.exercises.serving`        07; :mod:`~pagedlab.exercises.batching` 08;
  :mod:`~pagedlab.exercises.preemption`, :mod:`~pagedlab.exercises.swap_choice` and
  :mod:`~pagedlab.exercises.scheduler_step` 09; :mod:`~pagedlab.exercises.engine` 10
- :mod:`~pagedlab.exercises.predict`, :mod:`~pagedlab.exercises.predictions` predict, then
  reveal: the widget and each notebook's question
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from pagedlab import HAS_TORCH
from pagedlab.exercises import blocks, capstones, preemption, serving, sharing
from pagedlab.exercises import scheduler_step as step_capstone
from pagedlab.exercises.core import CheckResult, Exercise, forget_results, results, with_article

_ALL: list[Exercise] = [
    *blocks.EXERCISES_01,
    *capstones.EXERCISES_CAPSTONE_01,
    *blocks.EXERCISES_02,
    *capstones.EXERCISES_CAPSTONE_02,
    *sharing.EXERCISES_05,
    *capstones.EXERCISES_CAPSTONE_05,
    *sharing.EXERCISES_06,
    *capstones.EXERCISES_CAPSTONE_06,
    *serving.EXERCISES_07,
    *preemption.EXERCISES_09,
    *step_capstone.EXERCISES_CAPSTONE_09,
]
if HAS_TORCH:  # the data plane's exercises, in the notebooks' order
    from pagedlab.attention import backend
    from pagedlab.exercises import attention, batching, swap_choice
    from pagedlab.exercises import engine as engine_exercises

    _at = _ALL.index(capstones.EXERCISES_CAPSTONE_02[-1]) + 1
    _ALL[_at:_at] = [*attention.EXERCISES_03, *attention.EXERCISES_04]
    _at = _ALL.index(preemption.EXERCISES_09[0])
    _ALL[_at:_at] = batching.EXERCISES_08
    _ALL += swap_choice.EXERCISES_09_DECISION
    _ALL += engine_exercises.EXERCISES_10
    if backend.BACKEND != "unavailable":  # the Triton puzzle needs triton (Linux x86_64)
        from pagedlab.exercises import triton_ladder, triton_puzzle

        _at = _ALL.index(attention.EXERCISES_04[-1]) + 1
        _ALL[_at:_at] = [*triton_ladder.make_exercises(), triton_puzzle.make_exercise()]

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
    """The starter cell of exercise ``name``: a function whose body is still ``...``."""
    exercise = _exercise(name)
    if exercise.stub_code:
        return exercise.stub_code
    doc = "\n    ".join(_wrap(exercise.task, 88))
    setup = f"{exercise.setup}\n\n\n" if exercise.setup else ""
    return setup + (
        f"def my_{exercise.name}({', '.join(exercise.params)}):\n"
        f'    """{doc}"""\n'
        f"    ...  # your code here; the answer is {with_article(exercise.returns)}\n"
    )


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line]


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
