"""What a notebook shows of an exercise: its starter cell, its solution, the progress made."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from pagedlab.grade.cases import results, with_article
from pagedlab.grade.core import Exercise


class Source(str):
    """Code shown as code in a notebook (its repr is the text itself)."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def solution(exercise: Exercise) -> Source:
    """The reference solution of ``exercise``, as source code."""
    target = exercise.solution
    target = getattr(target, "fn", target)  # a @triton.jit kernel wraps its Python function
    return Source(textwrap.dedent(inspect.getsource(target)))  # pastes as a top-level cell


def stub(exercise: Exercise) -> str:
    """The starter cell of ``exercise``: a function whose body is still ``...``, or the
    solution class with each public method but ``__init__`` raising NotImplementedError."""
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

    def __repr__(self) -> str:  # IPython's pretty printer shows it too (one line)
        return self.text


def progress(notebook: str, exercises: list[Exercise]) -> Progress:
    """Which of ``exercises`` (those of ``notebook``) passed their latest check here."""
    passed = results()
    done = tuple(e.name for e in exercises if passed.get(e.name))
    return Progress(notebook, done, tuple(e.name for e in exercises if e.name not in done))
