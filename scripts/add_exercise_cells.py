"""Add (or refresh) the exercise cells, predict cells and previous/next links of notebooks 01-10.

Usage: python scripts/add_exercise_cells.py notebooks/0[1-9]_*.ipynb notebooks/10_*.ipynb
       then python scripts/execute_notebooks.py on the notebooks it changed.

Only ever inserts new cells or rewrites the source of cells it inserted itself (their ids are
derived from the notebook and the cell's purpose, e.g. ``ex-slot-stub``, so a second run finds
them wherever they are): every other cell, its id and its outputs stay as they are, and a cell
of ours that is there stays where it is. Run it again after a merge that took another branch's
version of a notebook; it puts missing cells back next to what they belong to, never at a
fixed position, so cells added or moved elsewhere in a notebook do not shift them:

- a links cell (previous / start here / next) right after the title (the first markdown cell
  that opens with a ``# `` heading), and one at the very end;
- a "Predict" cell right before the key output named in PREDICT (that cell's id, or if no
  cell has it any more, the first other code cell containing PREDICT's text; skipped, with a
  note, if neither is there);
- the "Exercises" section (task, stub, check per exercise of ``pagedlab.exercises``, then the
  notebook's tally; notebooks with exercises: 01-10): a missing cell goes right after the
  section's cell before it, or right before the one after it, and the whole section, if none
  of it is there, right before the final links cell.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from pagedlab.exercises import in_notebook, stub

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"


def notebook_titles(folder: Path = NOTEBOOKS_DIR) -> dict[str, str]:
    """Each notebook's title, read from its H1 (the first ``# `` line of its first markdown
    cell): the notebook is the one source of its title. Stems in order, 00 first."""
    titles = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        first = next(c for c in cells if c["cell_type"] == "markdown")
        heading = "".join(first["source"]).splitlines()[0]
        if not heading.startswith("# "):
            raise ValueError(f"{path.name}: its first markdown cell opens with {heading!r}, no H1")
        titles[path.stem] = heading[2:].strip()
    return titles


TITLES = notebook_titles()
ORDER = list(TITLES)


def cid(stem: str, tag: str) -> str:
    return hashlib.sha1(f"E:{stem}:{tag}".encode()).hexdigest()[:8]


def md(stem: str, tag: str, text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cid(stem, tag), "metadata": {}, "source": text}


def code(stem: str, tag: str, text: str) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cid(stem, tag),
        "metadata": {},
        "outputs": [],
        "source": text,
    }


def nav(stem: str) -> str:
    i = ORDER.index(stem)
    parts = []
    if i > 0:
        prev = ORDER[i - 1]
        parts.append(f"[← {TITLES[prev]}]({prev}.ipynb)")
    if stem != "00_start_here" and ORDER[i - 1] != "00_start_here":
        parts.append("[start here](00_start_here.ipynb)")
    if i + 1 < len(ORDER):
        nxt = ORDER[i + 1]
        parts.append(f"[{TITLES[nxt]} →]({nxt}.ipynb)")
    return " · ".join(parts)


# notebook -> (id of the cell the Predict cell goes before, text that cell holds); the cell's
# source only asks for the widget: its question, answer and explanation are computed in
# pagedlab.exercises.predictions from the scene that next cell builds
PREDICT = {
    "02_block_table": ("a07e6854", "example_history(num_blocks=8, block_size=4, finished=False)"),
    "05_sharing": ("8a975c90", "prompt = figure8_prompt()"),
    "06_prefix_caching": ("b22eb198", "second = cache.admit(system + [7, 8])"),
    "07_memory_at_scale": (
        "f471e81d",
        "results = [simulate(trace, policy) for policy in paper_policies(block_size=16)]",
    ),
    "09_when_memory_runs_out": ("45197eb3", 'engine, kv = scheduler_scene("swap", block_size=4)'),
}


def predict_source(stem: str) -> str:
    """A Predict cell: the widget, nothing that reveals its answer."""
    return (
        "from pagedlab.exercises.predictions import predict\n\n"
        f'predict("{stem[:2]}")  # answer and explanation: computed in pagedlab, shown on request'
    )


# Cells shown right after an exercise's check: what would give its answer away above it.
AFTER_CHECK = {
    "paged_kernel": (
        "**After the puzzle: the teaching kernel.** Solved exercise 6, or ready to compare? This "
        "is `paged_attention_one_page`'s kernel as pagedlab runs it, one page per loop step (the "
        "puzzle's reference solution is this very function). The tuned kernel above is the same "
        "loop, several pages a step, split across programs.",
        "import inspect\n\nfrom pagedlab.attention import kernels\n\n"
        "print(inspect.getsource(kernels.paged_attention_one_page_kernel.fn))  # teaching kernel",
    ),
}


def exercise_cells(stem: str) -> list[dict[str, Any]]:
    """The Exercises section, or nothing for a notebook without exercises (00)."""
    number = stem[:2]
    exercises = in_notebook(number)
    if not exercises:
        return []
    intro = (
        "## Exercises\n\n"
        "Now build it yourself. Write each function in the cell under its task (replace the "
        "`...`), then run the check under it. The check calls your function on fixed and "
        "seeded generated cases and compares it with pagedlab's own implementation; on the "
        "first wrong answer it shows the inputs, what was expected, what you returned and a "
        'hint. Stuck? `solution("name")` shows an answer. Saved, this notebook shows every '
        "check as *not done yet*."
    )
    cells = [
        md(stem, "ex-intro", intro),
        code(stem, "ex-import", "from pagedlab.exercises import EXERCISES, progress, solution"),
    ]
    for k, exercise in enumerate(exercises, start=1):
        head = f"**Exercise {k} · `{exercise.name}`.** {exercise.task}"
        if exercise.hints:
            head += f"\n\n<details><summary>Hint</summary>\n\n{exercise.hints[0]}\n\n</details>"
        cells.append(md(stem, f"ex-{exercise.name}-task", head))
        cells.append(code(stem, f"ex-{exercise.name}-stub", stub(exercise.name).rstrip("\n")))
        fn = exercise.entry or "my_" + exercise.name
        cells.append(
            code(stem, f"ex-{exercise.name}-check", f'EXERCISES["{exercise.name}"].check({fn})')
        )
        if exercise.name in AFTER_CHECK:
            text, source = AFTER_CHECK[exercise.name]
            cells.append(md(stem, f"ex-{exercise.name}-after", text))
            cells.append(code(stem, f"ex-{exercise.name}-after-code", source))
    cells.append(code(stem, "ex-progress", f'progress("{number}")'))
    return cells


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _text(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _after_title(cells: list[dict[str, Any]]) -> int:
    """Just after the title: the first markdown cell that opens with a level-1 heading."""
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and _text(cell).lstrip().startswith("# "):
            return i + 1
    return 0


def _predict_anchor(cells: list[dict[str, Any]], stem: str, ours: set[str]) -> int | None:
    """The index of the cell the Predict cell goes before: by id, else by its text."""
    anchor, text = PREDICT[stem]
    ids = [c["id"] for c in cells]
    if anchor in ids:
        return ids.index(anchor)
    found = (
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and c["id"] not in ours and text in _text(c)
    )
    return next(found, None)


def _section_place(ids: list[str], section: list[str], k: int, bottom: str) -> int:
    """Where the missing ``section[k]`` goes: after the section's nearest earlier cell that is
    there, else before its nearest later one, else (none there) before the final links."""
    for earlier in reversed(section[:k]):
        if earlier in ids:
            return ids.index(earlier) + 1
    for later in section[k + 1 :]:
        if later in ids:
            return ids.index(later)
    return ids.index(bottom)


def edit(path: Path) -> bool:
    """Insert the missing cells, refresh the source of ours; True if the notebook changed."""
    stem = path.stem
    notebook = json.loads(path.read_text())
    cells: list[dict[str, Any]] = notebook["cells"]
    before = json.dumps(cells)
    section = exercise_cells(stem)
    top, bottom = md(stem, "nav-top", nav(stem)), md(stem, "nav-bottom", nav(stem))
    wanted = [top, *section, bottom]
    if stem in PREDICT:
        wanted.append(code(stem, "predict", predict_source(stem)))
    ours = {cell["id"] for cell in wanted}
    by_id = {c["id"]: c for c in cells}
    for cell in wanted:  # ours already there: refresh the source only
        if cell["id"] in by_id:
            by_id[cell["id"]]["source"] = _lines(cell["source"])
    if top["id"] not in by_id:
        cells.insert(_after_title(cells), top)
    if stem in PREDICT and cid(stem, "predict") not in by_id:
        at = _predict_anchor(cells, stem, ours)
        if at is None:
            anchor, text = PREDICT[stem]
            print(f"{path}: no cell {anchor} nor one holding {text!r}; no predict cell added")
        else:
            cells.insert(at, wanted[-1])
    if bottom["id"] not in by_id:
        cells.append(bottom)
    section_ids = [cell["id"] for cell in section]
    for k, cell in enumerate(section):
        ids = [c["id"] for c in cells]
        if cell["id"] not in ids:
            cells.insert(_section_place(ids, section_ids, k, bottom["id"]), cell)
    for c in cells:
        if isinstance(c["source"], str):
            c["source"] = _lines(c["source"])
    all_ids = [c["id"] for c in cells]
    assert len(all_ids) == len(set(all_ids)), f"{path}: duplicate cell ids"
    if json.dumps(cells) == before:
        return False
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return True


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(name, "changed" if edit(Path(name)) else "unchanged")
