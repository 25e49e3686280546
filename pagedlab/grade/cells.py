"""The submission's cells, read here (never run here): which define an exercise's entry, the
imports the notebook makes around them, and whether each entry is the learner's own.

:func:`read_cells` keeps the code cells that define (a top-level ``def``/``class``) an entry,
after one cell of the notebook's other top-level imports; :func:`source_problem` checks,
on the source alone, that the entry is bound once, by a ``def`` or a ``class`` of the
learner's own bases (the child checks the object too: :func:`pagedlab.grade.child.
entry_problem`).
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pagedlab.grade.cases import short
from pagedlab.grade.child import code_of
from pagedlab.grade.core import Exercise, Kernel
from pagedlab.grade.wire import printable

DEFINES = re.compile(r"^(?:def|class)\s+(\w+)", re.MULTILINE)


@dataclass
class Cell:
    index: int  # its position among the exercise cells run, 0-based
    where: str  # "notebook.ipynb, cell 12"
    source: str
    defines: set[str]


def read_cells(
    paths: Sequence[Path], entries: set[str], unreadable: list[str] | None = None
) -> list[Cell]:
    """The code cells of ``paths`` that define (top level ``def``/``class``) an entry.

    A notebook that cannot be read (not JSON, no cells, nested too deep ...) raises
    ValueError, or, given an ``unreadable`` list, is said there and skipped (none of its cells
    is kept)."""
    cells: list[Cell] = []
    for path in paths:
        try:
            found = _cells_of(Path(path), entries, len(cells))
        except Exception as error:  # whatever the file holds (nested too deep: RecursionError)
            why = printable(f"{Path(path).name}: not a readable notebook ({short(error)})")
            if unreadable is None:
                raise ValueError(why) from error
            unreadable.append(why)
            continue
        cells += found
    return cells


def _cells_of(path: Path, entries: set[str], first: int) -> list[Cell]:
    """The notebook's exercise cells, after one cell of the imports its other cells make at
    their top level (``from pagedlab.ground.checks import ceil_div``, ``import torch``): the names a
    learner uses as the notebook does, as JupyterLab ran them."""
    cells: list[Cell] = []
    imports: list[str] = []
    raw = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for number, cell in enumerate(raw):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = source if isinstance(source, str) else "".join(map(str, source))
        names = set(DEFINES.findall(code_of(source))) & entries
        if names:
            cells.append(Cell(0, f"{path.name}, cell {number}", source, names))
            continue
        with contextlib.suppress(SyntaxError, ValueError, RecursionError):
            tree = ast.parse(code_of(source))
            imports += [ast.unparse(n) for n in tree.body if isinstance(n, IMPORTS)]
    if cells and imports:
        guarded = "".join(f"try:\n    {line}\nexcept Exception:\n    pass\n" for line in imports)
        cells.insert(0, Cell(0, f"{path.name}, its imports", guarded, set()))
    for index, cell in enumerate(cells, start=first):
        cell.index = index
    return cells


IMPORTS = (ast.Import, ast.ImportFrom)


def notebook_imports(path: Path, entries: set[str]) -> str:
    """The guarded imports cell instructor mode runs before ``path``'s exercise cells ("" if
    none): the live page runs it before the learner's code too (one verdict, issue 38)."""
    cells = _cells_of(path, entries, 0)
    return cells[0].source if cells and not cells[0].defines else ""


def entry_of(exercise: Exercise) -> str:
    return exercise.entry or f"my_{exercise.name}"


def kind_of(exercise: Exercise) -> str:
    if isinstance(exercise, Kernel):
        return "kernel"
    return "class" if isinstance(exercise.solution, type) else "function"


def source_problem(cells: Sequence[Cell], entry: str, kind: str, base: str = "") -> str:
    """Why the cells' source does not define ``entry`` as the learner's own ("" if it does).

    The entry must be bound by exactly one top-level ``def`` (``@triton.jit`` for a kernel,
    no other decorator) or ``class`` statement, whose bases are classes the cells define
    (or ``base``, the pagedlab class its driver runs a subclass of: ``drivers.BASES``),
    and by nothing else (no assignment, import or loop target of that name anywhere).
    """
    classes: set[str] = {base} if base else set()
    trees = []
    for cell in cells:
        try:
            trees.append(ast.parse(code_of(cell.source)))
        except SyntaxError as error:
            if entry in cell.defines:
                return f"{cell.where} does not compile: {error.msg} (line {error.lineno})"
    for tree in trees:
        classes |= {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defs = []
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == entry:
                    defs.append((node, node in tree.body))
            elif isinstance(node, ast.Name) and node.id == entry:
                if not isinstance(node.ctx, ast.Load):
                    return f"{entry} is assigned besides its definition: keep the one {kind}"
            elif isinstance(node, ast.alias) and (node.asname or node.name) == entry:
                return f"{entry} is imported: the graded {kind} must be written in the submission"
            elif isinstance(node, (ast.Global, ast.Nonlocal)) and entry in node.names:
                return f"{entry} is declared global or nonlocal: keep the one {kind}"
    if not defs or not all(top for _, top in defs):
        return f"{entry} must be defined by a def or class statement at the top level of a cell"
    for node, _ in defs:  # a notebook may define it again (a first try, then a fix)
        problem = _definition_problem(node, entry, kind, classes)
        if problem:
            return problem
    return ""


def _definition_problem(node: ast.AST, entry: str, kind: str, classes: set[str]) -> str:
    """A class of the learner's own bases; a kernel ``@triton.jit`` and nothing else; any
    other decorator is the child's to judge (it must give back the learner's own object)."""
    if isinstance(node, ast.ClassDef):
        if kind != "class":
            return f"{entry} must be a function, not a class"
        if node.keywords:
            return f"{entry}: no metaclass or keyword on the class"
        for base in node.bases:
            if not (isinstance(base, ast.Name) and (base.id in classes or base.id == "object")):
                return f"{entry} subclasses {ast.unparse(base)}: write the class yourself"
        return ""
    if kind == "class" or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"{entry} must be a class"
    decorators = [ast.unparse(d) for d in node.decorator_list]
    if kind == "kernel" and decorators not in (["triton.jit"], ["jit"]):
        return f"{entry} has decorators {decorators}; the graded kernel takes @triton.jit"
    return ""
