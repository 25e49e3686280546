"""Static mode: an explorer's frames rendered ahead of time, selected in the page itself.

On GitHub, nbviewer or a static site there is no kernel, so an explorer's Python callbacks
never run and its sliders are dead. :func:`static_view` renders, while a kernel is still
there, every frame the learner could reach over a few ``axes`` (control name -> values),
and returns a widget whose sliders choose among those frames *in the browser*: each
control's ``index`` is ``jslink``-ed to the ``selected_index`` of a ``Stack`` of frames
(one ``Stack`` level per axis), and a ``Play`` is linked to the animated axis. Links,
stacks, images and HTML are core widgets, so the page's widget manager runs them with no
kernel at all.

Invariants:
- A frame is exactly what the live explorer shows after ``explorer.set(**setting)``: its
  ``picture`` bytes and its ``readout`` text, read back from the explorer itself.
- The explorer is left at the setting it had before (``set`` back to its start values).
- Frame order is the Cartesian product of the axes in the order given, last axis fastest.
  A setting the explorer refuses (a range another control sets) gets a frame saying so.

:func:`enable` makes the kernel display every explorer listed in :data:`STATIC_AXES` as
its static view; the site builder (``scripts/build_site.py``) calls it before a notebook runs.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer
from pagedlab.pictures.png import quantised_png
from pagedlab.views.controls import Choice

FRAME_COLORS = 32  # frames are quantised to this many colours: ~4x smaller, same picture


# What each explorer's static view covers: class -> (axes, the axis Play animates).
STATIC_AXES: dict[tuple[str, str], tuple[dict[str, Sequence[object]], str | None]] = {
    ("pagedlab.explorers.allocation", "AllocationExplorer"): (
        {"block_size": [1, 2, 4, 8, 16], "length": list(range(1, 33))},
        "length",
    ),
    ("pagedlab.explorers.waste", "ReservationExplorer"): (
        {"block_size": [1, 2, 4, 8, 16, 32, 64, 128, 256], "generated": [0, 1, 2]},
        "generated",
    ),
    ("pagedlab.explorers.waste", "BlockSizeExplorer"): (
        {"block_size": [1, 2, 4, 8, 16, 32, 64, 128, 256]},
        "block_size",
    ),
    ("pagedlab.explorers.kernel", "KernelExplorer"): (
        {"num_seqs": [1, 2, 3, 4, 5], "block_size": [1, 2, 4, 8, 16]},
        None,
    ),
    ("pagedlab.explorers.sharing", "SharingExplorer"): (
        {"mode": ["parallel sampling", "beam search"], "steps": list(range(13))},
        "steps",
    ),
    ("pagedlab.explorers.sharing", "PrefixCacheExplorer"): (
        {"shared": [0, 2, 4, 6, 8], "requests": [1, 2, 3, 4, 5, 6]},
        "requests",
    ),
    ("pagedlab.explorers.sharing", "EvictionExplorer"): (
        {"pool_blocks": [3, 4, 5, 6, 8, 12, 16], "others": list(range(7))},
        "others",
    ),
    ("pagedlab.explorers.batch", "BatchExplorer"): (
        {"num_seqs": [1, 2, 3, 4, 5, 6], "longest": [3, 6, 9, 12, 18, 24]},
        None,
    ),
    ("pagedlab.explorers.scheduler", "SchedulerExplorer"): (
        {"mode": ["swap", "recompute"], "step": list(range(0, 61, 4))},
        "step",
    ),
    ("pagedlab.explorers.engine", "EngineExplorer"): (
        {"mode": ["recompute", "swap"], "step": list(range(0, 61, 2))},
        "step",
    ),
    ("pagedlab.explorers.hit_rate", "HitRateExplorer"): (
        {"block_size": [4, 8, 16, 32, 64, 128, 256, 512, 1024]},
        "block_size",
    ),
    ("pagedlab.explorers.hit_rate", "PartialHitExplorer"): (
        {"prefix_match_unit": [1, 2, 4, 8, 16]},
        "prefix_match_unit",
    ),
}


#: Explorers whose live Play replays its axis from the first value up to the one shown: in
#: the static view too, their Play rests at the starting frame and, pressed, runs from the
#: first value up to it (the page's own Play loop restarts at ``min`` when pressed at
#: ``max``). The others' Play steps on from the frame shown.
REPLAYS: frozenset[tuple[str, str]] = frozenset(
    {("pagedlab.explorers.allocation", "AllocationExplorer")}
)


def enable() -> None:
    """From now on this kernel displays every explorer of :data:`STATIC_AXES` statically.

    It registers a display printer per explorer class with IPython (printers registered by
    type run before an object's own display methods), so the explorers need no flag. Each
    explorer the live site runs (:data:`pagedlab.live.EXPLORERS`) gets its live panel
    under the frames, and each exercise check's output its live exercise
    (:mod:`pagedlab.explorers.live_markup`).
    """
    from IPython import get_ipython

    from pagedlab.explorers import live_markup

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("static.enable() needs an IPython kernel (it changes how cells display)")
    printer = shell.display_formatter.ipython_display_formatter
    for (module, name), (axes, play) in STATIC_AXES.items():
        printer.for_type_by_name(module, name, _displayer(axes, play, (module, name) in REPLAYS))
    html_formatter = shell.display_formatter.formatters["text/html"]
    html_formatter.for_type_by_name(
        "pagedlab.exercises.core", "CheckResult", live_markup.check_result_printer()
    )


def _displayer(axes: dict[str, Sequence[object]], play: str | None, replay: bool):
    def show(explorer: Explorer) -> None:
        from IPython.display import HTML, display

        from pagedlab.explorers import live_markup

        display(static_view(explorer, axes, play, replay=replay))
        panel = live_markup.explorer_panel(explorer)
        if panel:
            display(HTML(panel))

    return show


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
    names = list(axes)
    start = {name: _current(explorer, name) for name in names}
    frames = []
    try:
        for combo in itertools.product(*(axes[n] for n in names)):
            setting = dict(zip(names, combo, strict=True))
            try:
                explorer.set(**setting)
            except (TypeError, ValueError) as refused:  # e.g. a range set by another control
                why = html.escape(str(refused))
                note = f"<i>not reachable with the other settings here: {why}</i>"
                frames.append((setting, bytes(explorer.picture.value), note))
                continue
            frames.append((setting, bytes(explorer.picture.value), str(explorer.readout.value)))
    finally:
        explorer.set(**start)
    return frames


def _current(explorer: Explorer, name: str) -> object:
    if name not in explorer.values:
        raise ValueError(f"static axis {name!r} is not a control of {type(explorer).__name__}")
    return explorer.values[name]


def static_view(
    explorer: Explorer,
    axes: Mapping[str, Sequence[object]],
    play: str | None = None,
    replay: bool = False,
) -> widgets.VBox:
    """A kernel-free copy of ``explorer`` over ``axes``; ``play`` names the axis Play animates.

    With ``replay`` the Play runs that axis from its first value up to the starting one (and
    stops there), driving the control one way only, so a control moved by hand leaves it
    ready to replay again; without, it steps on from the frame shown, linked both ways.
    """
    if not axes:
        raise ValueError("static_view needs at least one axis")
    if play is not None and play not in axes:
        raise ValueError(f"play axis {play!r} is not one of the axes {list(axes)}")
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
        first = selectors[play].index
        top = first if replay else len(axes[play]) - 1
        player = widgets.Play(value=first, min=0, max=top, interval=700, show_repeat=not replay)
        player.add_class("pagedlab-static-play")
        link = widgets.jsdlink if replay else widgets.jslink
        link((player, "value"), (selectors[play], "index"))
        controls.append(player)
    controls += [selectors[n] for n in names]
    note = widgets.HTML(
        "<i>Static page: every setting above was drawn in advance; run the notebook to "
        "explore all of them and to call the kernel.</i>"
    )
    box = widgets.VBox([widgets.HBox(controls[:2]), *controls[2:], view, note])
    box.add_class("pagedlab-static")
    return box
