"""What the live site's Web Worker calls: explorers drawn as SVG, exercises graded in the page.

Runs in the browser (Pyodide, no torch, no numpy): every call takes and returns JSON-able
values. :func:`render` gives the readout and SVG of a setting (from the same views and
``Drawing`` as the notebook), :func:`play` the values the declared Play shows, :func:`grade`
the notebook's own ``EXERCISES[name].check`` on the learner's code (``✓`` / ``✗`` / ``…``
first), :func:`exercise_names` the exercises whose graders import here.

Invariants: no function raises for any learner input: a refused setting is a readout that says
why, code that does not compile or run is a ``✗`` with the error. A learner function that loops
forever is stopped by the grader's time budget, one long C call by the page's Stop button.
"""

from __future__ import annotations

import html
import sys
import traceback
import types
from collections.abc import Mapping
from typing import Any

from pagedlab.explorers.site.registry import REGISTRY, Live
from pagedlab.explorers.views.controls import Play, Slider, axis_values
from pagedlab.explorers.views.shown import View
from pagedlab.ground.checks import Refused, check_int
from pagedlab.pictures.svg import to_svg

#: The live explorers: class name -> its live half (the class's own declaration and the
#: torch-free render), read from :data:`pagedlab.explorers.site.registry.REGISTRY`.
EXPLORERS: dict[str, Live] = {entry.name: entry.live for entry in REGISTRY if entry.live}


def _value(text: object) -> object:
    """A control's value from the page: an int where the text is one, else the text."""
    if not isinstance(text, str):
        return text
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _live(explorer: object) -> Live:
    if not isinstance(explorer, str) or explorer not in EXPLORERS:
        raise ValueError(f"no live explorer {explorer!r} (live: {', '.join(EXPLORERS)})")
    return EXPLORERS[explorer]


def render_view(explorer: str, settings: Mapping[str, object]) -> View:
    """What ``explorer`` shows at ``settings``; raises ValueError/TypeError naming a bad one
    (or a :class:`~pagedlab.ground.checks.Refused` the model raised)."""
    declared, view = _live(explorer)
    names = [control.name for control in declared.controls]
    unknown = sorted(set(settings) - set(names))
    if unknown:
        raise ValueError(f"unknown controls {unknown}; controls: {names}")
    return view(**{name: _value(value) for name, value in settings.items()})


def _refused(error: Exception) -> dict[str, Any]:
    return {"ok": False, "readout": f"<b>✗ not possible:</b> {html.escape(str(error))}", "svg": ""}


def render(explorer: str, settings: Mapping[str, object]) -> dict[str, Any]:
    """``{"ok", "readout", "svg"}`` of ``explorer`` at ``settings`` (control name -> value); a
    refused setting gives ``ok`` False, a readout naming the value and no svg."""
    try:
        shown = render_view(explorer, settings)
    except (TypeError, ValueError, Refused) as refused:
        return _refused(refused)
    return {"ok": True, "readout": shown.readout, "svg": to_svg(shown.picture, title=explorer)}


def play_values(explorer: str, settings: Mapping[str, object]) -> tuple[Play, list[object]]:
    """``explorer``'s declared Play and the values one press of it shows from ``settings``
    (its axis's control's values, :meth:`Play.run`); ValueError/TypeError naming a bad one."""
    declared, _view = _live(explorer)
    if declared.play is None:
        raise ValueError(f"{explorer} declares no Play")
    control = declared.control(declared.play.axis)
    shown = _value(settings.get(control.name, control.default))
    if isinstance(control, Slider) and control.unbounded:  # the page's input has no max
        shown = check_int(shown, control.name, minimum=control.min)
    else:
        shown = control.accept(shown)
    return declared.play, declared.play.run(axis_values(control, shown), shown)


def play(explorer: str, settings: Mapping[str, object]) -> dict[str, Any]:
    """``{"ok", "axis", "values", "interval_ms"}``: the values the declared Play shows (the
    notebook's and the frames' Play); a refused setting: ``ok`` False and a readout."""
    try:
        declared, values = play_values(explorer, settings)
    except (TypeError, ValueError, Refused) as refused:
        return _refused(refused)
    return {"ok": True, "axis": declared.axis, "values": values,
            "interval_ms": declared.interval_ms}  # fmt: skip


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


