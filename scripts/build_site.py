"""Build the static site: one HTML page per notebook whose explorers still move, no kernel.

Usage: python scripts/build_site.py [--out site] [--jobs N] [notebooks/NN_name.ipynb ...]

Each page is its notebook as committed (executed; strict nbval checks that a fresh run gives these
outputs), with two changes: each explorer's output is replaced by its static view
(:func:`pagedlab.explorers.site.static.static_view` over the frames its class declares) and its live
panel, and each exercise's first check gets its live exercise. The explorer is rebuilt from the
settings its ``text/plain`` shows (``AllocationExplorer(block_size=4, length=5, ...)``), checked to
draw the committed picture byte for byte; an explorer of a sweep or a model the notebook computed
(07, 10) is rebuilt by its recipe (``RECIPES``: that computation alone) and checked to draw the
committed readout too. Where one cannot be, the notebook is run again in a kernel that shows
explorers statically (:func:`pagedlab.explorers.site.static.enable`). Then nbconvert's HTML
exporter, with the widget state and a local require.js and widget manager instead of a CDN.
``index.html`` follows the README's notebook table (the same line and picture per notebook).

The pages load nothing from the network: the widget manager and require.js are copied from
``node_modules/`` (installed from ``package.json`` / ``package-lock.json`` by ``make site``),
MathJax is left out (the notebooks use no TeX) and mermaid loads only for mermaid cells
(there are none). ``tests/browser/test_site.py`` checks it with every non-loopback host
blocked. The committed notebooks stay lean: the frames exist only in ``site/``.
"""

from __future__ import annotations

import argparse
import ast
import base64
import html
import importlib
import json
import multiprocessing
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parent.parent
MANAGER = ROOT / "node_modules" / "@jupyter-widgets" / "html-manager" / "dist"
REQUIRE = ROOT / "node_modules" / "requirejs" / "require.js"
PYODIDE = ROOT / "node_modules" / "pyodide"
#: What a page needs of Pyodide's npm package: the wasm runtime, its loader, the standard
#: library and the lock file the loader reads (no wheels: pagedlab's live core is pure Python).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json", "package.json")  # fmt: skip
TEMPLATE = ROOT / "scripts" / "site_template"
# the thread count, from its one place, read without importing pagedlab (whose import sets
# TRITON_INTERPRET, which a kernel would inherit as if the user had set it: KERNEL_ENV)
thread_env = runpy.run_path(str(ROOT / "pagedlab" / "model" / "threads.py"))["thread_env"]
#: pagedlab's sources the browser never imports: they need torch, numpy, matplotlib or
#: ipywidgets (the live core's import-linter contract in pyproject.toml keeps the rest pure).
NOT_SHIPPED = (
    "attention",
    "model",
    "engine",
    "explorers/figures.py",
    "explorers/site/static.py",
    "explorers/site/markup.py",
)
ENABLE_STATIC = "import pagedlab.explorers.site.static\npagedlab.explorers.site.static.enable()"
NBVAL_MARKER = re.compile(r"^# NBVAL_[A-Z_]+[ \t]*\n?", re.MULTILINE)  # for the tests only
CHECK = re.compile(r'EXERCISES\["(\w+)"\]\.check\(')  # a cell whose result is a check's
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
KERNEL_ENV = dict(os.environ)  # a worker's environment before it imports pagedlab


class NotRebuilt(Exception):
    """An explorer output whose explorer its settings alone do not rebuild (e.g. built from
    a sweep or a model the notebook computed): its page is built by running the notebook."""


def install_assets() -> None:
    """``npm ci`` the pinned browser assets when node_modules is missing or older than the lock."""
    lock, marker = ROOT / "package-lock.json", ROOT / "node_modules" / ".package-lock.json"
    if (
        MANAGER.is_dir()
        and PYODIDE.is_dir()
        and marker.is_file()
        and marker.stat().st_mtime >= lock.stat().st_mtime
    ):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("build_site: npm is needed once, to fetch the widget manager and Pyodide")
    # --ignore-scripts: nothing from the registry runs here; we only copy files out of it.
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=ROOT, check=True)


def copy_assets(out: Path) -> None:
    """require.js and the widget manager (embed-amd.js and its fonts) into ``out/_static``."""
    static = out / "_static"
    unused = shutil.ignore_patterns("*.map", "embed.js", "libembed-amd.js")
    shutil.copytree(MANAGER, static / "html-manager", ignore=unused)
    shutil.copy(REQUIRE, static / "require.js")
    (static / "pyodide").mkdir()
    for name in PYODIDE_FILES:
        shutil.copy(PYODIDE / name, static / "pyodide" / name)
    (static / "pyodide" / "NOTICE.txt").write_text(
        "Pyodide (npm package pyodide, see package.json here) is MPL-2.0: "
        "https://mozilla.org/MPL/2.0/ . python_stdlib.zip is CPython's standard library, "
        "under the Python Software Foundation License.\n"
    )
    shutil.copytree(TEMPLATE / "live", static / "live")
    write_sources(static / "live" / "sources.json")


