"""The matplotlib half of a picture: a ``Canvas`` that shows a ``Drawing`` (its data half,
:mod:`pagedlab.pictures.drawing`), and ``image`` / ``drawing_png`` for a cell.

``Canvas.render(drawing)`` replaces its figure's four collections (rectangles, shafts,
arrowheads, glyphs) in place, text as cached glyph paths, so a redraw costs tens of
milliseconds (a ``Text`` artist costs 2-4 ms). Inches (default 9 x 4.6); Agg only, no pyplot.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from matplotlib.transforms import Affine2D

from pagedlab.pictures.drawing import FIG_H, FIG_W, Box, Drawing, Point
from pagedlab.pictures.png import to_png
from pagedlab.pictures.theme import DPI

_FONT = FontProperties(family="DejaVu Sans")


@lru_cache(maxsize=4096)
def _glyphs(text: str, size: float, ha: str) -> Path:
    """``text`` as a filled path in points, centred vertically, anchored by ``ha``."""
    path = TextPath((0, 0), text, size=size, prop=_FONT)
    # The control points' span, not Path.get_extents(): exact Bezier extents cost ~12 ms a
    # label, and the outline's control points lie within a hair of the ink.
    xs = path.vertices[:, 0] if len(path.vertices) else np.zeros(1)
    x0, x1 = float(xs.min()), float(xs.max())
    dx = -(x0 + x1) / 2 if ha == "center" else (-(x1 - x0) if ha == "right" else 0.0)
    dy = -size * 0.36  # centre on the height of a digit, not on this label's own ink
    return Path(path.vertices + (dx, dy), path.codes)


def drawing_png(picture: Drawing | Figure) -> bytes:
    """PNG bytes of a ``Drawing`` rendered on a fresh canvas, or of a figure (:func:`to_png`)."""
    if isinstance(picture, Drawing):
        return Canvas().render(picture).png()
    if isinstance(picture, Figure):
        return to_png(picture)
    raise TypeError(
        f"picture must be a Drawing or a matplotlib Figure, got a {type(picture).__name__}"
    )


def image(picture: Drawing | Figure | bytes) -> object:
    """An ``IPython.display.Image`` of a ``Drawing``, a figure or PNG bytes (a cell's value)."""
    from IPython.display import Image

    data = picture if isinstance(picture, bytes) else drawing_png(picture)
    return Image(data=data, format="png")


class Canvas:
    """A figure that shows one ``Drawing`` at a time, its artists made once and updated in
    place; a drawing laid out for another size resizes the figure."""

    def __init__(self, dpi: float = DPI, size: tuple[float, float] = (FIG_W, FIG_H)) -> None:
        self.dpi = dpi
        self.figure = Figure(figsize=size, dpi=dpi, facecolor="white")
        self.canvas = FigureCanvasAgg(self.figure)
        self.ax = self.figure.add_axes((0, 0, 1, 1))
        self.ax.set_axis_off()
        self._resize(size)
        self.shafts = LineCollection([], linewidths=0.9, zorder=1)
        self.rects = PolyCollection([], zorder=2)
        self.heads = PolyCollection([], linewidths=0, zorder=3)
        self.glyphs = PathCollection(
            [], offsets=np.zeros((0, 2)), offset_transform=self.ax.transData, zorder=4
        )
        self.glyphs.set_transform(Affine2D().scale(dpi / 72))  # glyphs are in points
        for artist in (self.shafts, self.rects, self.heads, self.glyphs):
            self.ax.add_collection(artist)
        self.drawing: Drawing | None = None

    def _resize(self, size: tuple[float, float]) -> None:
        self.size = size
        self.figure.set_size_inches(*size)
        self.ax.set_xlim(0, size[0])
        self.ax.set_ylim(0, size[1])

    def render(self, drawing: Drawing) -> Canvas:
        """Show ``drawing``; returns self."""
        if drawing.size != self.size:
            self._resize(drawing.size)
        rects = drawing.rects
        self.rects.set_verts([_corners(r.box) for r in rects])
        self.rects.set_facecolor([r.face for r in rects])
        self.rects.set_edgecolor([r.edge for r in rects])
        self.rects.set_linewidth([r.linewidth for r in rects])
        shapes = [arrow.shape() for arrow in drawing.arrows]
        shafts, heads = [shaft for shaft, _ in shapes], [head for _, head in shapes]
        colors = [a.color for a in drawing.arrows]
        self.shafts.set_segments(shafts)
        self.shafts.set_color(colors)
        self.heads.set_verts(heads)
        self.heads.set_facecolor(colors)
        labels = drawing.labels
        self.glyphs.set_paths([_glyphs(lb.text, round(lb.size * 4) / 4, lb.ha) for lb in labels])
        self.glyphs.set_offsets(np.array([(lb.x, lb.y) for lb in labels]).reshape(-1, 2))
        self.glyphs.set_facecolor([lb.color for lb in labels])
        self.glyphs.set_edgecolor("none")
        self.drawing = drawing
        return self

    def png(self) -> bytes:
        """The figure as PNG bytes (:func:`pagedlab.pictures.png.to_png`)."""
        return to_png(self.figure)

    def rgb(self) -> np.ndarray:
        """The rendered figure as an RGB array (GIF frames)."""
        self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()


def _corners(b: Box) -> list[Point]:
    return [(b.x, b.y), (b.x + b.w, b.y), (b.x + b.w, b.y + b.h), (b.x, b.y + b.h)]