TOP_LEVEL_S = 5.0  # the budget of a cell's top-level statements (the function's own: its check's)


def grade(name: str, code: str, prelude: str = "") -> dict[str, Any]:
    """``{"status", "message"}``: the exercise's own check of the function ``code`` defines.

    The code runs in a fresh namespace after ``prelude`` (the page's notebook imports, guarded:
    :func:`pagedlab.grade.cells.notebook_imports`), each within TOP_LEVEL_S; whatever the code
    changed in pagedlab's modules or classes (say, the grader's verdict) is put back, and the
    grade is then a ✗ that says so.
    """
    from pagedlab.exercises import EXERCISES
    from pagedlab.grade.sandbox import run_limited

    if name not in EXERCISES:
        return _failed(f"✗ {name}: not gradable in this page (it needs torch)")
    module = types.ModuleType("__learner__")  # a module, as a notebook's __main__ is:
    sys.modules["__learner__"] = module  # @dataclass looks its class's module up there
    namespace: dict[str, Any] = module.__dict__
    try:
        compiled = compile(code, f"<{name}>", "exec")  # the learner's own cell, here
    except BaseException as error:  # a syntax error: the learner's to fix
        lines = traceback.format_exception_only(type(error), error)
        return _failed(f"✗ {name}: the code did not run\n" + "".join(lines).rstrip())
    run_limited(exec, (prelude, namespace), TOP_LEVEL_S)  # imports bind submodules: not put back
    before = _pagedlab_state()
    ran = run_limited(exec, (compiled, namespace), TOP_LEVEL_S)
    changed = _put_back(before)
    if ran.timed_out:
        return _failed(
            f"✗ {name}: the code's top-level statements ran past {TOP_LEVEL_S:g} s (a loop "
            "outside the function?)"
        )
    if ran.raised is not None:
        return _failed(f"✗ {name}: the code did not run\n{ran.raised.kind}: {ran.raised.text}")
    if changed:
        return _failed(f"✗ {name}: the code changed pagedlab itself ({', '.join(changed)})")
    defined = [key for key in namespace if not key.startswith("__")]
    fn = learner_function(name, namespace, defined)
    if fn is None:
        return _failed(f"✗ {name}: the code defines no function (write def my_{name}(...))")
    result = EXERCISES[name].check(fn)
    changed = _put_back(before)
    if changed:
        return _failed(f"✗ {name}: the function changed pagedlab itself ({', '.join(changed)})")
    return {"status": result.status, "message": result.message}


State = dict[str, tuple[Any, dict[str, Any]]]


def _pagedlab_state() -> State:
    """Every pagedlab module's and class's attributes (shallow), and every pagedlab function's
    code and defaults, to put back after a grade."""
    state: State = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("pagedlab") or module is None:
            continue
        todo: list[tuple[str, Any]] = [(module_name, module)]
        while todo:
            where, owner = todo.pop()
            state[where] = (owner, _attributes(owner))
            if type(owner) is types.FunctionType:
                continue
            for key, value in state[where][1].items():
                kind = isinstance(value, type) or type(value) is types.FunctionType
                if not (kind and str(value.__module__).startswith("pagedlab")):
                    continue
                label = f"{value.__module__}.{value.__qualname__}"
                if type(value) is types.FunctionType:
                    todo.append((f"{where}.{key}", value))
                elif label not in state:
                    todo.append((label, value))
    return state


_CODE = ("__code__", "__defaults__", "__kwdefaults__")  # what swaps a function's behaviour


def _attributes(owner: Any) -> dict[str, Any]:
    if type(owner) is types.FunctionType:
        return {name: getattr(owner, name) for name in _CODE}
    return dict(vars(owner))


def _put_back(state: State) -> list[str]:
    """Restore what changed since ``state``; the names of what had changed."""
    changed = []
    for where, (owner, attributes) in state.items():
        now = _attributes(owner)
        for key in set(now) | set(attributes):
            if key in attributes and now.get(key, _MISSING) is attributes[key]:
                continue
            if key in ("__dict__", "__weakref__"):
                continue
            changed.append(f"{where}.{key}")
            if key in attributes:
                setattr(owner, key, attributes[key])
            else:
                delattr(owner, key)
    return sorted(changed)


_MISSING = object()
