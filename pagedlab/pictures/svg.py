"""A ``Drawing`` as SVG: the live site's pictures, from the same scenes the PNGs come from.

:func:`to_svg` writes the very drawing :class:`~pagedlab.pictures.canvas.Canvas` renders, with
the canvas's conventions: inches with the origin bottom left become points (1/72 in) with y
flipped; labels are centred on a digit's height (``0.36 x size`` under the anchor). Strings
are XML-escaped; the output depends only on the drawing.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from pagedlab.pictures.drawing import Arrow, Drawing, Label, Point, Rect

PT = 72.0  # points per inch
SHAFT_WIDTH = 0.9  # points
ANCHORS = {"center": "middle", "left": "start", "right": "end"}
FONT = "DejaVu Sans, Verdana, sans-serif"


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


class _Page:
    """Converts inches (origin bottom left) to SVG points (origin top left)."""

    def __init__(self, height: float) -> None:
        self.height = height

    def point(self, p: Point) -> str:
        return f"{_num(p[0] * PT)},{_num((self.height - p[1]) * PT)}"

    def rect(self, r: Rect) -> str:
        b = r.box
        return (
            f'<rect x="{_num(b.x * PT)}" y="{_num((self.height - b.y - b.h) * PT)}" '
            f'width="{_num(b.w * PT)}" height="{_num(b.h * PT)}" fill={quoteattr(r.face)} '
            f'stroke={quoteattr(r.edge)} stroke-width="{_num(r.linewidth)}" '
            f"data-kind={quoteattr(r.kind)} data-view={quoteattr(r.view)}/>"
        )

    def label(self, lb: Label) -> str:
        x, y = lb.x * PT, (self.height - lb.y) * PT + 0.36 * lb.size
        anchor = ANCHORS.get(lb.ha, "middle")
        return (
            f'<text x="{_num(x)}" y="{_num(y)}" font-size="{_num(lb.size)}" '
            f'text-anchor="{anchor}" fill={quoteattr(lb.color)}>{escape(lb.text)}</text>'
        )

    def shaft(self, a: Arrow) -> str:
        shaft, _head = a.shape()
        return (
            f'<polyline points="{" ".join(map(self.point, shaft))}" fill="none" '
            f'stroke={quoteattr(a.color)} stroke-width="{SHAFT_WIDTH}"/>'
        )

    def head(self, a: Arrow) -> str:
        _shaft, head = a.shape()
        return f'<polygon points="{" ".join(map(self.point, head))}" fill={quoteattr(a.color)}/>'


def to_svg(drawing: Drawing, title: str = "") -> str:
    """``drawing`` as one standalone ``<svg>`` element (scales to its container's width)."""
    width, height = drawing.size
    page = _Page(height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_num(width * PT)} '
        f'{_num(height * PT)}" width="100%" role="img" font-family={quoteattr(FONT)}>'
    ]
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    parts.append('<rect width="100%" height="100%" fill="white"/>')
    # the canvas's z-order: shafts, rectangles, arrowheads, labels
    parts += [page.shaft(a) for a in drawing.arrows]
    parts += [page.rect(r) for r in drawing.rects]
    parts += [page.head(a) for a in drawing.arrows]
    parts += [page.label(lb) for lb in drawing.labels]
    parts.append("</svg>")
    return "".join(parts)
