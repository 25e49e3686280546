"""Static mode: an explorer's frames rendered ahead of time, selected in the page itself.

Without a kernel (GitHub, nbviewer, a static site) an explorer's callbacks never run.
:func:`static_view` renders, while a kernel is there, every frame reachable over a few
``axes`` (control name -> values) and returns core widgets only: each control's ``index`` is
``jslink``-ed to the ``selected_index`` of a ``Stack`` of frames (a level per axis), and a
``Play`` to the animated axis, so the page's widget manager runs it with no kernel.

Invariants: a frame is exactly the live explorer's ``picture`` and ``readout`` after
``explorer.set(**setting)``; the explorer is set back to its start values afterwards; frames
are in the axes' Cartesian order, last axis fastest; a refused setting gets a frame saying so.
:func:`enable` (called by ``scripts/build_site.py``) shows every explorer so, over the frames
its ``DECLARATION`` names.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer
from pagedlab.explorers.views.controls import Choice, Play
from pagedlab.ground.checks import ArgumentTypeError, Refused
from pagedlab.pictures.png import quantised_png

FRAME_COLORS = 32  # frames are quantised to this many colours: ~4x smaller, same picture


def enable() -> None:
    """From now on this kernel displays every explorer statically, over its declared frames.

    One display printer for the :class:`Explorer` base (IPython looks printers up along the
    bases first), so explorers need no flag; the live site's explorers get their live panel
    under the frames, and each exercise check's output its live exercise (:mod:`.markup`)."""
    from IPython import get_ipython

    from pagedlab.explorers.site import markup

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("static.enable() needs an IPython kernel (it changes how cells display)")
    shell.display_formatter.ipython_display_formatter.for_type(Explorer, _show_static)
    html_formatter = shell.display_formatter.formatters["text/html"]
    html_formatter.for_type_by_name(
        "pagedlab.grade.cases", "CheckResult", markup.check_result_printer()
    )


def _show_static(explorer: Explorer) -> None:
    from IPython.display import HTML, display, publish_display_data

    from pagedlab.explorers.site import markup

    declared = declared_axes(type(explorer))
    if declared is None:
        publish_display_data(explorer._repr_mimebundle_())
        return
    display(static_view(explorer, *declared))
    panel = markup.explorer_panel(explorer)
    if panel:
        display(HTML(panel))


def declared_axes(cls: type[Explorer]) -> tuple[Mapping[str, Sequence[object]], Play | None] | None:
    """The axes and Play the static site shows ``cls`` over: its declaration's (None: no frames)."""
    declared = cls.DECLARATION
    if declared is None or not declared.frames:
        return None
    return declared.frames, declared.play


def _selector(explorer: Explorer, name: str, values: Sequence[object], current: object):
    """A control showing ``values`` whose ``index`` picks a frame; styled like the live one."""
    declared = next(c for c in explorer.CONTROLS if c.name == name)
    options = [(str(v), v) for v in values]
    index = list(values).index(current) if current in values else 0
    buttons = isinstance(declared, Choice) and not declared.slider
    kind: Any = widgets.ToggleButtons if buttons else widgets.SelectionSlider
    selector = kind(options=options, index=index, description=declared.description)
    selector.add_class("pagedlab-static-control")
    return selector


def _frame(png: bytes, readout: str) -> widgets.VBox:
    picture = widgets.Image(value=quantised_png(png, FRAME_COLORS), format="png")
    picture.add_class("pagedlab-picture")
    text = widgets.HTML(value=readout)
    text.add_class("pagedlab-readout")
    return widgets.VBox([picture, text])


def render_frames(
    explorer: Explorer, axes: Mapping[str, Sequence[object]]
) -> list[tuple[dict[str, object], bytes, str]]:
    """Every setting of ``axes`` (last axis fastest) with the picture and readout it shows."""
    _check_axes(explorer, axes, None)
    names = list(axes)
    start = {name: _current(explorer, name) for name in names}
    frames = []
    try:
        for combo in itertools.product(*(axes[n] for n in names)):
            setting = dict(zip(names, combo, strict=True))
            try:
                explorer.set(**setting)
                readout = str(explorer.readout.value)
            except (TypeError, ValueError, Refused) as refused:  # e.g. a range another sets
                why = html.escape(str(refused))
                readout = f"<i>not reachable with the other settings here: {why}</i>"
            frames.append((setting, bytes(explorer.picture.value), readout))
    finally:
        explorer.set(**start)
    return frames


