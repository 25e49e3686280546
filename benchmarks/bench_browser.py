"""Key press to new picture in Chromium, for every explorer (JupyterLab, a real kernel).

Uses the browser tests' harness (tests/browser/jlab.py): a private JupyterLab server and
Debian's Chromium. A generated notebook (never committed) shows each explorer; for each,
the first slider's handle gets ``PRESSES`` arrow-key presses (right, then left, ...), one at
a time, each after the kernel has settled. In the page, a keydown listener and a
MutationObserver on the explorer's ``.pagedlab-picture`` image time, with the page's own
clock, the key press and the moment the image's ``src`` changes: the latency a learner sees.
Printed: median and p90 per explorer (a press that draws the same picture is not timed).

Run: ``python benchmarks/bench_browser.py`` (needs /usr/bin/chromium and playwright).
Target: <= ~80 ms median.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from browser.jlab import (  # noqa: E402  (the harness lives with the browser tests)
    CHROMIUM,
    CHROMIUM_ARGS,
    LabServer,
    open_notebook,
    private_env,
    run_all,
    settle,
)

PRESSES = 12
EXPLORERS = {
    "AllocationExplorer": "from pagedlab.explorers.allocation import AllocationExplorer\n"
    "AllocationExplorer()",
    "KernelExplorer": "from pagedlab.explorers.kernel import KernelExplorer\nKernelExplorer()",
    "SharingExplorer": "from pagedlab.explorers.sharing import SharingExplorer\nSharingExplorer()",
    "PrefixCacheExplorer": "from pagedlab.explorers.sharing import PrefixCacheExplorer\n"
    "PrefixCacheExplorer()",
    "ReservationExplorer": "from pagedlab.explorers.waste import ReservationExplorer\n"
    "ReservationExplorer()",
    "BatchExplorer": "from pagedlab.explorers.batch import BatchExplorer\nBatchExplorer()",
}
# Each cell shows the explorer itself; an explorer class without a display hook (before the
# Explorer base, for the "before" figures) is shown through its ``.widget``.
SHOW = """
hooks = ("_repr_mimebundle_", "_ipython_display_")
explorer if any(hasattr(type(explorer), h) for h in hooks) else explorer.widget"""

SLIDER = {"PrefixCacheExplorer": 1}  # which slider to press (default the first); "shared"
# 8 -> 9 of 10 tokens changes no block, so its picture stays the same

WATCH_JS = """(area, which) => {
  const img = area.querySelector('img.widget-image');
  const handle = area.querySelectorAll('.widget-slider .noUi-handle')[which];
  window.__bench = {keys: [], pictures: []};
  handle.addEventListener('keydown', () => window.__bench.keys.push(performance.now()), true);
  new MutationObserver(() => window.__bench.pictures.push(performance.now()))
    .observe(img, {attributes: true, attributeFilter: ['src']});
}"""


def write_notebook(path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                       "name": "python3"}  # fmt: skip
    notebook.cells = [
        nbformat.v4.new_code_cell(source.replace("\n", "\nexplorer = ", 1) + SHOW)
        for source in EXPLORERS.values()
    ]
    nbformat.write(notebook, path)


def measure(page, index: int, which: int) -> list[float]:  # noqa: ANN001 (playwright Page)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    """Latencies (s) of ``PRESSES`` key presses on explorer ``index``'s first slider."""
    area = page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".jp-OutputArea")
    area.scroll_into_view_if_needed()
    if area.locator("img.widget-image").count() == 0:
        return []
    area.evaluate(WATCH_JS, which)
    handle = area.locator(".widget-slider .noUi-handle").nth(which)
    latencies = []
    for press in range(PRESSES):
        seen = page.evaluate("window.__bench.pictures.length")
        handle.focus()
        handle.press("ArrowRight" if press % 2 == 0 else "ArrowLeft")
        try:
            page.wait_for_function(f"window.__bench.pictures.length > {seen}", timeout=5_000)
        except PlaywrightTimeout:  # this move draws the same picture: no new src to time
            settle(page, quiet_s=0.5)
            continue
        bench = page.evaluate("window.__bench")
        latencies.append((bench["pictures"][seen] - bench["keys"][-1]) / 1000)
        settle(page, quiet_s=0.5)
    return latencies


def main() -> int:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        print(f"{CHROMIUM} not found (apt-get install -y chromium)")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        state, root = Path(tmp), Path(tmp) / "root"
        root.mkdir()
        write_notebook(root / "bench.ipynb")
        server = LabServer.start(root, state)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
                    env=dict(private_env(state / "chromium")),
                )  # fmt: skip
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                start = time.perf_counter()
                open_notebook(page, server, "bench.ipynb")
                run_all(page)
                settle(page)
                ran = time.perf_counter() - start
                print(f"notebook ran in {ran:.1f} s; {PRESSES} key presses per explorer")
                for index, name in enumerate(EXPLORERS):
                    samples = sorted(measure(page, index, SLIDER.get(name, 0)))
                    if not samples:
                        print(f"  {name:20s} no picture")
                        continue
                    p90 = samples[int(0.9 * (len(samples) - 1))]
                    print(f"  {name:20s} median {statistics.median(samples) * 1e3:6.1f} ms  "
                          f"p90 {p90 * 1e3:6.1f} ms")  # fmt: skip
                browser.close()
        finally:
            server.shutdown_kernels()
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
