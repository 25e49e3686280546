"""The live site in Chromium: Python (Pyodide) in a Web Worker drives the real pagedlab.

Notebook 2's page from the ``site`` fixture (``scripts/build_site.py`` as ``make site`` runs
it; one build shared with test_site.py), served on 127.0.0.1 with every other host blocked.
Served, the page goes live: a setting no frame holds shows the real allocator's blocks, the
declared Play replays the growth, an exercise is graded by the notebook's own check, Stop ends
an endless loop; opened from disk, it keeps its frames and says why it is not live.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest

from .conftest import SHOTS_DIR, Site

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

PAGE = "02_block_table.html"
LIVE_MS = 240_000  # Pyodide starts in 5-15 s on two loaded cores; CI machines may be slower
WRONG = "def my_slot_mapping(blocks, num_tokens, block_size):\n    return list(range(num_tokens))\n"
RIGHT = (
    "def my_slot_mapping(blocks, num_tokens, block_size):\n"
    "    return [blocks[p // block_size] * block_size + p % block_size"
    " for p in range(num_tokens)]\n"
)


class LivePage:
    """A page whose requests off loopback are refused; records every request and page error."""

    def __init__(self, browser: Browser, url: str) -> None:
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.context.route("**/*", self._route)
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page: Page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(url, wait_until="load")

    def _route(self, route) -> None:  # type: ignore[no-untyped-def]
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def wait_live(self) -> None:
        self.page.wait_for_selector("body[data-live-ready]", state="attached", timeout=LIVE_MS)

    def close(self, shot: str) -> None:
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS_DIR / f"live-{shot}.png"))
        self.context.close()

    def assert_stayed_on_loopback(self) -> None:
        assert not self.errors, f"page errors: {self.errors}"
        assert not self.blocked, f"requests left loopback: {self.blocked}"
        off = [u for u in self.requests if urlparse(u).hostname not in ("127.0.0.1", None)]
        assert not off, off
        # the worker's own fetches are seen too: the runtime came from this server
        assert any(u.endswith("/_static/pyodide/pyodide.asm.wasm") for u in self.requests)


def _result(page: Page, name: str) -> str:
    return page.locator(f'[data-result="{name}"]').inner_text()


def _wait_result(page: Page, name: str, pattern: str) -> str:
    page.wait_for_function(
        "([name, pattern]) => new RegExp(pattern).test("
        'document.querySelector(`[data-result="${name}"]`).innerText)',
        arg=[name, pattern],
        timeout=60_000,
    )
    return _result(page, name)


def test_a_setting_no_frame_holds_comes_from_the_real_allocator(
    browser: Browser, site: Site
) -> None:
    from pagedlab.pictures.control_scenes import example_table

    live = LivePage(browser, f"{site.url}/{PAGE}")
    page = live.page
    try:
        assert page.locator(".pagedlab-static").count() >= 1  # the frames are there at once
        live.wait_live()
        panel = page.locator("[data-explorer=AllocationExplorer]")
        assert "Live" in panel.locator("[data-live-status]").inner_text()
        before = panel.locator("[data-picture]").inner_html()
        panel.locator("input[data-control=block_size]").fill("3")  # no frame has block size 3
        panel.locator("input[data-control=length]").fill("11")
        page.wait_for_function(
            "() => /blocks 4, physical \\[/.test(document.querySelector("
            "'[data-explorer=AllocationExplorer] [data-readout]').innerText)",
            timeout=30_000,
        )
        readout = panel.locator("[data-readout]").inner_text()
        expected = example_table(3, 11).table.blocks  # the allocator, in this Python
        assert re.search(rf"blocks 4, physical {re.escape(str(expected))}", readout), readout
        assert "tokens 11" in readout and "slots 12" in readout
        picture = panel.locator("[data-picture]").inner_html()
        assert picture != before and "<svg" in picture and "11 tokens, blocks of 3" in picture
        panel.locator("input[data-control=length]").fill("3")
        panel.locator("button[data-play=length]").click()  # the declared Play: replay 1 -> 3
        page.wait_for_function(
            "() => document.querySelector('[data-explorer=AllocationExplorer]')"
            ".dataset.played === '1,2,3'",
            timeout=30_000,
        )
        assert panel.locator("input[data-control=length]").input_value() == "3"
        assert "tokens 3" in panel.locator("[data-readout]").inner_text()
        panel.locator("input[data-control=block_size]").fill("0")  # refused: says why
        page.wait_for_function(
            "() => /not possible/.test(document.querySelector("
            "'[data-explorer=AllocationExplorer] [data-readout]').innerText)"
        )
        assert "block_size must be >= 1, got 0" in panel.locator("[data-readout]").inner_text()
        live.assert_stayed_on_loopback()
    finally:
        live.close("allocation")


def test_an_exercise_is_graded_by_the_notebooks_check_wrong_then_right(
    browser: Browser, site: Site
) -> None:
    from pagedlab.exercises import EXERCISES

    namespace: dict = {}
    exec(WRONG, namespace)
    message = EXERCISES["slot_mapping"].check(namespace["my_slot_mapping"]).message
    live = LivePage(browser, f"{site.url}/{PAGE}")
    page = live.page
    try:
        live.wait_live()
        page.locator("textarea[data-exercise=slot_mapping]").fill(WRONG)
        page.locator("button[data-check=slot_mapping]").click()
        wrong = _wait_result(page, "slot_mapping", "[✓✗]")
        assert wrong.startswith("✗") and wrong == message  # the grader's own message
        assert "hint:" in wrong
        page.locator("textarea[data-exercise=slot_mapping]").fill(RIGHT)
        page.locator("button[data-check=slot_mapping]").click()
        right = _wait_result(page, "slot_mapping", "✓")
        assert right.startswith("✓ slot_mapping: passed")
        live.assert_stayed_on_loopback()
    finally:
        live.close("exercise")


def test_stop_ends_an_endless_loop_and_python_comes_back(browser: Browser, site: Site) -> None:
    live = LivePage(browser, f"{site.url}/{PAGE}")
    page = live.page
    try:
        live.wait_live()
        # Top-level code runs outside the grader's time budget: only Stop can end it.
        page.locator("textarea[data-exercise=slot_mapping]").fill("while True:\n    pass\n")
        page.locator("button[data-check=slot_mapping]").click()
        page.wait_for_timeout(4_000)  # longer than any grader's budget (3 s)
        assert _result(page, "slot_mapping") == "checking…"
        page.locator("button[data-stop=slot_mapping]").click()
        stopped = _wait_result(page, "slot_mapping", "✗")
        assert "stopped" in stopped
        live.wait_live()  # a fresh worker
        page.locator("textarea[data-exercise=slot_mapping]").fill(RIGHT)
        page.locator("button[data-check=slot_mapping]").click()
        assert _wait_result(page, "slot_mapping", "✓").startswith("✓")
        # An explorer asked for a length that takes ages: the bar's Stop ends that too.
        panel = page.locator("[data-explorer=AllocationExplorer]")
        panel.locator("input[data-control=block_size]").fill("10000000")
        panel.locator("input[data-control=length]").fill("100000000")  # 10**8 appends
        bar_stop = page.locator("#pagedlab-live-bar button[data-live-stop]")
        page.wait_for_timeout(2_000)
        assert bar_stop.is_enabled()  # Python is still at it
        bar_stop.click()
        page.wait_for_function(
            "() => /stopped/.test(document.querySelector("
            "'[data-explorer=AllocationExplorer] [data-readout]').innerText)"
        )
        live.wait_live()
        panel.locator("input[data-control=block_size]").fill("3")
        panel.locator("input[data-control=length]").fill("11")
        page.wait_for_function(
            "() => /blocks 4, physical \\[/.test(document.querySelector("
            "'[data-explorer=AllocationExplorer] [data-readout]').innerText)",
            timeout=30_000,
        )
        live.assert_stayed_on_loopback()
    finally:
        live.close("stop")


def test_a_page_opened_from_disk_keeps_its_frames_and_says_why(
    browser: Browser, site: Site
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        page.goto((site.out / PAGE).as_uri(), wait_until="load")
        page.wait_for_selector("body[data-live-unavailable=file]", state="attached")
        status = page.locator("#pagedlab-live-bar").inner_text()
        assert "opened from a file" in status and "http.server" in status
        panel = page.locator("[data-explorer=AllocationExplorer]")
        assert "blocks 2, physical [4, 1]" in panel.locator("[data-readout]").inner_text()
        assert panel.locator("input[data-control=length]").is_disabled()
        page.wait_for_timeout(2_000)
        assert page.locator("body[data-live-ready]").count() == 0
        assert page.locator(".pagedlab-static").count() >= 1  # the frames stay
    finally:
        context.close()
