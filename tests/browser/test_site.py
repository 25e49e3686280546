"""The static site in a real browser, with no kernel and every host but loopback blocked.

One build of the whole site (the ``site`` fixture: ``scripts/build_site.py`` as ``make site``
runs it, shared with test_live_site.py), served on 127.0.0.1. Every page must load without a
widget error, a page error or a request that leaves loopback; every static explorer must
answer its sliders (and Play) in the page itself, showing the frame that setting should show.
"""

from __future__ import annotations

import re
import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest

from .conftest import REPO, SHOTS_DIR, Site

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
STATIC = ".pagedlab-static"
VISIBLE_READOUT = f"{STATIC} .pagedlab-readout:visible"


class OfflinePage:
    """A page whose requests off loopback are refused and recorded, with its page errors."""

    def __init__(self, browser: Browser, url: str) -> None:
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.context.route("**/*", self._route)
        self.page: Page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(url, wait_until="load")

    def _route(self, route) -> None:  # type: ignore[no-untyped-def]
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def close(self) -> None:
        self.context.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_page_loads_offline_and_its_explorers_move(browser: Browser, site: Site, name: str) -> None:
    page_name = name.replace(".ipynb", ".html")
    offline = OfflinePage(browser, f"{site.url}/{page_name}")
    page = offline.page
    try:
        page.wait_for_selector(".jp-Notebook", timeout=30_000)
        page.wait_for_timeout(500)  # the manager renders every saved view after load
        explorers = page.locator(STATIC)
        if explorers.count():
            page.wait_for_selector(VISIBLE_READOUT, timeout=30_000)
        assert page.get_by_text("Error displaying widget").count() == 0
        for i in range(explorers.count()):
            explorer = explorers.nth(i)
            handle = explorer.locator(".widget-slider .noUi-handle")
            buttons = explorer.locator(".widget-toggle-buttons button")
            assert handle.count() + buttons.count() >= 1, (
                f"{page_name}: explorer {i} has no control"
            )
            before = _frame_of(explorer)
            if handle.count():  # the last slider: the one Play animates, where there is one
                handle.last.focus()
                page.keyboard.press("ArrowRight")
                page.wait_for_timeout(200)
                if _frame_of(explorer) == before:  # it was at the end: go the other way
                    page.keyboard.press("ArrowLeft")
                    page.keyboard.press("ArrowLeft")
            else:
                buttons.nth(1).click()
            page.wait_for_timeout(200)
            after = _frame_of(explorer)
            assert after[0] != before[0], f"{page_name}: explorer {i}'s readout did not change"
            assert after[1] != before[1], f"{page_name}: explorer {i}'s picture did not change"
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS_DIR / f"site-{page_name}.png"))
        assert not offline.errors, f"{page_name}: page errors {offline.errors}"
        assert not offline.blocked, f"{page_name}: requests left loopback: {offline.blocked}"
    finally:
        offline.close()


def _frame_of(explorer) -> tuple[str, str | None]:  # type: ignore[no-untyped-def]
    """The visible frame's readout text and picture (a data: URL) inside ``explorer``."""
    readout = explorer.locator(".pagedlab-readout:visible").first.inner_text()
    return readout, explorer.locator(".pagedlab-picture:visible").first.get_attribute("src")


def test_allocation_explorer_static_frames_are_the_right_ones(browser: Browser, site: Site) -> None:
    """Notebook 2: length 5 at block size 4 says 2 blocks and output 3; Play replays 1 -> 5."""
    offline = OfflinePage(browser, f"{site.url}/02_block_table.html")
    page = offline.page
    try:
        page.wait_for_selector(VISIBLE_READOUT, timeout=30_000)
        explorer = page.locator(STATIC).first
        readout = _frame_of(explorer)[0]
        assert re.search(r"blocks 2 · physical \[4, 1\]", readout), readout
        assert "output 3.000" in readout, readout
        length = page.locator(f"{STATIC} .widget-slider .noUi-handle").nth(1)
        assert length.get_attribute("aria-valuenow") == "4.0"  # index of length 5 in 1..32
        length.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(200)
        readout_6, _ = _frame_of(explorer)
        assert "tokens 6" in readout_6 and "blocks 2" in readout_6, readout_6
        page.locator(f"{STATIC} .pagedlab-static-play button").first.click()  # Play: replay
        for tokens in (1, 5):  # from 1 token up to the length the page started at, 5
            page.wait_for_function(
                "() => [...document.querySelectorAll('.pagedlab-static .pagedlab-readout')]"
                f".some(e => e.offsetParent !== null && /tokens {tokens} ·/.test(e.innerText))",
                timeout=10_000,
            )
        page.wait_for_timeout(1_000)  # the replay stops at 5 (a next tick would show 6)
        assert _frame_of(explorer)[0] == readout  # length 5 again (a blob src is re-made)
        assert not offline.errors and not offline.blocked
    finally:
        offline.close()


def test_site_has_an_index_linking_every_page(site: Site) -> None:
    with urllib.request.urlopen(f"{site.url}/index.html") as response:  # loopback only
        text = response.read().decode()
    for name in NOTEBOOKS:
        assert f'href="{name.replace(".ipynb", ".html")}"' in text, name


def test_the_site_stays_under_44_mib(site: Site) -> None:
    assert site.size_mib < 44, f"the site is {site.size_mib:.1f} MiB; keep it under 44"  # 40.4
