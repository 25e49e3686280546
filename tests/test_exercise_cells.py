"""scripts/add_exercise_cells.py: the notebooks hold its cells, and it can put them back.

After a merge takes another branch's version of a notebook, the integrator reruns the script;
these tests check that it then restores exactly the cells (and places) committed here, and
that on an up-to-date notebook it changes nothing. Also: importing the exercises does not
import ipywidgets or matplotlib (the predict widget lives apart).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("0[1-8]_*.ipynb"))


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_cells_come_back_in_their_places(path: Path, tmp_path: Path) -> None:
    script = _script()
    notebook = json.loads(path.read_text())
    mine = {script.cid(path.stem, tag) for tag in _tags(script, path.stem)}
    ours = {c["id"] for c in notebook["cells"]} & mine
    assert len(ours) >= 8
    notebook["cells"] = [c for c in notebook["cells"] if c["id"] not in ours]
    stripped = tmp_path / path.name
    stripped.write_text(json.dumps(notebook))
    assert script.edit(stripped) is True
    assert _ids(stripped) == _ids(path)


def _tags(script, stem: str) -> list[str]:  # type: ignore[no-untyped-def]
    from pagedlab.exercises import in_notebook

    tags = ["nav-top", "nav-bottom", "predict", "ex-intro", "ex-import", "ex-progress"]
    for exercise in in_notebook(stem[:2]):
        tags += [f"ex-{exercise.name}-{part}" for part in ("task", "stub", "check")]
    return tags


def test_exercises_import_neither_ipywidgets_nor_matplotlib() -> None:
    code = (
        "import sys, pagedlab.exercises; "
        "print('ipywidgets' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
