"""scripts/add_exercise_cells.py: the notebooks hold its cells, and it can put them back.

After a merge takes another branch's version of a notebook, the integrator reruns the script;
these tests check that on an up-to-date notebook it changes nothing, that it puts every missing
cell of its own back next to what it belongs to (the title, the Predict cell's key output,
the rest of the Exercises section, the end), and that cells added or moved elsewhere neither
break that nor shift it: no test pins a cell to a position. Also: importing the exercises
does not import ipywidgets or matplotlib (the predict widget lives apart).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("0[1-9]_*.ipynb")) + sorted(
    (REPO / "notebooks").glob("1[0-9]_*.ipynb")
)


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "add_exercise_cells", REPO / "scripts" / "add_exercise_cells.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ids(path: Path) -> list[str]:
    return [cell["id"] for cell in json.loads(path.read_text())["cells"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_notebook_is_up_to_date(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    assert _script().edit(copy) is False, f"{path.name}: run scripts/add_exercise_cells.py"


def _ours(script, stem: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [script.cid(stem, tag) for tag in _tags(script, stem)]


def _section(script, stem: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [cell["id"] for cell in script.exercise_cells(stem)]


def _layout(cells: list[dict]) -> list[tuple[str, str]]:
    """Each cell's id and source (a cell put back has no outputs until the notebook runs)."""
    return [(c["id"], "".join(c["source"])) for c in cells]


def _strip(cells: list[dict], gone: set[str]) -> list[dict]:
    return [c for c in cells if c["id"] not in gone]


def _restored(script, path: Path, tmp_path: Path, cells: list[dict]) -> list[dict]:  # type: ignore[no-untyped-def]
    notebook = json.loads(path.read_text())
    notebook["cells"] = cells
    copy = tmp_path / path.name
    copy.write_text(json.dumps(notebook))
    assert script.edit(copy) is True
    assert script.edit(copy) is False  # idempotent: a second run changes nothing
    return json.loads(copy.read_text())["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_cells_come_back_next_to_their_anchors(path: Path, tmp_path: Path) -> None:
    script, stem = _script(), path.stem
    committed = json.loads(path.read_text())["cells"]
    mine = set(_ours(script, stem))
    assert len(mine & {c["id"] for c in committed}) >= 8
    others = _strip(committed, mine)
    cells = _restored(script, path, tmp_path, others)
    ids = [c["id"] for c in cells]
    assert _strip(cells, mine) == others  # every other cell as it was, in its order
    assert set(ids) & mine == {c["id"] for c in committed} & mine
    title = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("# "))
    assert ids[title + 1] == script.cid(stem, "nav-top")
    if stem in script.PREDICT:
        assert ids[ids.index(script.PREDICT[stem][0]) - 1] == script.cid(stem, "predict")
    section = _section(script, stem)
    assert ids[-len(section) - 1 :] == [*section, script.cid(stem, "nav-bottom")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_added_or_moved_elsewhere_do_not_shift_ours(path: Path, tmp_path: Path) -> None:
    """Other cells inserted (before the title, after the links, mid-notebook, just before the
    Exercises) and one moved; then some of ours are lost: they come back where they were."""
    script, stem = _script(), path.stem
    cells = json.loads(path.read_text())["cells"]
    mine, section = set(_ours(script, stem)), _section(script, stem)

    def note(n: int) -> dict:
        return {
            "cell_type": "markdown",
            "id": f"0000000{n}",
            "metadata": {},
            "source": [f"new {n}"],
        }

    cells.insert(0, note(1))
    cells.insert(3, note(2))  # after the title and the top links
    cells.insert([c["id"] for c in cells].index(section[0]) // 2, note(3))  # mid-notebook
    cells.insert([c["id"] for c in cells].index(section[0]), note(4))
    plain = [i for i, c in enumerate(cells) if c["id"] not in mine and c["cell_type"] == "code"]
    cells.insert(plain[-1], cells.pop(plain[len(plain) // 2]))  # a middle cell moved down
    lost = {script.cid(stem, t) for t in ("nav-top", "predict", "ex-progress", "nav-bottom")}
    lost |= {section[0], section[5], section[6]}  # the heading, exercise 2's task and stub
    restored = _restored(script, path, tmp_path, _strip(cells, lost))
    assert _layout(restored) == _layout(cells)
    assert _strip(restored, lost) == _strip(cells, lost)  # the others untouched, outputs too


@pytest.mark.parametrize(
    "stem",
    [
        "02_block_table",
        "05_sharing",
        "06_prefix_caching",
        "07_memory_at_scale",
        "09_when_memory_runs_out",
    ],
)
def test_the_predict_cell_finds_its_key_output_by_text_if_the_id_changed(
    stem: str, tmp_path: Path
) -> None:
    script, path = _script(), REPO / "notebooks" / f"{stem}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    ids = [c["id"] for c in cells]
    anchor = ids.index(script.PREDICT[stem][0])
    cells[anchor]["id"] = "00000abc"  # the key output rewritten as a new cell
    restored = _restored(script, path, tmp_path, _strip(cells, {script.cid(stem, "predict")}))
    assert _layout(restored) == _layout(cells)


def _tags(script, stem: str) -> list[str]:  # type: ignore[no-untyped-def]
    from pagedlab.exercises import in_notebook

    tags = ["nav-top", "nav-bottom", "predict", "ex-intro", "ex-import", "ex-progress"]
    for exercise in in_notebook(stem[:2]):
        tags += [f"ex-{exercise.name}-{part}" for part in ("task", "stub", "check")]
        if exercise.name in script.AFTER_CHECK:
            tags += [f"ex-{exercise.name}-after", f"ex-{exercise.name}-after-code"]
    return tags


def test_exercises_import_neither_ipywidgets_nor_matplotlib() -> None:
    code = (
        "import sys, pagedlab.exercises; "
        "print('ipywidgets' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_predict_cell_shows_its_answer(path: Path) -> None:
    """Every cell that makes a Predict widget only asks for it: the answer and explanation are
    computed in pagedlab.exercises.predictions, and the source holds neither."""
    from pagedlab.exercises.predictions import PREDICTIONS

    cells = json.loads(path.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    predicting = [s for s in sources if "Predict" in s or "predict(" in s]
    if path.stem[:2] in PREDICTIONS:
        assert predicting, f"{path.name} has no Predict cell"
    widget = PREDICTIONS[path.stem[:2]]() if path.stem[:2] in PREDICTIONS else None
    for source in predicting:
        code = "\n".join(line.split("#")[0] for line in source.splitlines())  # no comments
        assert "answer" not in code and "explain" not in code and "Predict(" not in code, source
        assert source.count("\n") <= 3, source  # an import and the call, nothing computed
        if widget is not None:
            shown = (
                str(widget.answer)
                if not isinstance(widget.answer, list)
                else ", ".join(map(str, widget.answer))
            )
            assert shown not in code.replace(f'"{path.stem[:2]}"', ""), source


def test_every_notebook_ends_with_its_progress_line_and_links() -> None:
    script = _script()
    for path in NOTEBOOKS:
        ids = _ids(path)
        assert ids[-2:] == [
            script.cid(path.stem, "ex-progress"),
            script.cid(path.stem, "nav-bottom"),
        ]
