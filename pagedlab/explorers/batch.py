"""BatchExplorer: sliders for a decode batch -> the tensors an engine sends to the GPU.

Moving a slider regrows the batch with the real allocator (``pagedlab.attention.batch.grow_batch``),
redraws the pool in place and rewrites the readout: the padded block-table tensor, the
sequence lengths, and two checks that hold for every setting (the vectorised slot mapping
equals every table's own, and the Triton kernel equals the torch reference). Nothing is
displayed from a callback: widget values are assigned, so strict nbval stays exact.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import torch

from pagedlab.attention.batch import Batch, batch_slot_mapping, grow_batch
from pagedlab.attention.ops import paged_attention, reference_attention
from pagedlab.pictures.blocks import Canvas, scene


def batch_lengths(num_seqs: int, longest: int) -> list[int]:
    """``num_seqs`` different lengths up to ``longest``: the last sequence is the longest."""
    return [max(1, round(longest * (i + 1) / num_seqs)) for i in range(num_seqs)]


def describe_batch(batch: Batch) -> str:
    """The readout: the tensors of one decode step and the checks, as HTML."""
    tables, lens = batch.block_tables, batch.seq_lens
    size = batch.allocator.block_size
    vectorised = batch_slot_mapping(tables, lens, size).tolist()
    one_by_one = [slot for t in batch.tables for slot in t.slot_mapping()]
    args = (batch.query, batch.cache.key, batch.cache.value, tables, lens)
    error = (paged_attention(*args) - reference_attention(*args)).abs().max().item()
    checks = [
        (vectorised == one_by_one, "slot mapping (one gather) = every table's slot_mapping()"),
        (error < 1e-5, f"paged_attention = reference_attention (max error {error:.0e})"),
    ]
    rows = "\n".join(f"  {row}," for row in tables.tolist())
    lines = [
        f"block_tables = int32 [{tables.shape[0]}, {tables.shape[1]}] (-1 = padding, never read)",
        f"[\n{rows}\n]",
        f"seq_lens = {lens.tolist()}",
        f"new tokens' slots (decode step) = {[t.slot_mapping()[-1] for t in batch.tables]}",
        *(f"{'✓' if ok else '✗'} {text}" for ok, text in checks),
    ]
    return f"<pre>{html.escape(chr(10).join(lines))}</pre>"


class BatchExplorer(widgets.VBox):
    """Sliders for sequences, block size and the longest length; picture and readout."""

    def __init__(self, num_seqs: int = 3, block_size: int = 4, longest: int = 9) -> None:
        style = {"description_width": "90px"}
        self.seqs = widgets.IntSlider(num_seqs, 1, 6, description="sequences", style=style)
        self.block_size = widgets.IntSlider(
            block_size, 1, 16, description="block size", style=style
        )
        self.longest = widgets.IntSlider(longest, 1, 24, description="longest", style=style)
        self.picture = widgets.Image(format="png", layout=widgets.Layout(width="720px"))
        self.readout = widgets.HTML()
        self.readout.add_class("pagedlab-readout")
        self.picture.add_class("pagedlab-picture")
        self._canvas = Canvas(dpi=80)
        super().__init__([self.seqs, self.block_size, self.longest, self.picture, self.readout])
        for slider in (self.seqs, self.block_size, self.longest):
            slider.observe(self._update, names="value")
        self._update()

    def batch(self) -> Batch:
        """The batch for the current slider values (on pagedlab's backend device)."""
        lengths = batch_lengths(self.seqs.value, self.longest.value)
        return grow_batch(lengths, self.block_size.value)

    def _update(self, _change: object = None) -> None:
        with torch.no_grad():
            batch = self.batch()
            self.readout.value = describe_batch(batch)
        self.picture.value = self._canvas.render(scene(batch.allocator, batch.tables)).png()
