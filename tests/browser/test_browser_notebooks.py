"""Notebooks run in JupyterLab in Chromium, and the explorer moved by hand.

Each notebook in ``RUN_IN_LAB``: run all cells, then no error output, no broken widget, no
page error, sliders rendered. The block table (02) and layout (03) notebooks, and the
notebook with the AllocationExplorer's Play, are then driven through the controls and
checked on the values they show.

The other notebooks are not run here a second time: strict nbval runs every notebook clean in
a kernel (no error, outputs as committed, and no stderr even where outputs are ignored: the
root conftest), and ``test_every_kind_of_output_is_run_in_lab`` below checks that they show
no widget model or output type these notebooks do not, so JupyterLab's front end renders, in
this file, every kind of thing they show.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .checks import (
    check_layouts_keep_output,
    check_length_step,
    check_play_replays_from_one,
    check_runs_clean,
)
from .conftest import NOTEBOOKS_DIR, NotebookPages

NOTEBOOKS = sorted(path.name for path in NOTEBOOKS_DIR.glob("*.ipynb"))
NOT_YET = "notebook not written yet"
#: 01, 02, 03, 05: the checks here and in test_browser_exercises.py drive them; 08: Markdown
#: output; 09: Dropdown and Checkbox. The test below says when another one must join.
RUN_IN_LAB = [n for n in NOTEBOOKS if n[:3] in ("01_", "02_", "03_", "05_", "08_", "09_")]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _notebook(prefix: str) -> Any:
    """The notebook whose name starts with ``prefix``, or a skipped parameter."""
    names = [name for name in NOTEBOOKS if name.startswith(prefix)]
    if names:
        return names[0]
    return pytest.param(f"{prefix}*.ipynb", marks=pytest.mark.skip(reason=NOT_YET))


def _explorer_notebook() -> Any:
    """The first notebook (02 preferred) whose code builds an AllocationExplorer."""

    def uses_explorer(name: str) -> bool:
        cells = json.loads((NOTEBOOKS_DIR / name).read_text()).get("cells", [])
        return any(
            "AllocationExplorer" in "".join(cell.get("source", ""))
            for cell in cells
            if cell.get("cell_type") == "code"
        )

    names = sorted(NOTEBOOKS, key=lambda name: (not name.startswith("02_"), name))
    found = [name for name in names if uses_explorer(name)]
    if found:
        return found[0]
    return pytest.param("AllocationExplorer", marks=pytest.mark.skip(reason=NOT_YET))


def kinds_shown(name: str) -> set[str]:
    """What the front end must render for notebook ``name``: each widget model (module,
    version, name) in its saved widget state, each output MIME type and stream."""
    notebook = json.loads((NOTEBOOKS_DIR / name).read_text())
    state = notebook["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    kinds = {
        f"widget {m['model_module']}@{m['model_module_version']} {m['model_name']}"
        for m in state.values()
    }
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            kinds |= {f"output {mime}" for mime in output.get("data", {})}
            kinds |= {f"{output['output_type']} {output.get('name', '')}".strip()}
    return kinds


def test_every_kind_of_output_is_run_in_lab() -> None:
    """No notebook shows a widget model or an output type that no notebook in ``RUN_IN_LAB``
    shows (kinds read from the committed, executed notebooks): else add one to RUN_IN_LAB."""
    assert RUN_IN_LAB, "no notebook is run in JupyterLab"
    shown = set().union(*(kinds_shown(name) for name in RUN_IN_LAB))
    for name in NOTEBOOKS:
        missing = sorted(kinds_shown(name) - shown)
        assert not missing, f"{name} shows {missing}, which no notebook in RUN_IN_LAB shows"


@pytest.mark.browser
@pytest.mark.parametrize("name", RUN_IN_LAB)
def test_notebook_runs_clean_in_jupyterlab(notebooks: NotebookPages, name: str) -> None:
    check_runs_clean(notebooks.open(f"notebooks/{name}"))


@pytest.mark.browser
@pytest.mark.parametrize("name", [_notebook("02_")])
def test_block_table_length_4_to_5(notebooks: NotebookPages, name: str) -> None:
    check_length_step(notebooks.open(f"notebooks/{name}"))


@pytest.mark.browser
@pytest.mark.parametrize("name", [_notebook("03_")])
def test_layout_change_keeps_output(notebooks: NotebookPages, name: str) -> None:
    check_layouts_keep_output(notebooks.open(f"notebooks/{name}"))


@pytest.mark.browser
@pytest.mark.parametrize("name", [_explorer_notebook()])
def test_explorer_play_replays_growth_from_one(notebooks: NotebookPages, name: str) -> None:
    check_play_replays_from_one(notebooks.open(f"notebooks/{name}"))
