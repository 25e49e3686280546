"""What the browser tests assert, shared by the real notebooks and the generated probe notebook.

The explorer contract (fixed with the widget engineer): sliders described "block size" and
"length"; an HTML readout with CSS class "pagedlab-readout" that reads, for block size 4,
length 5 and the example layout, "blocks 2", "physical [4, 1]" and
"output 3.000 = (L+1)/2 = 3.000 ✓"; an Image with class "pagedlab-picture" whose src changes
with the sliders; a layout control described "layout" with options "ascending",
"example [4, 1, …]", "shuffled"; an ipywidgets.Play.

Each check moves real controls in the page and asserts on the values the page then shows,
with screenshots before and after for humans. A cell showing an explorer must render its
widget and not also its image/png fallback (one picture, not two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .jlab import (
    choose,
    described,
    problems,
    set_slider,
    settle,
    slider,
    slider_value,
    text,
    wait_for_change,
    wait_until,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator

    from .conftest import OpenNotebook

EXAMPLE = "example [4, 1, …]"
LAYOUTS = ("ascending", EXAMPLE, "shuffled")
OUTPUT_AT_5 = "output 3.000 = (L+1)/2 = 3.000 ✓"


def check_runs_clean(notebook: OpenNotebook) -> None:
    """After Run All: no error output, no broken widget, no page error, sliders visible."""
    # ".widget-slider": a SelectionSlider has it but not the "jupyter-widgets" class
    sliders = notebook.page.locator(".jp-Notebook .widget-slider")
    # widget views render just after the kernel's reply: wait for a slider or a problem
    wait_until(
        lambda: sliders.count() >= 1 or bool(problems(notebook.page)),
        lambda: None,
        "a rendered slider or a problem",
    )
    found = problems(notebook.page)
    assert not found, "\n".join(found)
    assert not notebook.page_errors, "\n".join(notebook.page_errors)
    assert sliders.count() >= 1, "no slider rendered"
    for index in range(sliders.count()):
        assert sliders.nth(index).is_visible(), f"slider {index} is not visible"
    assert sliders.first.locator(".noUi-handle").count() == 1, "slider has no handle"
    check_one_picture_each(notebook)


def check_one_picture_each(notebook: OpenNotebook) -> None:
    """A cell that shows an explorer renders its widget, not also the PNG fallback.

    An explorer's display bundle carries the widget view and its first frame as image/png
    (for static renderers); JupyterLab, with the widget manager, must pick the widget.
    """
    page = notebook.page
    cells = page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".pagedlab-picture"))
    for index in range(cells.count()):
        cell = cells.nth(index)
        png = cell.locator('.jp-OutputArea-output[data-mime-type="image/png"]').count()
        pictures = cell.locator("img.pagedlab-picture").count()
        assert png == 0, f"explorer cell {index}: {png} PNG output(s) beside its widget"
        assert pictures >= 1, f"explorer cell {index}: its .pagedlab-picture has no image"


def explorer(notebook: OpenNotebook, need_layout: bool = False) -> Locator:
    """The (first) output area holding an AllocationExplorer: length slider and readout."""
    page = notebook.page
    area = (
        page.locator(".jp-Notebook .jp-OutputArea-output")
        .filter(has=page.locator(".pagedlab-readout"))
        .filter(has=described(page, ".widget-slider", "length"))
    )
    if need_layout:
        area = area.filter(has=page.locator(".widget-label", has_text="layout"))
    assert area.count() >= 1, "no explorer (length slider + .pagedlab-readout) in the page"
    found = area.last  # the innermost area, when Output widgets nest
    found.scroll_into_view_if_needed()
    return found


def _start_at(scope: Locator, length: int, layout: str | None) -> None:
    """Block size 4, the given layout where there is a layout control, then ``length``."""
    block = slider(scope, "block size")
    if block.count():
        set_slider(block, 4)
    if layout is not None and scope.locator(".widget-label", has_text="layout").count():
        choose(scope, "layout", layout)
    set_slider(slider(scope, "length"), length)
    settle(scope.page)


def check_length_step(notebook: OpenNotebook) -> None:
    """Length 4 -> 5 at block size 4 (example layout): two blocks, physical [4, 1], output 3."""
    scope = explorer(notebook)
    _start_at(scope, 4, EXAMPLE)
    readout, picture = scope.locator(".pagedlab-readout"), scope.locator(".pagedlab-picture")
    assert picture.count() == 1, "no .pagedlab-picture Image in the explorer"
    # the readout and the picture arrive as two messages: wait until both are up to date
    before = wait_until(lambda: "blocks 1" in text(readout), lambda: text(readout), "blocks 1")
    src_before = picture.get_attribute("src")
    notebook.shot("length-4", scope)

    length = slider(scope, "length")
    length.locator(".noUi-handle").focus()
    length.locator(".noUi-handle").press("ArrowRight")
    assert wait_for_change(lambda: slider_value(length), 4, "length slider") == 5
    after = wait_for_change(lambda: text(readout), before, "readout")
    wait_for_change(lambda: picture.get_attribute("src"), src_before, "picture src")
    after = wait_until(lambda: OUTPUT_AT_5 in text(readout), lambda: text(readout), OUTPUT_AT_5)
    notebook.shot("length-5", scope)
    for expected in ("blocks 2", "physical [4, 1]", OUTPUT_AT_5):
        assert expected in after, f"readout lacks {expected!r}: {after!r}"


def check_layouts_keep_output(notebook: OpenNotebook) -> None:
    """Every layout of the same data gives the same output 3 at length 5."""
    scope = explorer(notebook, need_layout=True)
    _start_at(scope, 5, EXAMPLE)
    readout, picture = scope.locator(".pagedlab-readout"), scope.locator(".pagedlab-picture")
    seen = {EXAMPLE: wait_until(lambda: OUTPUT_AT_5 in text(readout), lambda: text(readout), "3")}
    notebook.shot("layout-example", scope)
    for layout in ("ascending", "shuffled", EXAMPLE):
        before, src_before = text(readout), picture.get_attribute("src")
        choose(scope, "layout", layout)
        if seen.get(layout) != before:  # choosing the layout shown already changes nothing
            wait_for_change(lambda: text(readout), before, f"readout after layout {layout!r}")
            wait_for_change(lambda: picture.get_attribute("src"), src_before, "picture src")
        now = wait_until(lambda: OUTPUT_AT_5 in text(readout), lambda: text(readout), "3")
        seen[layout] = now
        notebook.shot(f"layout-{layout.split()[0]}", scope)
        assert OUTPUT_AT_5 in now, f"layout {layout!r}: readout lacks {OUTPUT_AT_5!r}: {now!r}"
    assert seen["ascending"] != seen[EXAMPLE], "the readout does not show the layout at all"


def record_values(handle: Locator) -> None:
    """From now on record every value a slider handle shows, even ones a poll would miss."""
    handle.evaluate(
        """h => { window.__pagedlabValues = [h.getAttribute('aria-valuenow')];
                  new MutationObserver(() => window.__pagedlabValues.push(
                      h.getAttribute('aria-valuenow'))).observe(
                      h, {attributes: true, attributeFilter: ['aria-valuenow']}); }"""
    )


def recorded_values(notebook: OpenNotebook) -> list[int]:
    """The values :func:`record_values` saw, repeats in a row dropped."""
    values = [round(float(v)) for v in notebook.page.evaluate("window.__pagedlabValues")]
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def check_play_steps_by_one(notebook: OpenNotebook, steps: int = 3) -> None:
    """Play moves the length slider one token at a time (every value it passes, in order)."""
    scope = explorer(notebook)
    play = scope.locator(".widget-play")
    assert play.count() >= 1, "no Play widget in the explorer"
    length = slider(scope, "length")
    low = int(float(length.locator(".noUi-handle").get_attribute("aria-valuemin") or 1))
    set_slider(length, low)
    settle(scope.page)  # the kernel syncs the Play's value to the slider: let it catch up
    notebook.shot("play-before", scope)
    handle = length.locator(".noUi-handle")
    record_values(handle)
    button = play.first.locator("button").first
    button.click()
    try:
        notebook.page.wait_for_function(
            f"() => new Set(window.__pagedlabValues).size > {steps}", timeout=30_000
        )
    finally:
        if play.first.locator("i.fa-pause").count():
            button.click()  # pause
    notebook.shot("play-after", scope)
    distinct = recorded_values(notebook)
    steps_seen = [b - a for a, b in zip(distinct, distinct[1:], strict=False)]
    assert distinct[0] == low, f"play started from {distinct[0]}, not {low}: {distinct}"
    assert steps_seen and all(step == 1 for step in steps_seen), f"play moved {distinct}"


def check_play_replays_from_one(notebook: OpenNotebook, length: int = 5) -> None:
    """Play at length 5 (example layout) replays 1, 2, 3, 4, 5 one token a tick, then stops at 5.

    The learner watches 1 -> 5 allocate: the readout ends at "blocks 2", "physical [4, 1]" and
    the output 3, with the slider back where it was.
    """
    scope = explorer(notebook)
    _start_at(scope, length, EXAMPLE)
    readout = scope.locator(".pagedlab-readout")
    wait_until(lambda: OUTPUT_AT_5 in text(readout), lambda: text(readout), OUTPUT_AT_5)
    play = scope.locator(".widget-play")
    assert play.count() >= 1, "no Play widget in the explorer"
    handle = slider(scope, "length").locator(".noUi-handle")
    record_values(handle)
    notebook.shot("replay-before", scope)
    play.first.locator("button").first.click()
    notebook.page.wait_for_function(  # the replay went down to 1 and came back to the end
        f"""() => {{ const v = window.__pagedlabValues.map(Number);
                     return v.includes(1) && v[v.length - 1] === {length}; }}""",
        timeout=30_000,
    )
    wait_until(lambda: play.first.locator("i.fa-pause").count() == 0, lambda: None, "replay end")
    settle(scope.page)
    notebook.shot("replay-after", scope)
    distinct = recorded_values(notebook)
    assert distinct == [length, *range(1, length + 1)], f"the replay showed {distinct}"
    after = wait_until(lambda: OUTPUT_AT_5 in text(readout), lambda: text(readout), OUTPUT_AT_5)
    for expected in ("blocks 2", "physical [4, 1]"):
        assert expected in after, f"after the replay the readout lacks {expected!r}: {after!r}"
