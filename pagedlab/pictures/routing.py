"""Notebook 12's routers, side by side: hit rate per router, and requests per engine under each.

Reads runs (``pagedlab.frontier.fleet.routing.RouteStats``: ``policy``, ``hit_rate``,
``per_engine()``) and never changes them; the explorer and the README's figure draw the same
picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure


def routers_figure(runs: Sequence[Any], num_engines: int) -> Figure:
    """Two panels: each router's prefix hit rate (%), and how many requests each engine got."""
    fig = Figure(figsize=(7.5, 2.6), dpi=90, layout="constrained")
    hits, spread = fig.subplots(1, 2)
    hits.bar([r.policy for r in runs], [100 * r.hit_rate for r in runs], color="#4c72b0")
    hits.set_ylabel("prefix hit rate (%)")
    hits.set_ylim(0, 100)
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        counts = r.per_engine()
        xs = [k + i * width for k in range(num_engines)]
        spread.bar(xs, [counts.get(f"E{k}", 0) for k in range(num_engines)], width,
                   label=r.policy)  # fmt: skip
    spread.set_xticks([k + width for k in range(num_engines)])
    spread.set_xticklabels([f"E{k}" for k in range(num_engines)])
    spread.set_ylabel("requests")
    spread.legend(fontsize=7)
    return fig
