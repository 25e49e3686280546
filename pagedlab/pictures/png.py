"""The one PNG encoder: a matplotlib figure -> PNG bytes; PNG bytes or pixels -> small PNG.

:func:`to_png` draws with Agg at the figure's dpi and :func:`rgb_png` writes the pixels
(unfiltered, zlib level 1, no timestamp): same figure, same bytes. :func:`quantised_png` makes
them small for static frames; :func:`save_png` writes the README's.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def to_png(figure: Figure) -> bytes:
    """PNG bytes of a matplotlib figure (a ``Drawing``: ``canvas.drawing_png``)."""
    if not isinstance(figure, Figure):
        raise TypeError(
            f"to_png takes a matplotlib Figure, got a {type(figure).__name__} "
            "(a Drawing: pagedlab.pictures.canvas.drawing_png)"
        )
    agg = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    agg.draw()
    return rgb_png(np.asarray(agg.buffer_rgba())[..., :3])


def rgb_png(pixels: np.ndarray) -> bytes:
    """RGB ``pixels`` [height, width, 3] (uint8) as PNG bytes: every row unfiltered, zlib level
    1. Flat-coloured pictures compress well without the per-row filter search a general
    encoder makes (which costs more than the compression here); lossless, no timestamp."""
    height, width, _ = pixels.shape
    rows = np.empty((height, 1 + 3 * width), np.uint8)
    rows[:, 0] = 0  # each row's filter byte: none
    rows[:, 1:] = pixels.reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, not interlaced
    data = _chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + data + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def quantised_png(picture: bytes | np.ndarray, colors: int) -> bytes:
    """``picture`` (PNG bytes, or RGB pixels [height, width, 3]) as a PNG of ``colors`` colours:
    median cut, no dithering, ``optimize``; same pixels, same bytes."""
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
