"""BatchExplorer: sliders for a decode batch -> the tensors an engine sends to the GPU.

Its readout checks two things for every setting: the vectorised slot mapping equals every
table's own, and the Triton kernel equals the torch reference.
"""

from __future__ import annotations

import html

import torch

from pagedlab.attention.batch import Batch, batch_slot_mapping, grow_batch
from pagedlab.attention.ops import paged_attention, reference_attention
from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Declaration, Slider
from pagedlab.pictures.blocks import scene


def batch_lengths(num_seqs: int, longest: int) -> list[int]:
    """``num_seqs`` different lengths up to ``longest``: the last sequence is the longest."""
    return [max(1, round(longest * (i + 1) / num_seqs)) for i in range(num_seqs)]


_READOUTS: dict[tuple[int, int, int], str] = {}  # grow_batch is seeded: same setting, same text


def batch_readout(num_seqs: int, block_size: int, longest: int, batch: Batch) -> str:
    """:func:`describe_batch` of ``batch`` (the batch of this setting), memoised by setting:
    the kernel runs once per setting in a process, a setting seen again shows its readout."""
    key = (num_seqs, block_size, longest)
    if key not in _READOUTS:
        with torch.no_grad():
            _READOUTS[key] = describe_batch(batch)
    return _READOUTS[key]


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


class BatchExplorer(Explorer):
    """Sliders ``num_seqs``, ``block_size`` and ``longest`` (length); the pool; the tensors."""

    DECLARATION = Declaration(
        "BatchExplorer",
        (
            Slider("num_seqs", 1, 6, "sequences", 3),
            Slider("block_size", 1, 16, "block size", 4),
            Slider("longest", 1, 24, "longest", 9),
        ),
        frames={"num_seqs": [1, 2, 3, 4, 5, 6], "longest": [3, 6, 9, 12, 18, 24]},
    )
    WIDGET_ARGS = {"style": {"description_width": "90px"}}

    def render(self, num_seqs: int, block_size: int, longest: int) -> View:
        batch = grow_batch(batch_lengths(num_seqs, longest), block_size)
        return View(batch, scene(batch.allocator, batch.tables), "")

    def finish(self, view: View) -> View:
        batch = view.state  # its setting: the last sequence is the longest
        key = (len(batch.tables), batch.allocator.block_size, batch.tables[-1].num_tokens)
        return View(batch, view.picture, batch_readout(*key, batch))
