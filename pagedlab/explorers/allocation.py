"""The allocation explorer: sliders -> real allocator and block table -> picture -> kernel.

The model is :func:`pagedlab.scenes.example_state`: a fresh 32-block pool in the chosen layout,
the sequence appended token by token with a real ``BlockTable``, the example's scalar head
(keys 0, query 1, values 1..L) written into a ``PagedKVCache`` through its slot mapping,
and ``paged_attention`` (the Triton kernel; its interpreter on a CPU), memoised.

Play replays the growth: pressed, it runs the length from 1 up to the slider's value, one
token a tick, so the learner watches each block arrive (1 -> 5 at the example: block 4, then
block 1 when the fifth token comes). ``step`` appends one token.

Layouts (the order of the free list when the sequence starts): ``ascending`` (a fresh pool),
``example [4, 1, …]`` (after :func:`pagedlab.scenes.example_history`), ``shuffled``.

A length that needs more blocks than the pool has (block size 1, length > 32) is not an
error: the state holds the tokens that fit and the readout explains the OutOfBlocksError.
"""

from __future__ import annotations

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer, View
from pagedlab.scenes import LAYOUTS, ExampleState, with_kernel_output
from pagedlab.views.allocation import (
    ALLOCATION_EXPLORER,
    MAX_LENGTH,
    allocation_view,
    readout_html,
)

__all__ = ["LAYOUTS", "AllocationExplorer"]  # LAYOUTS: the notebooks import it from here


class AllocationExplorer(Explorer):
    """Sliders for block size and length, a layout choice, Play/step, picture and readout.

    ``set(block_size=..., length=..., layout=...)`` and ``step()`` drive it without a
    browser; ``.state`` (a :class:`~pagedlab.scenes.ExampleState`) is what the picture shows.
    """

    DECLARATION = ALLOCATION_EXPLORER
    ROWS = (("play", "step_button", "block_size", "length"), "layout")
    length: widgets.IntSlider  # a control (set by the base)

    def __init__(self, **initial: object) -> None:
        self.play = widgets.Play(
            min=1, max=MAX_LENGTH, interval=700, description="play", show_repeat=False,
            tooltip="replay: grow the sequence from 1 token to the length on the slider",
        )  # fmt: skip
        self.step_button = widgets.Button(description="step", tooltip="append one token")
        super().__init__(**initial)
        self._rest_play()
        self.play.observe(self._on_play, names="value")
        self.play.observe(self._on_playing, names="playing")
        self.length.observe(self._on_length, names="value")
        self.step_button.on_click(lambda _button: self.step())

    # Play replays the growth 1 -> length. At rest it sits at its end (value = max = the
    # length); the browser's Play restarts from min = 1 when pressed at its end, and each
    # tick the kernel moves the length slider to the Play's value. Play and slider are not
    # linked in the browser, and the kernel writes to the Play only while it is not playing,
    # so nothing the kernel sends can race the browser's Play loop.

    def _rest_play(self) -> None:
        """Park the Play at its end: pressing it replays 1 -> the slider's length."""
        self.play.max = self.play.value = self.length.value

    def _on_play(self, change: dict) -> None:
        if self.play.playing:
            self.length.value = change["new"]
        elif change["new"] != self.length.value:  # Stop, or a value set from code
            self._rest_play()

    def _on_playing(self, change: dict) -> None:
        if not change["new"]:  # paused or finished: the replay ends at the length shown
            self._rest_play()

    def _on_length(self, _change: dict) -> None:
        if not self.play.playing:
            self._rest_play()

    def render(self, block_size: int, length: int, layout: str) -> View:
        return View(*allocation_view(block_size, length, layout))

    def finish(self, view: View) -> View:
        state = with_kernel_output(view.state)
        return View(state, view.picture, readout_html(state))

    def step(self) -> ExampleState:
        """One more token; stays at the maximum length."""
        if self.length.value < MAX_LENGTH:
            self.length.value += 1
        return self.state
