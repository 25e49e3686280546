"""The allocation explorer: sliders -> real allocator and block table -> picture -> kernel.

The model is :func:`pagedlab.pictures.scenes.example_state` (a fresh pool, a real ``BlockTable``,
the kernel's output memoised). A length the pool cannot hold is not an error: the readout explains
the OutOfBlocksError.
"""

from __future__ import annotations

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.allocation import (
    ALLOCATION_EXPLORER,
    MAX_LENGTH,
    allocation_view,
    readout_html,
)
from pagedlab.pictures.scenes import LAYOUTS, ExampleState, with_kernel_output

__all__ = ["LAYOUTS", "AllocationExplorer"]  # LAYOUTS: the notebooks import it from here


class AllocationExplorer(Explorer):
    """Sliders for block size and length, a layout choice, Play/step, picture and readout;
    ``.state`` (a :class:`~pagedlab.pictures.scenes.ExampleState`) is what the picture shows."""

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
