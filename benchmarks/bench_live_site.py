"""How fast does a live page get going, and how fast does it answer? Figures, in Chromium.

Builds notebook 2's page (or takes a built site: ``--site site``), serves it on 127.0.0.1 and
opens it in Debian's Chromium with a profile on disk, every other host blocked:
- ready: from navigation to ``<body data-live-ready>`` (Pyodide and pagedlab started in the
  Web Worker), on a first visit and again from the browser's disk cache;
- one input change of the allocation explorer: wall time from the input event to the new
  readout in the page, and the worker's own time (render + SVG);
- one grade (``slot_mapping``, the notebook's check, 24 cases);
- the size of the site and of what every page shares (``_static/``).

Run: python benchmarks/bench_live_site.py [--site site]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
PAGE = "02_block_table.html"
LOCAL = ("http://127.0.0.1:", "blob:http://127.0.0.1:", "data:")  # the page's own origin
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
RIGHT = (
    "def my_slot_mapping(blocks, num_tokens, block_size):\n"
    "    return [blocks[p // block_size] * block_size + p % block_size"
    " for p in range(num_tokens)]\n"
)


def size_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def serve(folder: Path) -> str:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", help="a built site (default: build notebook 2's page)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"bench_live_site: {CHROMIUM} not found (apt-get install -y chromium); skipped")
        return 0
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(args.site) if args.site else Path(tmp) / "site"
        if not args.site:
            notebook = str(ROOT / "notebooks" / "02_block_table.ipynb")
            build = [sys.executable, str(ROOT / "scripts" / "build_site.py"), "--out", str(site)]
            subprocess.run([*build, notebook], check=True, capture_output=True)
        base = serve(site)
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path=str(CHROMIUM), headless=True,
                args=ARGS, viewport={"width": 1280, "height": 1000},
            )  # fmt: skip
            off: list[str] = []
            context.on(
                "request",
                lambda r: None if r.url.startswith(LOCAL) else off.append(r.url),
            )
            ready = []
            for visit in ("first", "cached"):
                page = context.new_page()
                begin = time.perf_counter()
                page.goto(f"{base}/{PAGE}")
                page.wait_for_selector("body[data-live-ready]", state="attached", timeout=300_000)
                ready.append(time.perf_counter() - begin)
                if visit == "first":
                    page.close()
            panel = page.locator("[data-explorer=AllocationExplorer]")
            walls, trips, workers = [], [], []
            for length in range(6, 31):
                readout = panel.locator("[data-readout]")
                begin = time.perf_counter()
                panel.locator("input[data-control=length]").fill(str(length))
                page.wait_for_function(
                    "n => document.querySelector('[data-explorer=AllocationExplorer] "
                    "[data-readout]').innerText.includes(`tokens ${n} `)",
                    arg=length,
                )
                walls.append(time.perf_counter() - begin)
                workers.append(float(panel.get_attribute("data-render-ms") or "nan"))
                trips.append(float(panel.get_attribute("data-round-trip-ms") or "nan"))
                assert f"tokens {length}" in readout.inner_text()
            page.locator("textarea[data-exercise=slot_mapping]").fill(RIGHT)
            begin = time.perf_counter()
            page.locator("button[data-check=slot_mapping]").click()
            page.wait_for_function(
                "() => /✓/.test(document.querySelector('[data-result=slot_mapping]').innerText)"
            )
            grade = time.perf_counter() - begin
            context.close()
        sizes = size_mib(site), size_mib(site / "_static")
    print(f"ready (first visit):        {ready[0]:.1f} s")
    print(f"ready (from the disk cache): {ready[1]:.1f} s")
    print(
        f"one input change (median of {len(walls)}): {statistics.median(trips):.1f} ms from the "
        f"input event to the page updated, {statistics.median(workers):.1f} ms of it in the "
        f"worker (render + SVG); {1000 * statistics.median(walls):.0f} ms as Playwright sees it"
    )
    print(f"one grade (slot_mapping, 24 cases): {1000 * grade:.0f} ms")
    print(f"site: {sizes[0]:.1f} MiB, of which _static/ (shared by every page) {sizes[1]:.1f} MiB")
    print(f"requests off loopback: {len(off)} {off}")
    return 0 if not off else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
