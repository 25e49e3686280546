"""Check the notebook cells that pagedlab decides; print what a stale or missing one should be.

Usage: python scripts/check_notebook_cells.py [notebooks/NN_name.ipynb ...]  (default: all)

The notebooks are the source of their cells: edit a cell in the notebook itself, run this
check, then re-execute the notebooks you changed (``python scripts/execute_notebooks.py
notebooks/NN_name.ipynb``). It never writes. For each problem it prints ``path: what is
wrong`` and, on the next lines, the expected cell source to paste (up to a ``----`` line).
Exit status 1 if it reports anything, else 0. Per notebook NN, it checks:

- the links cells (previous / start here / next), right after the title and at the very end,
  with each notebook's title read from its H1 (the first line of its first markdown cell);
- each exercise of ``pagedlab.exercises.in_notebook("NN")``, in that order: a task cell that
  opens with ``**Exercise k · `name`.**``, a stub cell equal to ``stub(name)``, then a check
  cell calling ``EXERCISES["name"].check(my_name)`` (or its ``entry``); no check cell names
  an exercise of another notebook; the last code cell is ``progress("NN")``. (00 has no
  exercises of its own: its check cells show how one works, and are not checked.)
- ``predict("NN")`` is called if and only if ``pagedlab.explorers.predictions`` has a
  prediction for NN, and no other notebook's prediction is.

The prose (the Exercises intro, tasks, hints, what follows a check, a Predict cell's comment)
is the notebook's alone: nothing here holds a copy of it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pagedlab.exercises import EXERCISES, in_notebook, stub
from pagedlab.explorers.predictions import PREDICTIONS

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
CHECK_CALL = re.compile(r'EXERCISES\["(\w+)"\]\.check\(')
PREDICT_CALL = re.compile(r'\bpredict\("(\d\d)"\)')

Cell = dict[str, Any]
Problem = tuple[str, str]  # what is wrong, the expected cell source ("" when there is none)


def notebook_titles(folder: Path = NOTEBOOKS_DIR) -> dict[str, str]:
    """Each notebook's title, read from its H1 (the first ``# `` line of its first markdown
    cell): the notebook is the one source of its title. Stems in order, 00 first."""
    titles = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        first = next(c for c in cells if c["cell_type"] == "markdown")
        heading = _text(first).splitlines()[0]
        if not heading.startswith("# "):
            raise ValueError(f"{path.name}: its first markdown cell opens with {heading!r}, no H1")
        titles[path.stem] = heading[2:].strip()
    return titles


def links(stem: str, titles: dict[str, str]) -> str:
    """The links cell: previous, start here (from 02 on), next."""
    order = list(titles)
    i = order.index(stem)
    parts = []
    if i > 0:
        parts.append(f"[← {titles[order[i - 1]]}]({order[i - 1]}.ipynb)")
    if i > 1:
        parts.append(f"[start here]({order[0]}.ipynb)")
    if i + 1 < len(order):
        parts.append(f"[{titles[order[i + 1]]} →]({order[i + 1]}.ipynb)")
    return " · ".join(parts)


def _text(cell: Cell) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _links_problems(cells: list[Cell], expected: str) -> list[Problem]:
    title = next(
        i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _text(c).startswith("# ")
    )
    found = []
    for where, at in (("right after the title", title + 1), ("at the end", len(cells) - 1)):
        cell = cells[at] if title < at < len(cells) else None
        if cell is not None and cell["cell_type"] == "markdown" and _text(cell).strip() == expected:
            continue
        if cell is not None and _text(cell).startswith("[") and ".ipynb)" in _text(cell):
            found.append((f"the links cell {where} (cell {cell['id']}) is stale", expected))
        else:
            found.append((f"no links cell {where}", expected))
    return found


def _exercise_problems(cells: list[Cell], number: str) -> list[Problem]:
    exercises = in_notebook(number)
    if not exercises:
        return []
    names = [e.name for e in exercises]
    found: list[Problem] = []
    checked: dict[str, int] = {}  # exercise -> index of the first cell that checks it
    for i, cell in enumerate(cells):
        for name in CHECK_CALL.findall(_text(cell)) if cell["cell_type"] == "code" else ():
            checked.setdefault(name, i)
            if name not in names:
                home = EXERCISES[name].notebook if name in EXERCISES else "none importable here"
                found.append((f"cell {cell['id']} checks `{name}` (of {home}): remove it", ""))
    present = [n for n in names if n in checked]
    if present != sorted(present, key=checked.__getitem__):
        order = ", ".join(sorted(present, key=checked.__getitem__))
        found.append((f"exercises out of order: {order}; pagedlab's order:", "\n".join(present)))
    for k, exercise in enumerate(exercises, start=1):
        name, label = exercise.name, f"exercise {k} `{exercise.name}`"
        fn = exercise.entry or f"my_{name}"
        call = f'EXERCISES["{name}"].check({fn})'
        end = checked.get(name, len(cells))
        if name not in checked:
            found.append((f"{label}: no check cell (it goes after the stub)", call))
        elif call not in _text(cells[end]):
            found.append((f"{label}: its check cell (cell {cells[end]['id']}) is stale", call))
        defines = re.compile(rf"^(?:def|class) {re.escape(fn)}\b", re.MULTILINE)
        stubs = [c for c in cells[:end] if c["cell_type"] == "code" and defines.search(_text(c))]
        expected = stub(name).rstrip("\n")
        if not stubs:
            found.append((f"{label}: no stub cell defines {fn} before its check", expected))
        elif _text(stubs[-1]).rstrip("\n") != expected:
            found.append((f"{label}: its stub cell (cell {stubs[-1]['id']}) is stale", expected))
        heading = f"**Exercise {k} · `{name}`.**"
        if not any(c["cell_type"] == "markdown" and _text(c).startswith(heading) for c in cells):
            found.append((f"{label}: no task cell opening with {heading}", f"{heading} ..."))
    code = [c for c in cells if c["cell_type"] == "code"]
    tally = f'progress("{number}")'
    if not code or _text(code[-1]).strip() != tally:
        found.append((f"the exercises do not end with {tally} (the last code cell)", tally))
    return found


def _predict_problems(cells: list[Cell], number: str) -> list[Problem]:
    calls = {n for c in cells if c["cell_type"] == "code" for n in PREDICT_CALL.findall(_text(c))}
    found: list[Problem] = [
        (f'calls predict("{other}"), notebook {other}\'s prediction: remove it', "")
        for other in sorted(calls - {number})
    ]
    if number in PREDICTIONS and number not in calls:
        cell = f'from pagedlab.explorers.predictions import predict\n\npredict("{number}")'
        found.append((f'no Predict cell (pagedlab has a prediction for "{number}")', cell))
    if number not in PREDICTIONS and number in calls:
        found.append((f'calls predict("{number}"), but pagedlab has no prediction for it', ""))
    return found


def problems(path: Path, titles: dict[str, str] | None = None) -> list[Problem]:
    """Every problem in the notebook at ``path``; titles default to its folder's notebooks'."""
    cells = json.loads(path.read_text())["cells"]
    expected = links(path.stem, titles or notebook_titles(path.parent))
    number = path.stem[:2]
    return [
        *_links_problems(cells, expected),
        *_exercise_problems(cells, number),
        *_predict_problems(cells, number),
    ]


def main(argv: list[str]) -> int:
    if any(arg in ("-h", "--help") for arg in argv):
        print(__doc__)
        return 0
    paths = [Path(arg) for arg in argv] or sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    titles = {folder: notebook_titles(folder) for folder in {p.parent for p in paths}}
    count = 0
    for path in paths:
        for what, expected in problems(path, titles[path.parent]):
            count += 1
            print(f"{path}: {what}")
            if expected:
                print(f"{expected}\n----")
    if count:
        print(f"{count} problem(s): edit those cells in the notebooks, run this check again, then")
        print("re-execute the notebooks changed: python scripts/execute_notebooks.py NOTEBOOK ...")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
