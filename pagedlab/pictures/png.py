"""The one PNG encoder: a matplotlib figure (or a ``Drawing``) -> PNG bytes or a notebook image.

Every picture in pagedlab goes through :func:`to_png`: Agg draws the figure at its own dpi,
PIL writes the RGB pixels at zlib level 1 (fast; PNG stays lossless) with no timestamp, so
the same figure gives the same bytes on every run. :func:`image` wraps them in an
``IPython.display.Image`` for a notebook cell (the cell's value, displayed once);
:func:`save_png` writes the README's files, quantised so they stay small.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from pagedlab.pictures.canvas import Drawing


def to_png(picture: Figure | Drawing) -> bytes:
    """PNG bytes of a figure, or of a ``Drawing`` rendered on a fresh canvas."""
    from PIL import Image

    figure = _figure(picture)
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else None
    canvas = canvas or FigureCanvasAgg(figure)
    canvas.draw()
    width, height = canvas.get_width_height()
    pixels = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba())
    buffer = io.BytesIO()
    pixels.convert("RGB").save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def save_png(pixels: np.ndarray, path: Path | str, colors: int = 96) -> None:
    """Write RGB ``pixels`` [height, width, 3] as a small PNG file (the README's figures).

    Quantised to ``colors`` by median cut without dithering, so the same pixels always give
    the same bytes; flat-coloured pictures lose nothing visible.
    """
    from PIL import Image

    quantised = Image.fromarray(pixels).quantize(
        colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    quantised.save(path, format="png", optimize=True)


def image(picture: Figure | Drawing | bytes) -> object:
    """An ``IPython.display.Image`` of a figure, a ``Drawing`` or PNG bytes (a cell's value)."""
    from IPython.display import Image

    data = picture if isinstance(picture, bytes) else to_png(picture)
    return Image(data=data, format="png")


def _figure(picture: Figure | Drawing) -> Figure:
    if isinstance(picture, Figure):
        return picture
    from pagedlab.pictures.canvas import Canvas, Drawing

    if isinstance(picture, Drawing):
        return Canvas().render(picture).figure
    raise TypeError(f"picture must be a matplotlib Figure or a Drawing, got {picture!r}")
