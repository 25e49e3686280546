"""Matplotlib pictures of KV memory at scale: Fig. 2, Fig. 13 and the block-size sweep.

Pure functions: each takes results and returns a new ``Figure`` (Agg, no pyplot state, the
theme's colours); nothing is mutated and nothing is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pagedlab.ground.paper import FIG2_BREAKDOWN
from pagedlab.pictures.theme import CATEGORY_COLORS as COLORS
from pagedlab.pictures.theme import HIGHLIGHT, PAPER, SIMULATED
from pagedlab.simulate.accounting import FIG2, SimResult
from pagedlab.simulate.report import PAPER_MEAN_BATCH, SweepRow

LABELS = {
    "tokens": "token states",
    "reserved": "reserved for future tokens",
    "internal": "internal fragmentation",
    "external": "external fragmentation & others",
    "idle": "idle (nobody waiting)",
}


def _figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_breakdown(results: Sequence[SimResult]) -> Figure:
    """Fig. 2: stacked shares of the non-idle pool per system, ours above the paper's bar."""
    fig = _figure(8.0, 1.4 + 0.8 * len(results))
    ax = fig.add_subplot()
    names = [r.policy.name for r in results]
    y = np.arange(len(results))[::-1] * 1.0
    ours_left, paper_left = np.zeros(len(results)), np.zeros(len(results))
    rows = [FIG2_BREAKDOWN.get(n) for n in names]
    for cat in FIG2:
        v = np.array([100 * r.fig2_shares()[cat] for r in results])
        bar: dict[str, Any] = {"color": COLORS[cat], "edgecolor": "white"}
        ax.barh(y + 0.2, v, 0.38, left=ours_left, label=LABELS[cat], **bar)
        ours_left += v
        pv = np.array([100 * (row[cat] or 0.0) if row else 0.0 for row in rows])
        ax.barh(y - 0.2, pv, 0.38, left=paper_left, hatch="//", **bar)
        paper_left += pv
    rest = np.where([row is not None for row in rows], 100 - paper_left, 0)
    grey: dict[str, Any] = {"color": "white", "edgecolor": "#868e96", "hatch": "//"}
    ax.barh(y - 0.2, rest, 0.38, left=paper_left, label="paper: not broken down", **grey)
    ticks = [f"{n}: ours" for n in names] + ["paper (Fig. 2)"] * len(names)
    ax.set_yticks(np.concatenate([y + 0.2, y - 0.2]), ticks, fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of KV memory (idle excluded: free slots while nobody waits)")
    fig.legend(loc="outside lower center", ncols=3, fontsize=8)
    return fig


def plot_batch(results: Sequence[SimResult]) -> Figure:
    """Fig. 13: mean batched requests, ours beside the paper's."""
    fig = _figure(6.0, 3.0)
    ax = fig.add_subplot()
    names = [r.policy.name for r in results]
    x = np.arange(len(names))
    ours = [r.mean_batch for r in results]
    paper = [PAPER_MEAN_BATCH.get(n, np.nan) for n in names]
    ax.bar(x - 0.2, ours, 0.4, label="simulated", color=SIMULATED)
    ax.bar(x + 0.2, paper, 0.4, label="paper (Fig. 13)", color=PAPER)
    for xi, v in zip(x, ours, strict=True):
        ax.text(xi - 0.2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylabel("mean batched requests")
    ax.legend(fontsize=8)
    return fig


def plot_block_sweep(rows: Sequence[SweepRow], highlight: int | None = 16) -> Figure:
    """The block-size trade-off: internal fragmentation vs table entries vs shareable prompt."""
    fig = _figure(10.0, 2.8)
    b = [w.block_size for w in rows]
    panels = [
        ("internal fragmentation (% of KV)", [100 * w.internal_share for w in rows]),
        ("block-table entries per sequence", [w.table_entries_mean for w in rows]),
        ("prompt tokens in shareable blocks (%)", [100 * w.shareable_prompt for w in rows]),
    ]
    for i, (title, v) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        ax.plot(b, v, "o-", color=SIMULATED, ms=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks(b, [str(x) for x in b], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("block size B (tokens)")
        ax.set_title(title, fontsize=9)
        if highlight is not None and highlight in b:
            k = b.index(highlight)
            ax.plot([highlight], [v[k]], "o", color=HIGHLIGHT, ms=8)
            ax.axvline(highlight, color=HIGHLIGHT, lw=0.8, ls=":")
    return fig