def write_sources(path: Path) -> None:
    """pagedlab's pure-Python sources as one JSON object, file path -> text, for the worker."""
    package = ROOT / "pagedlab"
    sources = {}
    for file in sorted(package.rglob("*.py")):
        relative = file.relative_to(package)
        widget = relative.parent.as_posix() == "explorers" and relative.name != "__init__.py"
        if widget or relative.parts[0] in NOT_SHIPPED or relative.as_posix() in NOT_SHIPPED:
            continue
        sources[f"pagedlab/{relative.as_posix()}"] = file.read_text()
    path.write_text(json.dumps(sources))


def block_size_explorer(literals: dict[str, Any], **settings: Any) -> Any:
    """Notebook 07's BlockSizeExplorer: the block-size sweep of its hour of ShareGPT."""
    from pagedlab.explorers.waste import BlockSizeExplorer
    from pagedlab.ground import paper
    from pagedlab.simulate import block_size_sweep, make_trace

    trace = make_trace(rate=paper.FIG13_RATE, duration_s=3600.0, workload="sharegpt", seed=0)
    return BlockSizeExplorer(block_size_sweep(trace), value=settings.pop("block_size"), **settings)


def engine_explorer(literals: dict[str, Any], **settings: Any) -> Any:
    """Notebook 10's EngineExplorer: its QUESTIONS, NEW new tokens each, on 10 blocks of 16."""
    import torch

    from pagedlab.explorers.engine import EngineExplorer
    from pagedlab.model import generate_contiguous, pretrained
    from pagedlab.model.smollm2 import chat_prompt
    from pagedlab.model.threads import cpu_threads

    torch.set_num_threads(cpu_threads())  # as the notebook does
    model, tokenizer = pretrained()
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    questions, new = literals["QUESTIONS"], literals["NEW"]
    prompts = [chat_prompt(tokenizer, q) for q in questions]
    oracle = [generate_contiguous(model, p, new) for p in prompts]

    def answer_text(ids: list[int]) -> str:
        return str(tokenizer.decode(ids[: ids.index(eos)] if eos in ids else ids))

    explorer = EngineExplorer(model, prompts, answer_text, labels=questions, max_new_tokens=new,
                              num_blocks=10, block_size=16, expected=oracle)  # fmt: skip
    explorer.set(**settings)
    return explorer


#: How to rebuild an explorer whose settings do not carry what it shows (a sweep, a model):
#: class name -> (the notebook's literal assignments, the shown settings) -> explorer. Each
#: repeats only what its notebook computes for the explorer; one that drifts from the notebook
#: draws another picture or readout, and the page falls back to running the notebook.
RECIPES = {"BlockSizeExplorer": block_size_explorer, "EngineExplorer": engine_explorer}


def literal_assignments(notebook: nbformat.NotebookNode) -> dict[str, Any]:
    """``NAME = literal`` at the top level of ``notebook``'s code cells (the last one wins)."""
    found: dict[str, Any] = {}
    for cell in notebook.cells:
        try:
            body = ast.parse(cell.source).body if cell.cell_type == "code" else []
        except SyntaxError:
            continue
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                try:
                    if isinstance(target, ast.Name):
                        found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return found


def committed_readout(page: dict[str, Any], data: dict[str, Any]) -> str | None:
    """The readout (the explorer box's last child, an HTML) the committed widget state holds
    for the explorer ``data`` shows; None if that state is not saved."""
    state = page["committed"]
    box = state.get(data.get(WIDGET_VIEW, {}).get("model_id"), {}).get("state", {})
    children = box.get("children") or [""]
    readout = state.get(str(children[-1]).removeprefix("IPY_MODEL_"), {})
    return readout.get("state", {}).get("value")


