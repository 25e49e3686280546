"""One verdict everywhere: right answers that JupyterLab's check marks ✓ score full in
instructor mode and pass the live page's grade() too (issue 38: each scored 0 there).

A name imported by an earlier cell of the notebook (``ceil_div`` in 02, ``torch`` in 03), a
``@dataclass`` helper in the exercise cell, ``@torch.no_grad()`` on the answer, ``@dataclass``
on a capstone class.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

import nbformat

from pagedlab.exercises import EXERCISES
from pagedlab.explorers.site import live
from pagedlab.grade.cells import entry_of, notebook_imports, read_cells
from pagedlab.grade.runner import grade
from tests.exercises.test_grade import notebook, right_answer

IMPORTS = {  # exercise -> (a cell of the notebook that imports, the exercise cell)
    "new_blocks": (
        "from pagedlab.ground.checks import ceil_div\n",
        "def my_new_blocks(num_tokens, n, block_size):\n"
        "    return ceil_div(num_tokens + n, block_size) - ceil_div(num_tokens, block_size)\n",
    ),
    "gather_kv": (
        "import torch\n",
        "def my_gather_kv(key_cache: torch.Tensor, blocks, num_tokens):\n"
        "    pages = -(-num_tokens // key_cache.shape[1])\n"
        "    return key_cache[blocks[:pages]].flatten(0, 1)[:num_tokens]\n",
    ),
}
ALONE = {  # exercise -> its cell, alone
    "blocks_needed": """from dataclasses import dataclass


@dataclass
class Span:
    start: int
    stop: int


def my_blocks_needed(num_tokens, block_size):
    span = Span(0, num_tokens)
    return -(-(span.stop - span.start) // block_size)
""",
    "empty_slots": """import torch


@torch.no_grad()
def my_empty_slots(num_tokens, block_size):
    return -(-num_tokens // block_size) * block_size - num_tokens
""",
    "block_table": "from dataclasses import dataclass\n"
    + right_answer("block_table").replace("class MyBlockTable", "@dataclass\nclass MyBlockTable"),
}


def _notebook_check(name: str, cells: list[str]) -> bool:
    """JupyterLab: the cells run in order in one module (``__main__``), then the check."""
    module = types.ModuleType("__notebook__")
    sys.modules[module.__name__] = module
    for cell in cells:
        exec(compile(cell, "<cell>", "exec"), module.__dict__)
    exercise = EXERCISES[name]
    entry: Any = module.__dict__[exercise.entry or f"my_{name}"]
    return exercise.check(entry).passed


def test_right_answers_pass_in_all_three_places(tmp_path: Path) -> None:
    for name, cells in {**IMPORTS, **{n: ("", c) for n, c in ALONE.items()}}.items():
        assert _notebook_check(name, list(cells)), name
    for name, cell in ALONE.items():
        got = live.grade(name, cell)
        assert got["status"] == "passed", (name, got)
    cells = [cell for pair in IMPORTS.values() for cell in pair] + list(ALONE.values())
    path = notebook(tmp_path / "right.ipynb", cells)
    results = grade([path], names=[*IMPORTS, *ALONE], say=lambda text: None)
    said = {t["name"]: t["output"] for t in results["tests"]}
    assert results["score"] == len(IMPORTS) + len(ALONE), said


REPO = Path(__file__).resolve().parents[2]


def test_the_live_page_runs_the_notebooks_imports_as_instructor_mode_does() -> None:
    """Issue 38: notebook 02's right answer using ``ceil_div`` (imported by an earlier cell)
    failed on the live page, which ran the exercise cell alone; the page now sends the
    notebook's imports, the very cell instructor mode runs before the exercise cells."""
    path = REPO / "notebooks" / "02_block_table.ipynb"
    entries = {entry_of(exercise) for exercise in EXERCISES.values()}
    prelude = notebook_imports(path, entries)
    assert read_cells([path], entries)[0].source == prelude
    assert "from pagedlab.ground.checks import ceil_div" in prelude
    code = IMPORTS["new_blocks"][1]
    assert live.grade("new_blocks", code)["status"] == "failed"  # alone: a NameError
    got = live.grade("new_blocks", code, prelude)
    assert got["status"] == "passed", got
    assert live.grade("new_blocks", code.replace("+ n", "+ 2 * n"), prelude)["status"] == "failed"


def test_the_built_page_holds_the_notebooks_imports_as_they_are() -> None:
    """build_site.py puts them in the page, unescaped, where live.js reads them."""
    spec = importlib.util.spec_from_file_location("build_site", REPO / "scripts" / "build_site.py")
    assert spec is not None and spec.loader is not None
    build_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    prelude = build_site.notebook_imports(REPO / "notebooks" / "02_block_table.ipynb")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    notebook.metadata["pagedlab_imports"] = prelude
    page = build_site.export_page(notebook, "imports")
    tag = re.search(r'<script[^>]* id="pagedlab-notebook-imports"[^>]*>(.*?)</script>', page, re.S)
    assert tag is not None and tag[1] == prelude
