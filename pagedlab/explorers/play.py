"""The notebook widget's Play: the explorer's declared
:class:`~pagedlab.explorers.views.controls.Play`, run by an ``ipywidgets.Play`` on the axis's
control (a slider's value, or a choice's index).

- ``"step"``: linked both ways in the browser (``jslink``); a move made by the kernel is
  mirrored, a browser move is not (it would echo back).
- ``"replay"``: parked at its end, so a press replays from the minimum up to the position
  shown; each tick the kernel moves the control. Not linked, and the kernel writes to the Play
  only while it is not playing, so nothing can race the browser's Play loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from pagedlab.explorers.views.controls import Control, Play, Slider


class Player:
    """One explorer's Play: ``.widget`` (an ``ipywidgets.Play``) driving the control's widget;
    ``from_browser()`` tells whether the running code handles a browser's message."""

    def __init__(
        self,
        declared: Play,
        control: Control,
        widget: widgets.ValueWidget,
        from_browser: Callable[[], bool],
    ) -> None:
        self.declared, self.control, self._from_browser = declared, widget, from_browser
        self.position = "value" if isinstance(control, Slider) else "index"
        replay = declared.mode == "replay"
        self.widget = widgets.Play(
            interval=declared.interval_ms, description="play", show_repeat=not replay,
            tooltip="replay from the first value up to the one shown" if replay
            else "step on from the value shown",
        )  # fmt: skip
        self.widget.add_class("pagedlab-play")
        self._link: Any = None
        if isinstance(control, Slider):
            self.widget.step = control.step
        self.follow_range()  # replay: parked at its end, so a press replays up to the shown
        follow = ["min", "max", "options"]
        if replay:
            self.widget.observe(self._replay_tick, names="value")
            self.widget.observe(lambda _change: self.follow_range(), names="playing")  # ended
            follow.append(self.position)  # moved by hand: ready to replay up to there
        else:
            self.widget.value = self._shown()
            self._link = widgets.jslink((self.widget, "value"), (widget, self.position))
            self.widget.observe(self._step_tick, names="value")
            widget.observe(self._step_moved, names=self.position)
        for trait in follow:
            if trait in widget.trait_names():
                widget.observe(lambda _change: self.follow_range(), names=trait)

    def _shown(self) -> int:
        return int(getattr(self.control, self.position))

    def _bounds(self) -> tuple[int, int]:
        if self.position == "value":
            return int(self.control.min), int(self.control.max)
        return 0, len(self.control.options) - 1

    def follow_range(self) -> None:
        """The Play's range: the control's (replay: up to the position shown, parked at its
        end); nothing while it plays."""
        if self.widget.playing:
            return
        low, high = self._bounds()
        first, last = self.declared.span(high - low + 1, self._shown() - low)
        top = low + last
        self.widget.min, self.widget.max = min(self.widget.min, low), max(self.widget.max, top)
        self.widget.value = min(max(self.widget.value, low), top)
        self.widget.min, self.widget.max = low, top
        if self.declared.mode == "replay":
            self.widget.value = top

    # --- replay: driven by the kernel, tick by tick ------------------------------------------
    def _replay_tick(self, change: dict) -> None:
        if self.widget.playing:
            setattr(self.control, self.position, change["new"])
        elif change["new"] != self._shown():  # Stop, or a value set from code
            self.follow_range()

    # --- step: linked in the browser; code's moves mirrored here ----------------------------
    def _step_tick(self, change: dict) -> None:
        if not self._from_browser():
            setattr(self.control, self.position, change["new"])

    def _step_moved(self, change: dict) -> None:
        if not self._from_browser():
            self.widget.value = change["new"]
