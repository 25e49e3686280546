"""KernelExplorer: sliders for a batch in a shuffled pool -> does the kernel still agree?

Each setting stages :func:`pagedlab.pictures.scenes.kernel_batch`, draws its pool, then (the slow
part) compares three results per sequence (:func:`batch_report`). Invariant checked on every
setting: :func:`pagedlab.attention.batch.dense_attention` (never read through a block table),
``reference_attention`` and ``paged_attention`` agree within fp16 rounding (2e-3). Errors are
printed as powers of ten, so the readout is the same on every run.
"""

from __future__ import annotations

import html
import math

import torch

from pagedlab.attention.batch import Batch, dense_attention
from pagedlab.attention.ops import paged_attention, reference_attention
from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Slider
from pagedlab.ground.checks import check_int
from pagedlab.pictures.blocks import scene, sequence_names
from pagedlab.pictures.scenes import kernel_batch

TOLERANCE = 2e-3  # about two fp16 steps near 1: the outputs are rounded to fp16 at the end
HEAD_DIMS = (1, 8, 12, 16, 64)  # the explorer's head_dim choices (12: not a power of two)


def sequence_letters(count: int) -> list[str]:
    """The picture's names for the sequences (``sequence A`` -> ``A``), never an index."""
    return [name.removeprefix("sequence ") for name in sequence_names(count)]


def error_bound(err: float) -> str:
    """An error as a power-of-ten bound: stable text from run to run."""
    return "0 (exact)" if err == 0 else f"< 1e{math.ceil(math.log10(err))}"


def explorer_batch(num_seqs: int, block_size: int, head_dim: int) -> Batch:
    """Sequences of 5, 12, 19, ... tokens; the pool is shuffled with ``seed=num_seqs``."""
    num_seqs = check_int(num_seqs, "num_seqs", minimum=1)
    lengths = [5 + 7 * s for s in range(num_seqs)]
    return kernel_batch(lengths, block_size, head_dim=head_dim, seed=num_seqs)


_REPORTS: dict[tuple[int, int, int], str] = {}  # the batch is seeded: same setting, same text


def kernel_report(num_seqs: int, block_size: int, head_dim: int, batch: Batch | None = None) -> str:
    """:func:`batch_report` of :func:`explorer_batch` (``batch``, if already built), memoised."""
    key = (num_seqs, block_size, head_dim)
    if key not in _REPORTS:
        with torch.no_grad():
            _REPORTS[key] = batch_report(batch or explorer_batch(num_seqs, block_size, head_dim))
    return _REPORTS[key]


def batch_report(batch: Batch) -> str:
    """The readout: per sequence its pages and the two errors, then ✓ or ✗, as HTML."""
    cache, tables = batch.cache, batch.tables
    args = (batch.query, cache.key, cache.value, batch.block_tables, batch.seq_lens)
    paged, reference = paged_attention(*args).float(), reference_attention(*args).float()
    names = sequence_letters(len(tables))  # the picture's names, A, B, C, ...
    rows = ["seq  tokens  pages  |paged-reference|  |reference-dense|"]
    worst = 0.0
    for s, t in enumerate(tables):
        dense = dense_attention(batch.query[s], batch.keys[s], batch.values[s])  # no table
        e_paged = (paged[s] - reference[s]).abs().max().item()
        e_dense = (reference[s] - dense).abs().max().item()
        worst = max(worst, e_paged, e_dense)
        rows.append(
            f"{names[s]:>3}  {t.num_tokens:6d}  {len(t.blocks):5d}  "
            f"{error_bound(e_paged):>17}  {error_bound(e_dense):>17}"
        )
    rows.append(f"{'✓' if worst < TOLERANCE else '✗'} all within fp16 rounding (2e-3)")
    return f"<pre>{html.escape(chr(10).join(rows))}</pre>"


class KernelExplorer(Explorer):
    """Sliders ``num_seqs``, ``block_size``, ``head_dim``; the pool; the kernels' check."""

    DECLARATION = Declaration(
        "KernelExplorer",
        (
            Slider("num_seqs", 1, 5, "sequences", 3),
            Slider("block_size", 1, 16, "block size", 4),
            Choice("head_dim", HEAD_DIMS, "head_dim", 16, slider=True),
        ),
        frames={"num_seqs": [1, 2, 3, 4, 5], "block_size": [1, 2, 4, 8, 16]},
    )
    WIDGET_ARGS = {"style": {"description_width": "90px"}}

    def render(self, num_seqs: int, block_size: int, head_dim: int) -> View:
        batch = explorer_batch(num_seqs, block_size, head_dim)
        names = sequence_letters(len(batch.tables))
        pages = ", ".join(
            f"{n}: {t.num_tokens} tokens in {t.blocks}"
            for n, t in zip(names, batch.tables, strict=True)
        )
        return View(batch, scene(batch.allocator, batch.tables), html.escape(pages))

    def finish(self, view: View) -> View:
        batch = view.state
        key = (len(batch.tables), batch.allocator.block_size, batch.cache.head_dim)
        return View(batch, view.picture, kernel_report(*key, batch=batch))