def _check_axes(explorer: Explorer, axes: object, play: object) -> None:
    """Refuse, naming it, an axis that is not a control, has no list of values to show, holds
    a value its control refuses or one twice, and a ``play`` that is not a Play on an axis."""
    if not isinstance(axes, Mapping) or not axes:
        raise ValueError(f"static_view needs at least one axis (control -> values), got {axes!r}")
    for name, values in axes.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"static axis {name!r} must be a control's name (a str)")
        _current(explorer, name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ArgumentTypeError(f"static axis {name!r} needs a list of values, got {values!r}")
        if not values:
            raise ValueError(f"static axis {name!r} has no values to show, got {values!r}")
        control = next(c for c in explorer.CONTROLS if c.name == name)
        for value in values:
            try:
                control.accept(value)
            except (TypeError, ValueError) as error:
                kind = ArgumentTypeError if isinstance(error, TypeError) else ValueError
                raise kind(f"static axis {name!r}: value {value!r} refused ({error})") from None
        if len(set(values)) < len(values):
            raise ValueError(f"static axis {name!r} repeats a value: {list(values)!r}")
    if play is not None and not isinstance(play, Play):
        raise ArgumentTypeError(f"play must be a Play(axis, mode) or None, got {play!r}")
    if play is not None and play.axis not in axes:
        raise ValueError(f"play axis {play.axis!r} is not one of the axes {list(axes)}")


def _current(explorer: Explorer, name: str) -> object:
    if name not in explorer.values:
        raise ValueError(f"static axis {name!r} is not a control of {type(explorer).__name__}")
    return explorer.values[name]


def static_view(
    explorer: Explorer, axes: Mapping[str, Sequence[object]], play: Play | None = None
) -> widgets.VBox:
    """A kernel-free copy of ``explorer`` over ``axes``; ``play`` (its declared
    :class:`~pagedlab.explorers.views.controls.Play`) runs over that axis's frames, its range
    :meth:`Play.span` from the starting frame. A ``"replay"`` Play drives the control one way
    only (moved by hand, it is ready to replay); a ``"step"`` Play is linked both ways."""
    _check_axes(explorer, axes, play)
    names = list(axes)
    start = {name: _current(explorer, name) for name in names}
    frames = render_frames(explorer, axes)
    selectors = {n: _selector(explorer, n, axes[n], start[n]) for n in names}

    def stack(depth: int, offset: int) -> widgets.Widget:
        if depth == len(names):
            _setting, png, readout = frames[offset]
            return _frame(png, readout)
        size = math.prod(len(axes[n]) for n in names[depth + 1 :])  # frames per child
        children = [stack(depth + 1, offset + i * size) for i in range(len(axes[names[depth]]))]
        level = widgets.Stack(children, selected_index=selectors[names[depth]].index)
        widgets.jslink((selectors[names[depth]], "index"), (level, "selected_index"))
        return level

    view = stack(0, 0)
    controls: list[widgets.Widget] = []
    if play is not None:
        shown = selectors[play.axis].index
        _first, top = play.span(len(axes[play.axis]), shown)
        replay = play.mode == "replay"
        player = widgets.Play(
            value=shown, min=0, max=top, interval=play.interval_ms, show_repeat=not replay
        )
        player.add_class("pagedlab-static-play")
        link = widgets.jsdlink if replay else widgets.jslink
        link((player, "value"), (selectors[play.axis], "index"))
        controls.append(player)
    controls += [selectors[n] for n in names]
    note = widgets.HTML(
        "<i>Static page: every setting above was drawn in advance; run the notebook to "
        "explore all of them and to call the kernel.</i>"
    )
    box = widgets.VBox([widgets.HBox(controls[:2]), *controls[2:], view, note])
    box.add_class("pagedlab-static")
    return box
