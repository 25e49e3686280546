"""The live site's markup, written into a page while its notebook runs for the static build.

Under each explorer :data:`pagedlab.explorers.site.live.EXPLORERS` can run it adds a live panel,
under each exercise check's output a live exercise; ``site/_static/live/live.js`` switches them on
once Python runs in its Web Worker. The markup is a contract relied on outside the project
(DESIGN.md §2):

- a live explorer: ``[data-explorer=ClassName]`` holding one ``input[data-control=name]`` per
  control, its readout in ``[data-readout]``, the SVG in ``[data-picture]`` and the declared
  Play, if any, a ``button[data-play=axis]``;
- an exercise, once per page under its first check: ``textarea[data-exercise=name]``,
  ``button[data-check=name]``, ``[data-result=name]`` (✓ or ✗ and the grader's message) and
  ``button[data-stop=name]``.

Invariants: each input is written from the control's declaration (an ``unbounded`` Slider has no
max), starts disabled and holds the current value; the first readout and picture are what
:func:`pagedlab.explorers.site.live.render` gives, so a page that never goes live still shows the
truth.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from pagedlab.explorers.site import live
from pagedlab.explorers.views.controls import Choice, Control, Slider


def _input(control: Control, value: object, page_id: str) -> str:
    """One page input for ``control``'s declaration, holding ``value``."""
    name = html.escape(control.name)
    attrs = f'data-control="{name}" name="{name}" disabled'
    if isinstance(control, Slider):
        high = "" if control.unbounded else f' max="{control.max}"'
        field = f'<input type="number" step="1" min="{control.min}"{high} value="{value}" {attrs}>'
    elif isinstance(control, Choice):
        listed = f"pagedlab-{page_id}-{name}"
        choices = "".join(f'<option value="{html.escape(str(v))}">' for v in control.options)
        field = (
            f'<input type="text" list="{listed}" value="{html.escape(str(value))}" {attrs}>'
            f'<datalist id="{listed}">{choices}</datalist>'
        )
    else:  # a toggle: its value is ``checked``
        field = f'<input type="checkbox"{" checked" if value else ""} {attrs}>'
    return f"<label>{html.escape(control.description)} {field}</label>"


def explorer_panel(explorer: Any) -> str:
    """The live panel of ``explorer`` (one of :data:`pagedlab.explorers.site.live.EXPLORERS`), or
    ""."""
    name = type(explorer).__name__
    if name not in live.EXPLORERS:
        return ""
    controls = live.EXPLORERS[name].declaration.controls
    settings = {c.name: explorer.values[c.name] for c in controls}
    first = live.render(name, settings)
    page_id = f"{name}-{id(explorer):x}"  # unique in the page
    inputs = "".join(_input(c, settings[c.name], page_id) for c in controls)
    declared = live.EXPLORERS[name].declaration.play
    if declared is not None:  # the declared Play: the page asks live.play for its values
        inputs = (
            f'<button type="button" data-play="{html.escape(declared.axis)}" '
            f'data-play-mode="{declared.mode}" disabled>play</button> ' + inputs
        )
    return (
        f'<div class="pagedlab-live" data-explorer="{name}">'
        '<p class="pagedlab-live-status" data-live-status>Live version: waiting for Python '
        "to start in this page&hellip;</p>"
        f'<div class="pagedlab-live-controls">{inputs}</div>'
        f'<div class="pagedlab-live-picture" data-picture>{first["svg"]}</div>'
        f'<div class="pagedlab-live-readout" data-readout>{first["readout"]}</div>'
        "</div>"
    )


def exercise_block(name: str) -> str:
    """The live exercise ``name``: its starter code to edit, Check, Stop and the result."""
    from pagedlab.exercises import stub

    code = stub(name)
    rows = min(24, code.count("\n") + 2)
    n = html.escape(name)
    return (
        f'<div class="pagedlab-live-exercise" data-exercise-block="{n}">'
        '<p class="pagedlab-live-status" data-live-status>Try it in this page: waiting for '
        "Python to start&hellip;</p>"
        f'<textarea data-exercise="{n}" rows="{rows}" spellcheck="false" disabled>'
        f"{html.escape(code)}</textarea>"
        f'<div><button type="button" data-check="{n}" disabled>Check</button> '
        f'<button type="button" data-stop="{n}" disabled>Stop</button></div>'
        f'<pre class="pagedlab-live-result" data-result="{n}"></pre>'
        "</div>"
    )


def check_result_printer() -> Callable[[Any], str]:
    """An HTML printer for check results: a check's own HTML output, then, the first time an
    exercise is checked on this page, its live exercise (so each name appears once)."""
    shown: set[str] = set()

    def html_of(result: Any) -> str:
        text = str(result._repr_html_())
        if result.exercise in shown:
            return text
        shown.add(result.exercise)
        return text + exercise_block(result.exercise)

    return html_of
