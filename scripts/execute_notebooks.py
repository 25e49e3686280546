"""Re-execute notebooks in place, top to bottom in a fresh kernel, with widget state saved.

Usage: python scripts/execute_notebooks.py notebooks/*.ipynb

Outputs are deterministic (seeded code, PYTHONHASHSEED=0, no timing metadata), so a re-run
after a change to pagedlab only changes what the change changed. Widget state is stored so
that a trusted notebook shows its sliders and pictures before it is run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled")


def execute(path: Path) -> float:
    """Execute ``path`` in place; returns the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    notebook.metadata.pop("papermill", None)
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return seconds


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    os.environ["PYTHONHASHSEED"] = "0"  # the kernel inherits it: set iteration order is stable
    for name in paths:
        seconds = execute(Path(name))
        print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