def rebuilt_explorer(data: dict[str, Any], page: dict[str, Any]) -> Any:
    """The explorer a committed output shows (None if it shows none), rebuilt from the settings
    its ``text/plain`` gives (``Name(control=value, ...)``), through its recipe if it has one;
    :class:`NotRebuilt` unless the rebuilt one has that repr and draws the same picture (its
    ``image/png``, byte for byte) and, if rebuilt by a recipe, the committed readout."""
    from pagedlab.explorers.site.registry import REGISTRY

    shown = str(data.get("text/plain", ""))
    modules = {entry.name: entry.module for entry in REGISTRY}
    try:
        call = ast.parse(shown, mode="eval").body
    except SyntaxError:
        return None
    if WIDGET_VIEW not in data or not isinstance(call, ast.Call):
        return None
    if not isinstance(call.func, ast.Name) or call.func.id not in modules:
        return None
    module = importlib.import_module(f"pagedlab.explorers.{modules[call.func.id]}")
    try:
        settings = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        recipe = RECIPES.get(call.func.id)
        if recipe is not None:
            explorer = recipe(page["literals"], *call.args, **settings)
        else:
            explorer = getattr(module, call.func.id)(*call.args, **settings)
    except (TypeError, ValueError, KeyError) as error:
        raise NotRebuilt(f"{shown}: {error!r}") from None
    picture = explorer._repr_mimebundle_().get("image/png", b"")
    if isinstance(picture, bytes):
        picture = base64.b64encode(picture).decode()
    if repr(explorer) != shown or picture != str(data.get("image/png", "")).replace("\n", ""):
        raise NotRebuilt(f"{shown} rebuilt as {explorer!r}, drawing another picture")
    if recipe is not None and explorer.readout.value != committed_readout(page, data):
        raise NotRebuilt(f"{shown} rebuilt by its recipe, writing another readout")
    return explorer


#: The static views this worker drew, by their explorer's repr: (view spec, text, widget
#: states). An explorer is rebuilt from its repr alone, so an equal repr draws equal frames:
#: notebooks 00, 02 and 03 show the same AllocationExplorer, drawn once.
DRAWN: dict[str, tuple[dict, str, dict]] = {}


def drawn(explorer: Any, declared: Any) -> tuple[dict, str, dict]:
    """``explorer``'s static view over ``declared``: its spec, text and widgets' states."""
    import ipywidgets as widgets

    from pagedlab.explorers.site import static

    if repr(explorer) not in DRAWN:
        before = set(widgets.Widget.get_manager_state()["state"])
        view = static.static_view(explorer, *declared)
        states = widgets.Widget.get_manager_state()["state"]
        new = {key: state for key, state in states.items() if key not in before}
        DRAWN[repr(explorer)] = (view.get_view_spec(), repr(view), new)
    return DRAWN[repr(explorer)]


def static_outputs(output: Any, source: str, page: dict[str, Any]) -> list[Any]:
    """What the page shows for one committed ``output`` of a cell with ``source``; ``page``
    collects the widget states the page needs and the exercises it shows ("checked")."""
    from pagedlab.explorers.site import markup, static

    data = output.get("data", {})
    explorer = rebuilt_explorer(data, page)
    declared = static.declared_axes(type(explorer)) if explorer is not None else None
    if declared is not None:
        spec, text, states = drawn(explorer, declared)
        page["states"].update(states)
        shown = [nbformat.v4.new_output("display_data", {WIDGET_VIEW: spec, "text/plain": text})]
        panel = markup.explorer_panel(explorer)
        if panel:
            shown.append(nbformat.v4.new_output("display_data", {"text/html": panel}))
        return shown
    check = CHECK.search(source.strip().splitlines()[-1]) if source.strip() else None
    first = check is not None and check[1] not in page["checked"]  # its live exercise, once
    if first and output.output_type == "execute_result" and "text/html" in data:
        page["checked"].add(check[1])
        data["text/html"] = str(data["text/html"]) + markup.exercise_block(check[1])
    return [output]


