"""Fixtures for the browser tests: one JupyterLab server and one Chromium for the whole session.

The server serves a temporary COPY of notebooks/ (so a run never rewrites them) from a
temporary folder that also holds its settings, homes and log. Only one notebook page (and so
one kernel) is alive at a time; tests on the same notebook share it, and the collection hook
below puts them next to each other. Screenshots for humans go to build/browser/; a failing
test adds a screenshot and the server log there and the log's tail to its report.

Where /usr/bin/chromium or playwright is missing the tests skip with the reason, unless
PAGEDLAB_REQUIRE_BROWSER=1 (CI), where they fail.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from .jlab import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_LOAD_MS,
    WIDGET_MS,
    LabServer,
    open_notebook,
    private_env,
    run_all,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO / "notebooks"
SHOTS_DIR = REPO / "build" / "browser"


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found (apt-get install -y chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    reason = missing_browser()
    if reason is not None:
        if os.environ.get("PAGEDLAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PAGEDLAB_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    env: dict[str, str | float | bool] = dict(private_env(tmp_path_factory.mktemp("chromium")))
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, env=env
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    state = tmp_path_factory.mktemp("jupyterlab")
    root = state / "root"
    root.mkdir()
    if NOTEBOOKS_DIR.is_dir():
        shutil.copytree(
            NOTEBOOKS_DIR, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints")
        )
    server = LabServer.start(root, state)
    try:
        yield server
    finally:
        try:
            server.shutdown_kernels()
        finally:
            server.stop()
            SHOTS_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(server.log_path, SHOTS_DIR / "jupyter-server.log")


class Site(NamedTuple):
    """The static site built by ``scripts/build_site.py`` and served on 127.0.0.1."""

    out: Path
    url: str
    size_mib: float


@pytest.fixture(scope="session")  # one build for test_site.py and test_live_site.py
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """The site built once, as ``make site`` builds it: every notebook's page where a test of
    test_site.py runs, else notebook 2's alone (all that test_live_site.py opens)."""
    whole = any(item.path.name == "test_site.py" for item in request.session.items)
    pages = [] if whole else [str(NOTEBOOKS_DIR / "02_block_table.ipynb")]
    out = tmp_path_factory.mktemp("site") / "site"
    start = time.perf_counter()
    build = subprocess.run(
        # one notebook at a time: the other test worker already has the second core
        [sys.executable, str(REPO / "scripts" / "build_site.py"), "--out", str(out), "--jobs",
         "1", *pages],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, timeout=1800,
    )  # fmt: skip
    assert build.returncode == 0, f"build_site failed:\n{build.stdout}\n{build.stderr[-4000:]}"
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
    print(f"site: {size:.1f} MiB built in {time.perf_counter() - start:.0f} s\n{build.stdout}")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Site(out, f"http://127.0.0.1:{server.server_port}", size)
    finally:
        server.shutdown()


@dataclass
class OpenNotebook:
    """A notebook page after "Run All Cells" settled, with the page errors seen so far."""

    path: str
    page: Page
    page_errors: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        return _safe(Path(self.path).stem)

    def shot(self, step: str, target: Any = None) -> Path:
        """Save a screenshot of ``target`` (a locator) or the page to build/browser/."""
        path = SHOTS_DIR / f"{self.stem}-{_safe(step)}.png"
        (target or self.page).screenshot(path=str(path), timeout=WIDGET_MS)
        return path


class NotebookPages:
    """Opens notebooks on demand, one at a time; a notebook that failed to run fails fast."""

    def __init__(self, browser: Browser, server: LabServer) -> None:
        self.server = server
        # one context for the session: its cache makes every page after the first load faster
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.current: OpenNotebook | None = None
        self.failed: dict[str, str] = {}

    def open(self, path: str) -> OpenNotebook:
        if path in self.failed:
            pytest.fail(f"{path} did not run in the browser: {self.failed[path]}", pytrace=False)
        if self.current is not None and self.current.path == path:
            return self.current
        self.close()
        page = self.context.new_page()
        page.set_default_timeout(WIDGET_MS)
        page.set_default_navigation_timeout(PAGE_LOAD_MS)
        notebook = OpenNotebook(path, page)
        page.on("pageerror", lambda error: notebook.page_errors.append(str(error)))
        self.current = notebook
        try:
            open_notebook(page, self.server, path)
            run_all(page)
        except Exception as error:
            self.failed[path] = f"{type(error).__name__}: {error}"
            raise
        notebook.shot("after-run-all")
        return notebook

    def close(self) -> None:
        if self.current is not None:
            self.current.page.close()
            self.current = None
            self.server.shutdown_kernels()


@pytest.fixture(scope="session")
def notebooks(browser: Browser, lab: LabServer) -> Iterator[NotebookPages]:
    if SHOTS_DIR.is_dir():
        for old in [*SHOTS_DIR.glob("*.png"), *SHOTS_DIR.glob("*.log")]:
            old.unlink()
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    pages = NotebookPages(browser, lab)
    try:
        yield pages
    finally:
        pages.close()
        pages.context.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the browser tests of one notebook (parameter ``name``) back to back so they share
    one page and kernel, its "runs clean" check first, on the page as Run All left it."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in Path(str(item.path)).parents]

    def key(index: int) -> tuple[str, bool, int]:
        item = items[index]
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("name", "") if callspec is not None else ""
        later = getattr(item, "originalname", "") != "test_notebook_runs_clean_in_jupyterlab"
        return (str(name), later, index)

    ordered = [items[i] for i in sorted(slots, key=key)]
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On a failed browser test: a screenshot and the server log in build/browser/."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    pages, server = funcargs.get("notebooks"), funcargs.get("lab")
    if pages is None and server is None:
        return
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    name = _safe(item.name)
    if pages is not None and pages.current is not None:
        shot = SHOTS_DIR / f"FAILED-{name}.png"
        try:
            pages.current.page.screenshot(path=str(shot), timeout=WIDGET_MS)
            report.sections.append(("browser", f"screenshot: {shot}"))
        except Exception as error:  # the page may be gone; the log still helps
            report.sections.append(("browser", f"no screenshot: {error}"))
        if pages.current.page_errors:
            report.sections.append(("page errors", "\n".join(pages.current.page_errors)))
    if server is not None:
        log = SHOTS_DIR / f"FAILED-{name}-server.log"
        shutil.copyfile(server.log_path, log)
        report.sections.append((f"jupyter server log (tail; all in {log})", server.log_tail()))
