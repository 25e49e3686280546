"""What the allocation explorer shows for one setting: the example's table, its drawing, readout.

The model is :func:`pagedlab.pictures.control_scenes.example_table` (a fresh 32-block pool, a real
``BlockTable``). The notebook's ``AllocationExplorer`` adds the kernel's output to
:func:`allocation_view`; the live site runs it alone, where there is no torch.
"""

from __future__ import annotations

import html

from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.explorers.views.shown import View
from pagedlab.pictures.blocks import scene
from pagedlab.pictures.control_scenes import KV_BYTES_PER_SLOT, LAYOUTS, ExampleState, example_table
from pagedlab.pictures.drawing import Drawing

MAX_BLOCK_SIZE = 16  # where the notebook's sliders stop; the live page takes any size
MAX_LENGTH = 64

ALLOCATION_EXPLORER = Declaration(
    "AllocationExplorer",
    (
        Slider("block_size", 1, MAX_BLOCK_SIZE, "block size", 4, unbounded=True),
        Slider("length", 1, MAX_LENGTH, "length", 5, unbounded=True),
        Choice("layout", LAYOUTS, "layout", LAYOUTS[1]),
    ),
    frames={"block_size": [1, 2, 4, 8, 16], "length": list(range(1, 33))},
    play=Play("length", "replay"),  # Play grows the sequence from 1 token up to the length shown
)


def readout_html(state: ExampleState) -> str:
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


def example_scene(state: ExampleState, caption: str | None = None) -> Drawing:
    """The picture of one setting: the new block outlined, ``caption`` (default the state's)
    under it."""
    highlight = () if state.new_block is None else (state.new_block,)
    caption = state.caption if caption is None else caption
    return scene(state.allocator, [state.table], highlight=highlight, caption=caption)


def allocation_view(block_size: int, length: int, layout: str = LAYOUTS[1]) -> View:
    """The allocation explorer's state, picture and readout, before the kernel runs."""
    state = example_table(block_size, length, layout)
    return View(state, example_scene(state), readout_html(state))
