"""The allocation explorer: sliders -> real allocator and block table -> picture -> kernel.

The model is :func:`pagedlab.scenes.seed_state`: a fresh 32-block pool in the chosen layout,
the sequence appended token by token with a real ``BlockTable``, the seed's scalar head
(keys 0, query 1, values 1..L) written into a ``PagedKVCache`` through its slot mapping,
and ``paged_attention`` (the Triton kernel; its interpreter on a CPU), memoised.

Layouts (the order of the free list when the sequence starts): ``ascending`` (a fresh pool),
``seed [4, 1, …]`` (after :func:`pagedlab.scenes.seed_history`), ``shuffled``.

A length that needs more blocks than the pool has (block size 1, length > 32) is not an
error: the state holds the tokens that fit and the readout explains the OutOfBlocksError.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer, View, from_browser
from pagedlab.pictures.blocks import scene
from pagedlab.pictures.canvas import Drawing
from pagedlab.scenes import KV_BYTES_PER_SLOT, LAYOUTS, SeedState, seed_state, with_kernel_output

MAX_BLOCK_SIZE = 16
MAX_LENGTH = 64


def readout_html(state: SeedState) -> str:
    """The live readout: sizes, bytes and the kernel's check, as HTML."""
    t = state.table
    lines = [
        f"blocks {len(t.blocks)} · physical {t.blocks} · slots {t.num_slots} · "
        f"tokens {t.num_tokens} · empty slots {state.empty_slots}",
        f"table entries {len(t.blocks)} = {state.table_bytes} bytes (int32) · "
        f"empty slots hold {state.empty_bytes} bytes of KV ({KV_BYTES_PER_SLOT} per slot: "
        f"K and V, one head of dim 1, fp32)",
    ]
    if state.problem is not None:
        lines.append(f"<b>✗ not possible:</b> {html.escape(state.problem)}")
    elif state.output is not None and state.expected is not None:
        mark = "✓" if state.ok else "✗ the kernel disagrees with the mean of the values"
        lines.append(
            f"output {state.output:.3f} = (L+1)/2 = {state.expected:.3f} {mark} "
            f"(keys 0, query 1, values 1..{t.num_tokens}: equal weights, so the mean)"
        )
    return "<br>".join(lines)


def seed_scene(state: SeedState) -> Drawing:
    """The picture of one setting: the new block outlined, the caption under it."""
    highlight = () if state.new_block is None else (state.new_block,)
    return scene(state.allocator, [state.table], highlight=highlight, caption=state.caption)


class AllocationExplorer(Explorer):
    """Sliders for block size and length, a layout choice, Play/step, picture and readout.

    ``set(block_size=..., length=..., layout=...)`` and ``step()`` drive it without a
    browser; ``.state`` (a :class:`~pagedlab.scenes.SeedState`) is what the picture shows.
    """

    length: widgets.IntSlider  # a control (set by the base)

    def __init__(self, block_size: int = 4, length: int = 5, layout: str = LAYOUTS[1]) -> None:
        controls = {
            "block_size": widgets.IntSlider(min=1, max=MAX_BLOCK_SIZE, description="block size"),
            "length": widgets.IntSlider(min=1, max=MAX_LENGTH, description="length"),
            "layout": widgets.ToggleButtons(options=list(LAYOUTS), description="layout"),
        }
        self.play = widgets.Play(min=1, max=MAX_LENGTH, interval=700, description="play")
        self.step_button = widgets.Button(description="step", tooltip="append one token")
        row = widgets.HBox(
            [self.play, self.step_button, controls["block_size"], controls["length"]]
        )
        super().__init__(
            controls, [row, controls["layout"]], block_size=block_size, length=length, layout=layout
        )
        self.play.value = self.length.value
        # Linked in the browser too, so pressing Play right after moving the slider starts
        # from the slider's value even before the kernel has caught up.
        self._link = widgets.jslink((self.play, "value"), (self.length, "value"))
        self.play.observe(self._on_play, names="value")
        self.length.observe(self._on_length, names="value")
        self.step_button.on_click(lambda _button: self.step())

    def _on_play(self, change: dict) -> None:
        if not from_browser():  # in the browser, jslink moved the length slider already
            self.length.value = change["new"]

    def _on_length(self, change: dict) -> None:
        if not from_browser():
            self.play.value = change["new"]

    def render(self, block_size: int, length: int, layout: str) -> View:
        state = seed_state(block_size, length, layout, run_kernel=False)
        return View(state, seed_scene(state), readout_html(state))

    def finish(self, view: View) -> View:
        state = with_kernel_output(view.state)
        return View(state, view.picture, readout_html(state))

    def step(self) -> SeedState:
        """One more token (what Play does each tick); stays at the maximum length."""
        if self.length.value < MAX_LENGTH:
            self.length.value += 1
        return self.state
