"""The data half of every picture: a ``Drawing`` of rectangles, labels and arrows, in inches.

A scene function reads state and returns a ``Drawing``: plain data that tests count by kind,
:class:`~pagedlab.pictures.canvas.Canvas` renders (PNG) and :mod:`pagedlab.pictures.svg`
writes (SVG). Only the standard library and the theme are imported, so it runs in Pyodide.
Coordinates: inches, origin bottom left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from pagedlab.pictures.theme import INK

FIG_W, FIG_H = 9.0, 4.6  # inches: the default canvas
HEAD_LEN, HEAD_HALF = 0.1, 0.045  # an arrowhead's length and half width, inches
Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A rectangle in inches: left, bottom, width, height."""

    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class Rect:
    """A filled rectangle; ``kind`` says what it stands for (tests count by kind)."""

    box: Box
    face: str
    edge: str
    kind: str  # filled-slot, empty-slot, tab, free-block, other-block, table-cell, badge, key
    view: str  # logical, pool, table, legend, ...
    block: int | None = None  # physical block (pool) or logical block (logical view)
    linewidth: float = 0.6


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    size: float = 7.0  # points
    color: str = INK
    ha: str = "center"  # center, left or right; always centred vertically


@dataclass(frozen=True)
class Arrow:
    """From the right edge of logical block ``logical`` to the left edge of ``physical``,
    through the ``via`` waypoints (none: a straight arrow)."""

    start: Point
    end: Point
    color: str
    logical: int
    physical: int
    via: tuple[Point, ...] = ()

    def shape(self) -> tuple[list[Point], list[Point]]:
        """A shaft through ``via`` stopping at the head, and a triangular head ending at
        ``end`` (the canvas and the SVG draw the same one)."""
        points = [self.start, *self.via]
        (x0, y0), (x1, y1) = points[-1], self.end
        length = max(math.hypot(x1 - x0, y1 - y0), 1e-9)
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        bx, by = x1 - ux * HEAD_LEN, y1 - uy * HEAD_LEN
        px, py = -uy * HEAD_HALF, ux * HEAD_HALF
        return [*points, (bx, by)], [(x1, y1), (bx + px, by + py), (bx - px, by - py)]


@dataclass
class Drawing:
    """What one picture is made of; ``boxes`` maps (view, block) to where it was drawn."""

    rects: list[Rect] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)
    boxes: dict[tuple[str, int], Box] = field(default_factory=dict)
    size: tuple[float, float] = (FIG_W, FIG_H)  # the canvas it is laid out for, inches

    def extend(self, other: Drawing) -> None:
        self.rects += other.rects
        self.labels += other.labels
        self.arrows += other.arrows
        self.boxes.update(other.boxes)

    def count(self, kind: str, view: str | None = None) -> int:
        return sum(1 for r in self.rects if r.kind == kind and (view is None or r.view == view))


def stack(top: Drawing, bottom: Drawing) -> Drawing:
    """One drawing with ``top`` above ``bottom`` (as wide as the wider, as tall as both)."""
    dy = bottom.size[1]
    d = Drawing(size=(max(top.size[0], bottom.size[0]), top.size[1] + dy))
    d.extend(bottom)
    d.rects += [replace(r, box=replace(r.box, y=r.box.y + dy)) for r in top.rects]
    d.labels += [replace(lb, y=lb.y + dy) for lb in top.labels]
    d.arrows += [
        replace(a, start=(a.start[0], a.start[1] + dy), end=(a.end[0], a.end[1] + dy),
                via=tuple((x, y + dy) for x, y in a.via))
        for a in top.arrows
    ]  # fmt: skip
    d.boxes.update({k: replace(b, y=b.y + dy) for k, b in top.boxes.items()})
    return d


def font_size(width: float, text: str, largest: float = 7.0) -> float:
    """Largest size <= ``largest`` (points) at which ``text`` fits ``width`` inches."""
    return min(largest, width * 72 / (0.64 * max(2, len(text))))
