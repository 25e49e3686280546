"""Re-execute notebooks in place, top to bottom in a fresh kernel, with widget state saved.

Usage: python scripts/execute_notebooks.py notebooks/*.ipynb

Outputs are deterministic (seeded code, PYTHONHASHSEED=0, no timing metadata), so a re-run
after a change to pagedlab only changes what the change changed. The kernels compute with
``pagedlab.model.threads.thread_env()``'s threads (one on a 2-core machine). Each notebook's
time is printed, and the total. Widget state is stored so
that a trusted notebook shows its sliders and pictures before it is run.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# the thread count, from its one place, read without importing pagedlab (whose import sets
# TRITON_INTERPRET, which the kernels would inherit as if the user had set it)
THREADS = Path(__file__).resolve().parent.parent / "pagedlab" / "model" / "threads.py"
thread_env = runpy.run_path(str(THREADS))["thread_env"]
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


MODEL_ID = re.compile(r"[0-9a-f]{32}")


def _widget_order(notebook: nbformat.NotebookNode, state: dict) -> list[str]:
    """Model ids in a run-independent order: depth first from the displayed widgets through
    the ``IPY_MODEL_`` references, then any others (links) by their content."""
    order: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in state and model_id not in order:
            order.append(model_id)
            refs = json.dumps(state[model_id]["state"], sort_keys=True)
            for ref in re.findall(r"IPY_MODEL_([0-9a-f]{32})", refs):
                visit(ref)

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                visit(view["model_id"])
    masked = {m: MODEL_ID.sub("", json.dumps(state[m], sort_keys=True)) for m in state}
    for model_id in sorted(state, key=masked.__getitem__):
        visit(model_id)
    return order


def renumber_widget_ids(notebook: nbformat.NotebookNode) -> str:
    """The notebook as text, each widget model id (a random UUID per run) replaced by its
    place in a run-independent order (nbformat sorts keys, so the saved state follows it)."""
    widgets = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {})
    state = widgets.get("state", {})
    if not state:
        return nbformat.writes(notebook)
    ids = {m: f"{i:032x}" for i, m in enumerate(_widget_order(notebook, state), start=1)}
    text = re.sub("|".join(map(re.escape, ids)), lambda m: ids[m.group(0)], json.dumps(notebook))
    return nbformat.writes(nbformat.reads(text, as_version=4))  # keys sorted: state in order


def coalesce_streams(cell: nbformat.NotebookNode) -> None:
    """Merge consecutive stdout (or stderr) outputs: how a kernel chunks them varies by run."""
    merged: list[nbformat.NotebookNode] = []
    for output in cell.get("outputs", []):
        last = merged[-1] if merged else None
        if (
            last is not None
            and output.output_type == last.output_type == "stream"
            and output.name == last.name
        ):
            last.text += output.text
        else:
            merged.append(output)
    if "outputs" in cell:
        cell.outputs = merged


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
        coalesce_streams(cell)
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    notebook.metadata.pop("papermill", None)
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nbformat.validate(notebook)
    path.write_text(renumber_widget_ids(notebook) + "\n")
    return seconds


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    os.environ["PYTHONHASHSEED"] = "0"  # the kernel inherits it: set iteration order is stable
    os.environ.update(thread_env())
    print(f"executing {len(paths)} notebook(s), {os.environ['OMP_NUM_THREADS']} thread(s) each")
    total = 0.0
    for name in paths:
        seconds = execute(Path(name))
        total += seconds
        print(f"{name}: executed in {seconds:.1f} s", flush=True)
    print(f"{len(paths)} notebook(s) in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
