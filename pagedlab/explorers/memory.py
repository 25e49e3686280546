"""ipywidgets explorers for notebooks 01 and 07: sliders -> state -> picture + readout.

Callbacks never display anything: they assign ``Image.value`` (PNG bytes) and ``HTML.value``,
so a saved notebook and a live one show the same outputs. Each explorer exposes ``widget``
(the box to display) and ``update()``; tests drive the sliders headlessly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from pagedlab.pictures.memory import plot_block_sweep, plot_reservation, to_png
from pagedlab.simulate.memory import OneRequest
from pagedlab.simulate.report import SweepRow

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ReservationExplorer:
    """One request: contiguous reservation vs paged blocks, for a response length you choose."""

    def __init__(
        self,
        prompt: int = 8,
        response: int = 2,
        reserved: int = 2048,
        block_size: int = 16,
    ) -> None:
        self.state = OneRequest(prompt, response, 0, reserved, block_size)  # validates
        self.prompt = prompt
        style: dict[str, Any] = {"description_width": "150px"}
        layout = w.Layout(width="520px")
        self.response = w.IntSlider(
            value=response,
            min=1,
            max=reserved - prompt,
            description="response length",
            style=style,
            layout=layout,
            continuous_update=False,
        )
        self.generated = w.IntSlider(
            value=0,
            min=0,
            max=response,
            description="generated so far",
            style=style,
            layout=layout,
            continuous_update=False,
        )
        self.reserved = w.IntSlider(
            value=reserved,
            min=64,
            max=2048,
            step=64,
            description="contiguous reservation",
            style=style,
            layout=layout,
            continuous_update=False,
        )
        self.block_size = w.SelectionSlider(
            options=list(BLOCK_SIZES),
            value=block_size,
            description="block size B",
            style=style,
            layout=layout,
            continuous_update=False,
        )
        self.image = w.Image(format="png")
        self.readout = w.HTML()
        self._busy = False
        for s in (self.response, self.generated, self.reserved, self.block_size):
            s.observe(self._on_change, names="value")
        self.widget = w.VBox(
            [
                self.response,
                self.generated,
                self.reserved,
                self.block_size,
                self.readout,
                self.image,
            ]
        )
        self.update()

    def set(self, response: int, generated: int, reserved: int, block_size: int) -> None:
        """Move all four sliders at once (as a learner could) and redraw once."""
        if not self.prompt + response <= reserved <= 2048 or not 0 <= generated <= response:
            raise ValueError(
                f"need 0 <= generated <= response and prompt + response <= reserved <= 2048, "
                f"got generated={generated!r}, response={response!r}, reserved={reserved!r}"
            )
        self._busy = True
        try:
            self.reserved.value = reserved
            self.response.max = reserved - self.prompt
            self.response.value = response
            self.generated.max = response
            self.generated.value = generated
            self.block_size.value = block_size
        finally:
            self._busy = False
        self.update()

    def _on_change(self, _change: object) -> None:
        if not self._busy:  # clamping a slider inside update() fires this again
            self.update()

    def update(self) -> None:
        """Clamp dependent sliders, rebuild the state, redraw the picture and the readout."""
        self._busy = True
        try:
            self._clamp()
        finally:
            self._busy = False
        self._draw()

    def _clamp(self) -> None:
        self.reserved.min = max(64, self.prompt + 1)
        self.response.max = self.reserved.value - self.prompt  # clamps value too
        self.generated.max = self.response.value

    def _draw(self) -> None:
        self.state = OneRequest(
            self.prompt,
            self.response.value,
            self.generated.value,
            self.reserved.value,
            int(self.block_size.value),
        )
        s = self.state
        self.readout.value = (
            f"<b>contiguous</b>: {s.tokens} used, {s.future} reserved for future tokens, "
            f"<b>{s.never_used} never used</b> &nbsp;|&nbsp; <b>paged</b>: {s.paged_blocks} "
            f"blocks of {s.block_size}, <b>{s.paged_waste} empty slots</b> "
            f"(always &lt; {s.block_size})"
        )
        self.image.value = to_png(plot_reservation(s))


class BlockSizeExplorer:
    """Index a precomputed block-size sweep with a slider: picture and one-line readout."""

    def __init__(self, rows: Sequence[SweepRow], value: int = 16) -> None:
        if not rows:
            raise ValueError("rows must not be empty")
        self.rows = {r.block_size: r for r in rows}
        if value not in self.rows:
            raise ValueError(f"value {value!r} is not a swept block size {sorted(self.rows)}")
        self._rows = list(rows)
        self._png: dict[int, bytes] = {}
        self.block_size = w.SelectionSlider(
            options=[r.block_size for r in rows],
            value=value,
            description="block size B",
            continuous_update=False,
        )
        self.image = w.Image(format="png")
        self.readout = w.HTML()
        self.block_size.observe(lambda _c: self.update(), names="value")
        self.widget = w.VBox([self.block_size, self.readout, self.image])
        self.update()

    def update(self) -> None:
        b = int(self.block_size.value)
        r = self.rows[b]
        if b not in self._png:
            self._png[b] = to_png(plot_block_sweep(self._rows, highlight=b))
        self.image.value = self._png[b]
        self.readout.value = (
            f"B = {b}: internal fragmentation {100 * r.internal_share:.2f} % of KV memory, "
            f"{r.table_entries_mean:.1f} table entries per sequence, "
            f"{100 * r.shareable_prompt:.1f} % of prompt tokens shareable, "
            f"mean batch {r.mean_batch:.1f}"
        )
