"""What the live site's Web Worker calls: explorers drawn as SVG, exercises graded in the page.

The static site runs this module in the browser (Pyodide, no torch, no numpy): every call
takes and returns plain JSON-able values, so the worker only moves strings across.

- :func:`render` ``(explorer, settings)`` -> the readout and the SVG of that setting
  (:func:`render_view`: the drawing itself), from the same render the notebook's explorer
  runs (:mod:`pagedlab.views`) and the same ``Drawing`` its PNG comes from
  (:mod:`pagedlab.pictures.svg`).
- :func:`grade` ``(exercise, code)`` -> the notebook's own ``EXERCISES[name].check`` on the
  function the code defines, with its message (``✓`` / ``✗`` / ``…`` first).
- :func:`exercise_names`: every exercise whose grader imports here (all of them where torch
  is installed; without it those of :mod:`pagedlab.exercises` that need no torch).

Invariants: neither function raises for any learner input: a refused setting is a readout
that says why (nothing drawn changes), code that does not compile or run is a ``✗`` with the
error. A learner function that loops forever is stopped by the grader's time budget, and one
long C call by the page's Stop button (it ends the worker).
"""

from __future__ import annotations

import html
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from pagedlab.control_scenes import LAYOUTS
from pagedlab.pictures.svg import to_svg
from pagedlab.views.allocation import ALLOCATION_EXPLORER, allocation_view
from pagedlab.views.controls import Control, Declaration
from pagedlab.views.scheduler import SCHEDULER_EXPLORER, scheduler_view
from pagedlab.views.sharing import PREFIX_EXPLORER, SHARING_EXPLORER, prefix_view, sharing_view
from pagedlab.views.shown import Shown


def _allocation(block_size: object, length: object, layout: object = LAYOUTS[1]) -> Shown:
    shown = allocation_view(block_size, length, layout)  # type: ignore[arg-type]
    t = shown.state.table
    # The outside checks' form, "blocks N, physical [...]"; the kernel's line needs torch.
    readout = shown.readout.replace(
        f"blocks {len(t.blocks)} · physical", f"blocks {len(t.blocks)}, physical", 1
    )
    readout += (
        "<br><i>live in this page: the real allocator and block table; the Triton kernel's "
        "output needs torch (run the notebook in JupyterLab)</i>"
    )
    return shown._replace(readout=readout)


_LIVE: tuple[tuple[Declaration, Callable[..., Shown]], ...] = (
    (ALLOCATION_EXPLORER, _allocation),
    (SHARING_EXPLORER, sharing_view),
    (PREFIX_EXPLORER, prefix_view),
    (SCHEDULER_EXPLORER, scheduler_view),
)
#: Live explorers: class name -> (its render, its controls), read from the declaration the
#: notebook's explorer class holds (``Explorer.DECLARATION``): one declaration, both sides.
EXPLORERS: dict[str, tuple[Callable[..., Shown], tuple[Control, ...]]] = {
    declared.name: (render, declared.controls) for declared, render in _LIVE
}


def _value(text: object) -> object:
    """A control's value from the page: an int where the text is one, else the text."""
    if isinstance(text, str):
        stripped = text.strip()
        if stripped.lstrip("-").isdigit():
            return int(stripped)
        return stripped
    return text


def render_view(explorer: str, settings: Mapping[str, object]) -> Shown:
    """What ``explorer`` shows at ``settings``; raises ValueError/TypeError naming a bad one."""
    if explorer not in EXPLORERS:
        raise ValueError(f"no live explorer {explorer!r} (live: {', '.join(EXPLORERS)})")
    view, controls = EXPLORERS[explorer]
    names = [control.name for control in controls]
    unknown = sorted(set(settings) - set(names))
    if unknown:
        raise ValueError(f"unknown controls {unknown}; controls: {names}")
    return view(**{name: _value(value) for name, value in settings.items()})


def render(explorer: str, settings: Mapping[str, object]) -> dict[str, Any]:
    """``{"ok", "readout", "svg"}`` of ``explorer`` at ``settings`` (control name -> value).

    A setting refused gives ``ok`` False, a readout naming the value and no svg (the page
    keeps the picture it has).
    """
    try:
        shown = render_view(explorer, settings)
    except (TypeError, ValueError) as refused:
        why = html.escape(str(refused))
        return {"ok": False, "readout": f"<b>✗ not possible:</b> {why}", "svg": ""}
    return {"ok": True, "readout": shown.readout, "svg": to_svg(shown.drawing, title=explorer)}


def exercise_names() -> list[str]:
    """Every exercise this Python can grade, in the notebooks' order."""
    from pagedlab.exercises import EXERCISES

    return list(EXERCISES)


def learner_function(name: str, namespace: Mapping[str, object], defined: list[str]) -> object:
    """The function the learner's code defines for exercise ``name``: ``my_<name>`` when it
    exists, else the last function (or class) the code defined, else None."""
    if f"my_{name}" in namespace:
        return namespace[f"my_{name}"]
    for key in reversed(defined):
        value = namespace[key]
        if callable(value) and getattr(value, "__module__", None) == "__learner__":
            return value
    return None


def _failed(message: str) -> dict[str, Any]:
    return {"status": "failed", "message": message}


def grade(name: str, code: str) -> dict[str, Any]:
    """``{"status", "message"}``: the exercise's own check of the function ``code`` defines."""
    from pagedlab.exercises import EXERCISES

    if name not in EXERCISES:
        return _failed(f"✗ {name}: not gradable in this page (it needs torch)")
    namespace: dict[str, Any] = {"__name__": "__learner__"}
    try:
        exec(compile(code, f"<{name}>", "exec"), namespace)  # the learner's own cell, here
    except BaseException as error:  # a syntax error or a top-level raise: the learner's to fix
        lines = traceback.format_exception_only(type(error), error)
        return _failed(f"✗ {name}: the code did not run\n" + "".join(lines).rstrip())
    defined = [key for key in namespace if key not in ("__name__", "__builtins__")]
    fn = learner_function(name, namespace, defined)
    if fn is None:
        return _failed(f"✗ {name}: the code defines no function (write def my_{name}(...))")
    result = EXERCISES[name].check(fn)
    return {"status": result.status, "message": result.message}
