"""The one PNG encoder: a matplotlib figure -> PNG bytes; PNG bytes or pixels -> small PNG.

It takes figures and bytes only (a ``Drawing`` is rendered by :mod:`pagedlab.pictures.canvas`,
which imports this module, never the other way). Every picture in pagedlab goes through
:func:`to_png`: Agg draws the figure at its own dpi, PIL writes the RGB pixels at zlib level 1
(fast; PNG stays lossless) with no timestamp, so the same figure gives the same bytes on every
run. :func:`quantised_png` makes them small (a few-colour palette) for static frames, and
:func:`save_png` writes the README's files with it. A notebook cell shows any picture with
:func:`pagedlab.pictures.canvas.image`.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def to_png(figure: Figure) -> bytes:
    """PNG bytes of a matplotlib figure (a ``Drawing``: ``canvas.drawing_png``)."""
    from PIL import Image

    if not isinstance(figure, Figure):
        raise TypeError(
            f"to_png takes a matplotlib Figure, got a {type(figure).__name__} "
            "(a Drawing: pagedlab.pictures.canvas.drawing_png)"
        )
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else None
    canvas = canvas or FigureCanvasAgg(figure)
    canvas.draw()
    width, height = canvas.get_width_height()
    pixels = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba())
    buffer = io.BytesIO()
    pixels.convert("RGB").save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def quantised_png(picture: bytes | np.ndarray, colors: int) -> bytes:
    """``picture`` (PNG bytes, or RGB pixels [height, width, 3]) as a PNG of ``colors`` colours.

    Quantised by median cut (no dithering: that applies only to a given palette), saved with
    ``optimize``: the same pixels always give the same bytes, and flat-coloured pictures, which
    use a handful of colours, lose nothing visible. Static frames and the README's files use it.
    """
    from PIL import Image

    if isinstance(picture, bytes):
        rgb = Image.open(io.BytesIO(picture)).convert("RGB")
    else:
        rgb = Image.fromarray(picture)
    buffer = io.BytesIO()
    rgb.quantize(colors, method=Image.Quantize.MEDIANCUT).save(buffer, format="png", optimize=True)
    return buffer.getvalue()


def save_png(pixels: np.ndarray, path: Path | str, colors: int = 96) -> None:
    """Write RGB ``pixels`` [height, width, 3] as a small PNG file (see :func:`quantised_png`)."""
    Path(path).write_bytes(quantised_png(pixels, colors))
