"""The one theme every picture uses: the Okabe-Ito palette and what each colour stands for.

Okabe & Ito's eight colours stay distinguishable under the common colour-vision
deficiencies (protan, deutan, tritan). Sequences (tables) take them in order; the memory
categories of Figs. 2-3 take fixed ones, so "internal fragmentation" is the same vermillion
in every notebook. Greys are for what belongs to nobody in the picture.
"""

from __future__ import annotations

#: Okabe-Ito colours, one per table (sequence), in the order tables are passed.
PALETTE: tuple[str, ...] = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
)
FREE_COLOR = "#EEEEEE"  # a free block
FREE_EDGE = "#BBBBBB"
OTHER_COLOR = "#9E9E9E"  # a block held by a table that is not drawn
INK = "#222222"  # text and outlines
HIGHLIGHT = "#000000"  # the block an event or a step touched
CARRIED = "#BBBBBB"  # what a running sum carried over (kernel steps)

#: What a KV slot is used for (Fig. 2 / Fig. 3 categories), one colour each.
CATEGORY_COLORS: dict[str, str] = {
    "tokens": "#009E73",  # bluish green: holds a token's K/V
    "reserved": "#E69F00",  # orange: reserved for a future token
    "internal": "#D55E00",  # vermillion: internal fragmentation, never used
    "external": "#9E9E9E",  # grey: external fragmentation and others
    "idle": "#EEEEEE",  # nobody waiting
}
SIMULATED = "#0072B2"  # our numbers beside the paper's
PAPER = "#BBBBBB"  # the paper's numbers

DPI = 80  # every picture's default resolution (a 9-inch figure is 720 px wide)


def table_color(index: int) -> str:
    """Colour of the ``index``-th table passed to a drawing function."""
    return PALETTE[index % len(PALETTE)]


def tint(color: str, amount: float = 0.22) -> str:
    """``color`` mixed with white (``amount`` of the colour): an allocated but empty slot."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * amount):02X}" for c in rgb)
