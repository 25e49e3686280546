"""A picture of one kernel program's walk over a sequence, drawn from ``paged_attention_steps``.

Three panels share one x axis, a column per logical block: the reads, the scores with the
running max ``m``, and the running sum (``l_old * alpha`` carried, in grey, plus what the
block added). Everything comes from the ``LoopStep`` records, unmodified; readable up to
about 16 steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.patches import FancyBboxPatch, Patch

from pagedlab.attention.kernel_steps import LoopStep
from pagedlab.pictures.theme import CARRIED, DPI, INK, OTHER_COLOR, PALETTE, tint

BAR_W, BAR_SHIFT = 0.42, 0.12  # the running-sum bar: width, and its shift right of the tick
OLD_W = 0.2  # the dashed bar of l_old, left of the new one


def online_softmax_figure(steps: Sequence[LoopStep], title: str = "", dpi: float = DPI) -> Figure:
    """A new figure of ``steps`` (see the module docstring for what each panel shows)."""
    if not steps:
        raise ValueError("steps is empty: replay at least one block")
    n = len(steps)
    fig = Figure(figsize=(max(6.0, 1.6 * n + 2.0), 5.4), dpi=dpi, facecolor="white")
    FigureCanvasAgg(fig)
    reads, scores, sums = fig.subplots(
        3, 1, sharex=True, gridspec_kw={"height_ratios": [0.8, 1.3, 1.3], "hspace": 0.12}
    )
    xs = list(range(n))
    color = [PALETTE[s.physical % len(PALETTE)] for s in steps]
    # reads: logical -> physical
    reads.set_ylim(0, 1)
    reads.set_yticks([])
    for side in ("top", "right", "left"):
        reads.spines[side].set_visible(False)
    for x, s, c in zip(xs, steps, color, strict=True):
        box = FancyBboxPatch((x - 0.38, 0.1), 0.76, 0.8, "round,pad=0.02", fc=tint(c, 0.35), ec=c)
        reads.add_patch(box)
        first, last = s.positions[0], s.positions[-1]
        span = f"pos {first}" if first == last else f"pos {first}-{last}"
        reads.text(x, 0.68, f"physical {s.physical}", ha="center", va="center", fontsize=9)
        reads.text(x, 0.42, span, ha="center", va="center", fontsize=8, color=INK)
        if s.masked:
            reads.text(x, 0.2, f"+{s.masked} masked", ha="center", va="center", fontsize=7)
    reads.set_title(title or "one kernel program, block by block", fontsize=10, loc="left")
    # scores and running max
    for x, s, c in zip(xs, steps, color, strict=True):
        k = len(s.scores)
        offsets = [(j - (k - 1) / 2) * min(0.12, 0.6 / max(k, 1)) for j in range(k)]
        scores.scatter([x + o for o in offsets], s.scores, s=18, color=c, zorder=3)
    m = [s.m_new for s in steps]
    scores.step(xs, m, where="mid", color=INK, linewidth=1.4, label="running max m", zorder=2)
    scores.plot(xs, m, "o", color=INK, markersize=4, zorder=2)
    for x, s in zip(xs, steps, strict=True):
        if s.rescaled:
            scores.annotate(
                "max moved", (x, s.m_new), xytext=(0, 8), textcoords="offset points",
                ha="center", fontsize=7,
            )  # fmt: skip
    low = min(min(s.scores) for s in steps)
    high = max(m)
    pad = max(0.5, 0.15 * (high - low))
    scores.set_ylim(low - pad, high + 2 * pad)
    scores.set_ylabel("scores, m", fontsize=9)
    scores.legend(loc="upper left", fontsize=8, frameon=False)
    # running sum: carried (rescaled) + this block
    carried = [s.l_sum - s.block_sum for s in steps]
    l_old = [0.0] + [s.l_sum for s in steps[:-1]]
    bar_x = [x + BAR_SHIFT for x in xs]  # the new l; l_old stands beside it, never inside it
    sums.bar(bar_x, carried, width=BAR_W, color=CARRIED, label="carried: l_old × alpha")
    sums.bar(bar_x, [s.block_sum for s in steps], width=BAR_W, bottom=carried, color=color)
    shown_old = False
    for x, s, before in zip(xs, steps, l_old, strict=True):
        if x > 0:
            old_x = x + BAR_SHIFT - BAR_W / 2 - OLD_W / 2 - 0.04
            label = None if shown_old else "l_old, before × alpha"
            sums.bar(old_x, before, width=OLD_W, fill=False, edgecolor=OTHER_COLOR,
                     linestyle="--", label=label)  # fmt: skip
            shown_old = True
            text = f"{before:.3f}\n× {s.alpha:.3f}"
            sums.text(old_x, before, text, ha="center", va="bottom", fontsize=7)
        sums.text(x + BAR_SHIFT, s.l_sum, f"l = {s.l_sum:.3f}", ha="center", va="bottom",
                  fontsize=8)  # fmt: skip
    top = max(max(s.l_sum for s in steps), max(l_old))
    sums.set_ylim(0, top * 1.6)
    sums.set_ylabel("running sum l", fontsize=9)
    handles, labels = sums.get_legend_handles_labels()
    handles.insert(1, tuple(Patch(color=c) for c in dict.fromkeys(color)))  # every block's colour
    labels.insert(1, "this block: Σ exp(s - m)")
    sums.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0)},
                loc="upper left", fontsize=8, frameon=False, ncols=2)  # fmt: skip
    sums.set_xticks(xs, [f"logical {s.logical}" for s in steps])
    sums.set_xlim(-0.6, n - 0.4)
    fig.subplots_adjust(left=0.11, right=0.97, top=0.93, bottom=0.07)
    return fig
