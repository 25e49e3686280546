"""Explorers for notebooks 01 and 07: one request's reservation, and the block-size sweep.

``ReservationExplorer`` draws :func:`pagedlab.pictures.reservation.reservation_scene` (a
``Drawing``, redrawn in place); its ranges follow each other (``generated <= response``,
``prompt + response <= reserved``), so an impossible setting cannot be reached with the
sliders and ``set`` refuses it. ``BlockSizeExplorer`` indexes a precomputed sweep; each
block size's figure is drawn once and kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.ground.checks import check_int
from pagedlab.pictures.at_scale import plot_block_sweep
from pagedlab.pictures.png import to_png
from pagedlab.pictures.reservation import reservation_scene
from pagedlab.simulate.policies import OneRequest
from pagedlab.simulate.report import SweepRow

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_RESERVED = 2048


class ReservationExplorer(Explorer):
    """One request: contiguous reservation vs paged blocks; ``prompt`` is fixed, the controls
    ``response``, ``generated``, ``reserved`` and ``block_size`` narrow each other's ranges."""

    DECLARATION = Declaration(
        "ReservationExplorer",
        (
            Slider("response", 1, MAX_RESERVED - 1, "response length", 2),
            Slider("generated", 0, MAX_RESERVED, "generated so far", 0),
            Slider("reserved", 64, MAX_RESERVED, "contiguous reservation", MAX_RESERVED, step=64),
            Choice("block_size", BLOCK_SIZES, "block size B", 16, slider=True),
        ),
        frames={"block_size": [1, 2, 4, 8, 16, 32, 64, 128, 256], "generated": [0, 1, 2]},
        play=Play("generated"),
    )
    WIDGET_ARGS = {
        "style": {"description_width": "150px"},
        "layout": {"width": "520px"},
        "continuous_update": False,
    }

    def __init__(self, prompt: int = 8, **initial: object) -> None:
        self.prompt = check_int(prompt, "prompt", minimum=1, maximum=MAX_RESERVED - 1)
        super().__init__(**initial)

    def bounds(self, values: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
        reserved_min = max(64, self.prompt + 1)
        reserved = max(values["reserved"], reserved_min)
        response_max = reserved - self.prompt
        return {
            "reserved": (reserved_min, MAX_RESERVED),
            "response": (1, response_max),
            "generated": (0, min(max(values["response"], 1), response_max)),
        }

    def render(self, response: int, generated: int, reserved: int, block_size: int) -> View:
        s = OneRequest(self.prompt, response, generated, reserved, block_size)
        blocks, future = "block" if s.paged_blocks == 1 else "blocks", min(s.future, s.paged_waste)
        readout = (
            f"<b>contiguous</b>: {s.tokens} used, {s.future} reserved for future tokens, "
            f"<b>{s.never_used} never used</b> &nbsp;|&nbsp; <b>paged</b>: {s.paged_blocks} "
            f"{blocks} of {s.block_size}, <b>{s.paged_waste} empty slots</b> "
            f"(always &lt; {s.block_size}; {future} of them for future tokens)"
        )
        return View(s, reservation_scene(s), readout)

    def __repr__(self) -> str:
        return super().__repr__().replace("(", f"(prompt={self.prompt}, ", 1)


class BlockSizeExplorer(Explorer):
    """Index a precomputed block-size sweep with a slider: picture and one-line readout."""

    DECLARATION = Declaration(  # its options: the sweep's block sizes (set per instance)
        "BlockSizeExplorer",
        (Choice("block_size", BLOCK_SIZES, "block size B", 16, slider=True),),
        frames={"block_size": [1, 2, 4, 8, 16, 32, 64, 128, 256]},
        play=Play("block_size"),
    )
    WIDGET_ARGS = {"continuous_update": False}

    def __init__(self, rows: Sequence[SweepRow], value: int = 16) -> None:
        if not rows:
            raise ValueError("rows must not be empty")
        self.rows = {r.block_size: r for r in rows}
        self._rows = list(rows)
        self._png: dict[int, bytes] = {}
        sizes = tuple(self.rows)  # this sweep's block sizes are the options
        declared = self.CONTROLS[0]
        assert isinstance(declared, Choice)
        self.CONTROLS = (replace(declared, options=sizes, default=sizes[0]),)
        super().__init__(block_size=value)

    def render(self, block_size: int) -> View:
        r = self.rows[block_size]
        if block_size not in self._png:  # a sweep figure costs ~0.3 s: each is drawn once
            self._png[block_size] = to_png(plot_block_sweep(self._rows, highlight=block_size))
        readout = (
            f"B = {block_size}: internal fragmentation {100 * r.internal_share:.2f} % of KV "
            f"memory, {r.table_entries_mean:.1f} table entries per sequence, "
            f"{100 * r.shareable_prompt:.1f} % of prompt tokens shareable, "
            f"mean batch {r.mean_batch:.1f}"
        )
        return View(r, self._png[block_size], readout)
