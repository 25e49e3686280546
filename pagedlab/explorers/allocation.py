"""The allocation explorer: sliders -> real allocator and block table -> picture -> kernel.

The model is :func:`pagedlab.scenes.example_state`: a fresh 32-block pool in the chosen layout,
the sequence appended token by token with a real ``BlockTable``, the example's scalar head
(keys 0, query 1, values 1..L) written into a ``PagedKVCache`` through its slot mapping,
and ``paged_attention`` (the Triton kernel; its interpreter on a CPU), memoised.

Play (declared ``Play("length", "replay")``, run by the base) replays the growth: pressed, it
runs the length from 1 up to the slider's value, one token a tick, so the learner watches each
block arrive (1 -> 5 at the example: block 4, then block 1 when the fifth token comes).
``step`` appends one token.

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
        self.step_button = widgets.Button(description="step", tooltip="append one token")
        super().__init__(**initial)
        self.step_button.on_click(lambda _button: self.step())

    def render(self, block_size: int, length: int, layout: str) -> View:
        return allocation_view(block_size, length, layout)

    def finish(self, view: View) -> View:
        state = with_kernel_output(view.state)
        return View(state, view.picture, readout_html(state))

    def step(self) -> ExampleState:
        """One more token; stays at the maximum length."""
        if self.length.value < MAX_LENGTH:
            self.length.value += 1
        return self.state
