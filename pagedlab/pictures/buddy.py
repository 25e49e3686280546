"""A buddy allocator splitting and merging, one frame per row (notebook 07, §6.1).

``buddy_scene(frames)`` draws :class:`~pagedlab.pictures.scenes.BuddyFrame` snapshots over one slot
axis and reads them only. Rect kinds: ``reserved``, ``rounding``, ``free-block``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pagedlab.pictures.drawing import Box, Drawing, Label, Rect
from pagedlab.pictures.theme import CATEGORY_COLORS, FREE_COLOR, FREE_EDGE, INK, tint


class BuddyFrame(Protocol):
    """What a frame holds (``scenes.BuddyFrame`` is one): (start, size) extents and blocks."""

    @property
    def caption(self) -> str: ...
    @property
    def live(self) -> Sequence[tuple[int, int]]: ...
    @property
    def free(self) -> Sequence[tuple[int, int]]: ...
    @property
    def requested(self) -> int: ...


X0, X1 = 0.3, 7.7  # the slot axis, inches
BAR_H, ROW = 0.32, 0.78


def buddy_scene(frames: Sequence[BuddyFrame]) -> Drawing:
    """One bar per frame, top to bottom, on one slot axis (module doc)."""
    if not frames:
        raise ValueError("buddy_scene needs at least one frame, got none")
    size = max(start + extent for f in frames for start, extent in (*f.live, *f.free))
    scale = (X1 - X0) / size
    height = 0.45 + ROW * len(frames)
    d = Drawing(size=(8.0, height))
    for i, frame in enumerate(frames):
        y = height - 0.45 - ROW * (i + 1) + 0.12
        d.labels.append(Label(X0, y + BAR_H + 0.13, f"{i + 1}. {frame.caption}", 7.0, ha="left"))
        for start, extent in frame.free:
            box = Box(X0 + start * scale, y, extent * scale, BAR_H)
            d.rects.append(Rect(box, FREE_COLOR, FREE_EDGE, "free-block", f"frame{i}", start))
            d.labels.append(Label(box.x + box.w / 2, y + BAR_H / 2, f"free {extent}", 6.5))
        for start, extent in frame.live:
            used = min(frame.requested, extent)
            color = CATEGORY_COLORS["reserved"]
            box = Box(X0 + start * scale, y, used * scale, BAR_H)
            d.rects.append(Rect(box, color, INK, "reserved", f"frame{i}", start))
            d.labels.append(Label(box.x + box.w / 2, y + BAR_H / 2, f"reserved {used}", 6.5))
            rest = Box(box.x + box.w, y, (extent - used) * scale, BAR_H)
            d.rects.append(Rect(rest, tint(color, 0.35), INK, "rounding", f"frame{i}", start))
            d.labels.append(Label(rest.x + rest.w / 2, y + BAR_H / 2,
                                  f"rounding {extent - used}", 6.5))  # fmt: skip
    d.labels.append(Label(0.15, height - 0.2, f"a buddy allocator over {size} slots", 8.0,
                          ha="left"))  # fmt: skip
    return d
