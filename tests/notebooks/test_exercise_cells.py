"""scripts/check_notebook_cells.py: the notebooks hold their cells, the script checks them.

Every committed notebook passes; a copy of the notebooks with one cell gone stale (a stub, a
check, a links cell, a title) or missing, or with another notebook's exercise, fails with a
non-zero exit, the notebook and the exercise or cell named, and the cell to paste printed.
The checker never writes. Also: importing the exercises does not import ipywidgets or
matplotlib (the predict widget lives apart), and no Predict cell shows its answer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pagedlab.exercises import stub

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_notebook_cells.py"
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
Cells = list[dict[str, Any]]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_notebook_cells", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False
    )


def test_notebooks_00_to_12_are_all_checked() -> None:
    assert [p.stem[:2] for p in NOTEBOOKS] == [f"{n:02d}" for n in range(13)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_notebook_passes(path: Path) -> None:
    assert _script().problems(path) == []


def test_the_checker_exits_0_on_the_committed_notebooks_and_shows_its_usage() -> None:
    done = _run()
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "Usage: python scripts/check_notebook_cells.py" in _run("--help").stdout


def _text(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def _at(cells: Cells, text: str) -> int:
    """The index of the first cell whose source holds ``text``."""
    return next(i for i, c in enumerate(cells) if text in _text(c))


def _stale_stub(cells: Cells) -> None:
    cells[_at(cells, "def my_slot_mapping(")]["source"] = ["def my_slot_mapping(table):\n    ..."]


def _check_gone(cells: Cells) -> None:
    del cells[_at(cells, 'EXERCISES["blocks_held"].check(')]


def _foreign_check(cells: Cells) -> None:
    source = ['EXERCISES["slot"].check(my_slot)']  # notebook 02's exercise
    cell = {**cells[_at(cells, 'progress("06")')], "id": "0000f00d", "source": source}
    cells.insert(_at(cells, 'progress("06")'), cell)


def _stale_link(cells: Cells) -> None:
    cells[1]["source"] = ["[← 02 · The block table](02_block_table.ipynb)"]


def _no_progress(cells: Cells) -> None:
    del cells[_at(cells, 'progress("10")')]


def _swapped(cells: Cells) -> None:
    a, b = _at(cells, 'EXERCISES["pick_victim"]'), _at(cells, 'EXERCISES["can_swap_in"]')
    cells[a], cells[b] = cells[b], cells[a]


BREAKAGES: list[tuple[str, Callable[[Cells], None], list[str]]] = [
    (
        "02_block_table",
        _stale_stub,
        ["exercise 2 `slot_mapping`: its stub cell", "is stale", stub("slot_mapping").rstrip()],
    ),
    (
        "05_sharing",
        _check_gone,
        ["`blocks_held`: no check cell", 'EXERCISES["blocks_held"].check(my_blocks_held)'],
    ),
    ("06_prefix_caching", _foreign_check, ["checks `slot` (of 02_block_table): remove it"]),
    (
        "03_same_data_any_layout",
        _stale_link,
        ["the links cell right after the title", "is stale", "[04 · The kernel at work →]"],
    ),
    ("10_real_model", _no_progress, ['do not end with progress("10")', 'progress("10")\n----']),
    ("09_when_memory_runs_out", _swapped, ["out of order", "pick_victim\ntokens_to_recompute"]),
]


def _copy(tmp_path: Path) -> Path:
    for path in NOTEBOOKS:
        shutil.copyfile(path, tmp_path / path.name)
    return tmp_path


def _edit(path: Path, change: Callable[[Cells], None]) -> None:
    notebook = json.loads(path.read_text())
    change(notebook["cells"])
    path.write_text(json.dumps(notebook))


@pytest.mark.parametrize(
    ("stem", "change", "said"), BREAKAGES, ids=[f"{s}-{c.__name__[1:]}" for s, c, _ in BREAKAGES]
)
def test_a_broken_copy_is_reported_with_the_cell_to_paste(
    stem: str,
    change: Callable[[Cells], None],
    said: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _copy(tmp_path) / f"{stem}.ipynb"
    _edit(path, change)
    before = path.read_bytes()
    assert _script().main([str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: "), out
    for part in said:
        assert part in out, f"{part!r} not in:\n{out}"
    assert path.read_bytes() == before  # it only checks


def test_a_new_title_makes_the_neighbours_links_stale(tmp_path: Path) -> None:
    """Run as a command: 05's H1 changed, so 04's and 06's links (top and bottom) are stale."""
    folder = _copy(tmp_path)

    def retitle(cells: Cells) -> None:
        cells[0]["source"] = ["# 05 · Sharing\n", *cells[0]["source"][1:]]

    _edit(folder / "05_sharing.ipynb", retitle)
    done = _run(*(str(folder / f"{stem}.ipynb") for stem in ("04_kernel_at_work", "05_sharing")))
    assert done.returncode == 1, done.stdout + done.stderr
    cells = json.loads((folder / "04_kernel_at_work.ipynb").read_text())["cells"]
    reports = [line for line in done.stdout.splitlines() if line.startswith(str(folder))]
    assert reports == [
        f"{folder / '04_kernel_at_work.ipynb'}: the links cell {where} (cell {cell['id']}) is stale"
        for where, cell in (("right after the title", cells[1]), ("at the end", cells[-1]))
    ]
    assert done.stdout.count("[05 · Sharing →](05_sharing.ipynb)\n----") == 2
    assert "2 problem(s)" in done.stdout


def test_exercises_import_neither_ipywidgets_nor_matplotlib() -> None:
    code = (
        "import sys, pagedlab.exercises; "
        "print('ipywidgets' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.stem)  # 00 shows how one works
def test_no_predict_cell_shows_its_answer(path: Path) -> None:
    """Every cell that makes a Predict widget only asks for it: the answer and explanation are
    computed in pagedlab.explorers.predictions, and the source holds neither."""
    from pagedlab.explorers.predictions import PREDICTIONS

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
