"""The scheduler at one step (:func:`scheduler_drawing`, re-exported from
:mod:`~pagedlab.pictures.scheduler_drawing`), and Fig. 19's two halves as new Figures
(``plot_swap_timings``, ``plot_cost_model``).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pagedlab.attention.swap_cost import CostModel, SwapTiming
from pagedlab.memory.requests import StepPlan
from pagedlab.memory.scheduler import Scheduler
from pagedlab.pictures.scheduler_drawing import scheduler_drawing  # re-exported

__all__ = ["plot_cost_model", "plot_swap_timings", "scheduler_drawing", "scheduler_image"]


def scheduler_image(scheduler: Scheduler, result: StepPlan | None = None) -> object:
    """``scheduler_drawing(...)`` as an ``IPython.display.Image`` for a static notebook cell."""
    from pagedlab.pictures.canvas import image

    return image(scheduler_drawing(scheduler, result))


# --- Fig. 19 -------------------------------------------------------------------------------------
def _axes(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(6.0, 3.2), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size (tokens)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return fig, ax


def plot_swap_timings(timings: Sequence[SwapTiming]) -> Figure:
    """Fig. 19 (a), measured here: milliseconds to swap the same bytes out and in."""
    sizes = [t.block_size for t in timings]
    mib = timings[0].nbytes / 2**20
    fig, ax = _axes(f"measured on this machine: {mib:g} MiB of K/V, one copy per block")
    ax.plot(sizes, [t.swap_out_s * 1e3 for t in timings], "o-", label="swap out")
    ax.plot(sizes, [t.swap_in_s * 1e3 for t in timings], "s-", label="swap in")
    ax.plot(sizes, [t.total_s * 1e3 for t in timings], "^-", label="swap in + out")
    ax.set_yscale("log")
    ax.set_ylabel("time (ms)")
    ax.legend(fontsize=8)
    return fig


def plot_cost_model(model: CostModel, num_tokens: int, sizes: Sequence[int]) -> Figure:
    """Fig. 19 (a) from the cost model: swap falls with the block size, recompute is flat."""
    fig, ax = _axes(f"cost model: one sequence of {num_tokens} tokens, OPT-13B")
    out = [model.swap_s(num_tokens, b) * 1e3 for b in sizes]
    ax.plot(sizes, out, "o-", label="swap out (= swap in)")
    ax.plot(sizes, [2 * t for t in out], "^-", label="swap in + out")
    ax.plot(sizes, [model.recompute_s(num_tokens) * 1e3] * len(sizes), "k--", label="recompute")
    ax.axvspan(16, 64, color="#999999", alpha=0.15, label="16–64: comparable (§7.3)")
    ax.set_ylabel("time (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return fig
