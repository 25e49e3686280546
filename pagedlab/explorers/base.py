"""One base for every explorer: controls -> state -> picture + readout, fast and atomic.

A new explorer is its declaration plus one render function::

    class LengthExplorer(Explorer):  # its controls: length, 1 to 64, starting at 5
        DECLARATION = Declaration("LengthExplorer", (Slider("length", 1, 64, "length", 5),),
                                  frames={"length": [1, 2, 4, 8]}, play=Play("length"))

        def render(self, length: int) -> View:
            state = build_state(length)  # the real objects, built fresh (pure)
            return View(state, scene_of(state), readout_of(state))

A subclass provides ``DECLARATION`` (its controls, static frames and Play, declared once; its
registry entry holds the same object) and ``render``; optionally ``finish`` (the slow part),
``bounds``, ``ROWS`` and ``WIDGET_ARGS``. ``Explorer(**initial)`` starts each
control at its default, moved by ``initial``. Attributes: ``.widget`` (the ``VBox``),
``.picture`` (``Image``), ``.readout`` (``HTML``), ``.state``, ``.controls``, ``.values``, each
control's widget by its name, ``.play`` where declared.

Invariants: ``set`` is atomic (validated and computed before anything is assigned); a move
shows state, then picture, then readout, the same way for every explorer (``_on_change``); a
refusal is a :class:`pagedlab.ground.checks.Refused`, the one error the base catches (its message is
the readout); callbacks never display, so strict nbval sees the same outputs in a saved and a
live notebook.
"""

from __future__ import annotations

import asyncio
import base64
import html
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import ipywidgets as widgets
from matplotlib.figure import Figure