def static_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as committed with static explorers and live exercises (see the module doc);
    run again with static explorers where one explorer cannot be rebuilt."""
    import ipywidgets as widgets

    notebook = nbformat.read(path, as_version=4)
    widgets.Widget.close_all()  # the last page's explorers: their views are in DRAWN
    committed = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    page: dict[str, Any] = {"states": {}, "checked": set(), "committed": committed}
    page["literals"] = literal_assignments(notebook)
    try:
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = [
                    new for old in cell.outputs for new in static_outputs(old, cell.source, page)
                ]
    except NotRebuilt as why:
        print(f"{path.name}: run again, {why}", flush=True)
        notebook = execute_static(path)
    else:
        saved = notebook.metadata.setdefault("widgets", {}).setdefault(WIDGET_STATE, {})
        saved.setdefault("version_major", 2)
        saved.setdefault("version_minor", 0)
        saved.setdefault("state", {}).update(page["states"])
    for cell in notebook.cells:  # nbval's markers are not for readers
        if cell.cell_type == "code":
            cell.source = NBVAL_MARKER.sub("", cell.source)
    return notebook


def execute_static(path: Path) -> nbformat.NotebookNode:
    """``path`` run top to bottom with static explorers; the enabling cell removed again."""
    notebook = nbformat.read(path, as_version=4)
    enable = nbformat.v4.new_code_cell(ENABLE_STATIC)
    notebook.cells.insert(0, enable)
    client = NotebookClient(
        notebook,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    client.execute(env=KERNEL_ENV)
    notebook.cells.remove(enable)
    return notebook


def export_page(notebook: nbformat.NotebookNode, title: str) -> str:
    exporter = HTMLExporter(
        template_name="pagedlab",
        extra_template_basedirs=[str(TEMPLATE)],
        require_js_url="_static/require.js",
        widget_renderer_url="_static/html-manager/embed-amd.js",
        mathjax_url="",
    )
    notebook.metadata["title"] = title
    body, _resources = exporter.from_notebook_node(notebook)
    return body


def notebook_rows(readme: Path) -> dict[str, tuple[str, str, str]]:
    """README table rows: notebook number -> (title, line, picture path)."""
    rows = {}
    pattern = re.compile(
        r"^\| \*\*(\d+) · ([^*]+)\*\*<br>(.*?) \| <img src=\"([^\"]+)\"", re.MULTILINE
    )
    for number, title, line, picture in pattern.findall(readme.read_text()):
        rows[f"{int(number):02d}"] = (title.strip(), line.strip(), picture)
    return rows


def write_index(out: Path, pages: list[tuple[str, str]]) -> None:
    rows = notebook_rows(ROOT / "README.md")
    items = []
    for number, page in pages:
        title, line, picture = rows.get(number, (page, "", ""))
        image = ""
        if picture and (ROOT / picture).is_file():
            (out / picture).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / picture, out / picture)
            image = f'<img src="{html.escape(picture)}" alt="" width="380">'
        line_html = re.sub(r"`([^`]+)`", r"<code>\1</code>", line)  # README's markdown code spans
        items.append(
            f'<li><a href="{page}"><b>{number} · {html.escape(title)}</b></a>'
            f"<p>{line_html}</p>{image}</li>"
        )
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>pagedlab: learn PagedAttention</title><style>"
        "body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "li{margin:1.5em 0;list-style:none}img{border:1px solid #ddd}</style></head><body>"
        "<h1>pagedlab: learn PagedAttention by moving sliders</h1>"
        "<p>Every page shows pictures drawn in advance at once. Served over http (any static "
        "host, or <code>python -m http.server</code> in this folder), each page then starts "
        "Python in the browser: the allocation, sharing and prefix-cache explorers take any "
        "value and run the real pagedlab, and the exercises whose graders need no torch are "
        "graded in the page. Run the notebooks in JupyterLab to call the Triton kernel.</p>"
        f"<ul>{''.join(items)}</ul></body></html>\n"
    )


def notebook_imports(path: Path) -> str:
    """The notebook's guarded imports, as instructor mode runs them before its exercise cells:
    the page's live grade runs them before the learner's code (live.js, the grade message)."""
    from pagedlab.exercises import EXERCISES
    from pagedlab.grade.cells import entry_of, notebook_imports

    return notebook_imports(path, {entry_of(exercise) for exercise in EXERCISES.values()})


def build_page(path: Path, out: Path) -> tuple[str, str, str]:
    """Write ``path``'s static page into ``out``: (number, page, timing)."""
    begin = time.perf_counter()
    notebook = static_notebook(path)
    notebook.metadata["pagedlab_imports"] = notebook_imports(path)
    page = path.with_suffix(".html").name
    (out / page).write_text(export_page(notebook, path.stem.replace("_", " ")))
    size = (out / page).stat().st_size / 2**20
    return path.name[:2], page, f"{page}: {size:.1f} MiB in {time.perf_counter() - begin:.1f} s"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "site"))
    jobs = min(2, os.cpu_count() or 1)
    parser.add_argument("--jobs", type=int, default=jobs, help="pages built at once")
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ.update(thread_env())  # one compute thread per worker on a 2-core machine
    start = time.perf_counter()
    install_assets()
    copy_assets(out)
    pages = []
    # Each page is its own file: the pages do not depend on each other's order.
    spawn = multiprocessing.get_context("spawn")  # fresh workers: PYTHONHASHSEED=0 holds there
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=spawn) as pool:
        for number, page, timing in pool.map(build_page, paths, [out] * len(paths)):
            pages.append((number, page))
            print(timing)
    write_index(out, pages)
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
    print(
        f"site: {len(pages)} pages, {total:.1f} MiB, {time.perf_counter() - start:.0f} s -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