from pagedlab.explorers.play import Player
from pagedlab.explorers.views.controls import Control, Declaration, Slider, Toggle
from pagedlab.explorers.views.shown import View as View  # one type: the live renders return it too
from pagedlab.ground.checks import Refused, check_int
from pagedlab.pictures.canvas import Canvas
from pagedlab.pictures.drawing import Drawing
from pagedlab.pictures.png import to_png

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Explorer:
    """Controls -> ``render`` -> picture and readout; see the module docstring."""

    DECLARATION: Declaration | None = None  # controls, static frames, Play: declared once
    CONTROLS: tuple[Control, ...] = ()  # read from DECLARATION (or set before the base's init)
    # One entry per row: a control's name, "play", or an attribute set before the base's
    # __init__ (a button); a tuple of names is an HBox. Default: a row each, the Play first.
    ROWS: tuple[str | tuple[str, ...], ...] = ()
    # Passed to every control's widget (style, layout): Slider -> IntSlider, Choice ->
    # ToggleButtons (SelectionSlider if ``slider``), Toggle -> Checkbox.
    WIDGET_ARGS: Mapping[str, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("DECLARATION")
        if declared is not None:
            if declared.name != cls.__name__:
                raise ValueError(f"{cls.__name__} declares explorer {declared.name!r}")
            cls.CONTROLS = declared.controls

    def __init__(self, **initial: object) -> None:
        self.controls: dict[str, widgets.ValueWidget] = {}
        for declared in self.CONTROLS:
            name = declared.name
            if name in _RESERVED or hasattr(self, name):
                raise ValueError(f"control name {name!r} is taken (the Explorer base or twice)")
            self.controls[name] = _widget(declared, self.WIDGET_ARGS)
            setattr(self, name, self.controls[name])
        self.play: widgets.Play | None = None  # the declared Play's widget, if any
        declaration = type(self).DECLARATION
        if declaration is not None and declaration.play is not None:
            axis = declaration.play.axis
            spec = next(c for c in self.CONTROLS if c.name == axis)
            self.play = Player(declaration.play, spec, self.controls[axis], from_browser).widget
        self.picture = widgets.Image(format="png")
        self.picture.add_class("pagedlab-picture")
        self.readout = widgets.HTML()
        self.readout.add_class("pagedlab-readout")
        self._canvas: Canvas | None = None
        self._holding = False
        self._generation = 0  # counts moves: a deferred finish of an older one is dropped
        self.state: Any = None
        rows = [
            widgets.HBox([getattr(self, n) for n in row]) if isinstance(row, tuple)
            else getattr(self, row)
            for row in self.ROWS
        ] or list(self.controls.values())  # fmt: skip
        named = [n for row in self.ROWS for n in (row if isinstance(row, tuple) else (row,))]
        if self.play is not None and "play" not in named:
            rows.insert(0, self.play)
        self.widget = widgets.VBox([*rows, self.picture, self.readout])
        self.set(**initial)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")

    # --- what a subclass provides ------------------------------------------------------------
    if TYPE_CHECKING:  # each subclass names its own keywords: one per control
        render: Callable[..., View]
    else:

        def render(self, **values: Any) -> View:
            """The view of one setting (required): the state, its picture (a ``Drawing``, drawn
            on the explorer's one reused ``Canvas``; a ``Figure``; or PNG bytes) and the readout
            (HTML). Must not change any widget; should be fast (a few ms)."""
            raise NotImplementedError(f"{type(self).__name__} must define render(**values)")

    def finish(self, view: View) -> View:
        """The slow part of a view (a kernel call), run after the picture is on the page;
        returns the view with its final state and readout. The default has none."""
        return view

    def bounds(self, values: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
        """Ranges of int controls that depend on the other values (inside the declared ones);
        none by default."""
        return {}

    # --- the public surface ------------------------------------------------------------------
    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    @property
    def canvas(self) -> Canvas:
        """The one canvas this explorer's drawings are rendered on, in place."""
        if self._canvas is None:
            self._canvas = Canvas()
        return self._canvas

    def set(self, **settings: object) -> Any:
        """Move controls by name, all at once, with one redraw; returns the new state.

        Atomic: every value is validated and the whole view computed before anything is
        assigned, so on an error nothing has changed: an unknown name is a ``TypeError``
        naming it and listing the valid ones, a wrong kind a ``TypeError``, a wrong value a
        ``ValueError``, both naming the value. Moves made by code are synchronous.
        """
        values = self._validated({**self.values, **settings}, list(settings))
        view = self.finish(self.render(**values))
        self._generation += 1
        self._apply(values)
        self.state = view.state
        self.picture.value = self._encode(view.picture)
        self.readout.value = view.readout
        return self.state

    # --- validation ----------------------------------------------------------------------------
    def _validated(self, values: dict[str, object], names: Sequence[str] = ()) -> dict[str, Any]:
        unknown = [name for name in names if name not in self.controls]
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown control {unknown[0]!r}; "
                f"valid: {', '.join(self.controls)}"
            )
        out = dict(values)
        for c in self.CONTROLS:  # kinds first: bounds read the values
            out[c.name] = check_int(out[c.name], c.name) if _slider(c) else c.accept(out[c.name])
        bounds = self.bounds(out)
        for c in filter(_slider, self.CONTROLS):
            low, high = bounds.get(c.name, (c.min, c.max))
            out[c.name] = check_int(out[c.name], c.name, minimum=low, maximum=high)
        return out

    def _clamped(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` moved into their ranges (a browser move that narrowed another range)."""
        out = dict(values)
        for c in filter(_slider, self.CONTROLS):  # in order: a clamped value moves later ranges
            low, high = self.bounds(out).get(c.name, (c.min, c.max))
            out[c.name] = min(max(out[c.name], low), high)
        return out

    # --- assigning widget state --------------------------------------------------------------
    def _apply(self, values: Mapping[str, Any]) -> None:
        """Give every control its value (and range), observers held: no redraw per control."""
        self._holding = True
        try:
            bounds = self.bounds(values)
            for name, control in self.controls.items():
                value = values[name]
                if name in bounds:
                    low, high = bounds[name]
                    control.min, control.max = min(control.min, low, value), max(control.max, high)
                    control.value = value
                    control.min, control.max = low, high
                elif control.value != value:
                    control.value = value
        finally:
            self._holding = False

    def _encode(self, picture: Drawing | Figure | bytes) -> bytes:
        if isinstance(picture, Drawing):
            return self.canvas.render(picture).png()
        if isinstance(picture, Figure):
            return to_png(picture)
        return picture

    def _on_change(self, _change: object) -> None:
        """A learner moved a control: state, picture, then ``finish`` and readout, ``DEFER_S``
        later for a browser's move (a held arrow key runs the slow part for the last move
        only). Only a :class:`~pagedlab.ground.checks.Refused` is caught: anything else is a bug."""
        if self._holding:
            return
        self._generation += 1
        generation, values = self._generation, self._clamped(self.values)
        try:
            view = self.render(**values)
            self._apply(values)
            self.state = view.state
            self.picture.value = self._encode(view.picture)
        except Refused as error:
            self._explain(error)
            return

        def complete() -> None:
            if generation != self._generation:  # a newer move (or set) superseded this one
                return
            try:
                done = self.finish(view)
            except Refused as error:
                self._explain(error)
                return
            self.state = done.state
            self.readout.value = done.readout

        if not _after_this_message(complete):
            complete()

    def _explain(self, error: Exception) -> None:
        """A move the ranges allow but the model refuses: said in the readout, never raised."""
        self.readout.value = f"<b>✗ not possible:</b> {html.escape(str(error))}"

    # --- display ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        settings = ", ".join(f"{name}={value!r}" for name, value in self.values.items())
        return f"{type(self).__name__}({settings})"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict:
        """The widget view, the current picture as ``image/png`` and a short ``text/plain``.

        Front ends with the widget manager (JupyterLab, Notebook 7, VS Code) render the
        widget view and ignore the PNG (tests/browser checks JupyterLab); static renderers
        (GitHub, nbviewer) show the PNG. nbval compares only the ``text/plain``.
        """
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["image/png"] = base64.b64encode(bytes(self.picture.value)).decode("ascii")
        bundle["text/plain"] = repr(self)
        return {
            key: bundle[key] for key in (WIDGET_VIEW, "image/png", "text/plain") if key in bundle
        }


DEFER_S = 0.01  # how long a browser move's slow part waits for newer moves


def from_browser() -> bool:
    """Whether the code running now handles a widget message from the browser (a comm_msg);
    False outside a kernel and in a cell's own code. Controls linked in the browser need no
    sync for such a change: syncing would echo an older value back."""
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:  # no IPython, an old kernel
        return False
    header = parent.get("header", {}) if parent else {}
    return header.get("msg_type") == "comm_msg"


def _after_this_message(callback: Callable[[], None]) -> bool:
    """Schedule ``callback`` on the kernel's event loop while a browser message is handled
    (True); else False, run it now: tests, ``set`` and nbval runs stay synchronous."""
    if not from_browser():
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.call_later(DEFER_S, callback)
    return True


_RESERVED = {"picture", "readout", "widget", "state", "controls", "canvas", "values", "play"}


def _slider(control: Control) -> TypeGuard[Slider]:
    return isinstance(control, Slider)


def _widget(control: Control, args: Mapping[str, Any]) -> widgets.ValueWidget:
    """The ipywidget of one declaration, at its default."""
    common = {"value": control.default, "description": control.description, **args}
    if isinstance(control, Slider):
        return widgets.IntSlider(min=control.min, max=control.max, step=control.step, **common)
    if isinstance(control, Toggle):
        return widgets.Checkbox(**common)
    kind = widgets.SelectionSlider if control.slider else widgets.ToggleButtons
    return kind(options=control.options, **common)
