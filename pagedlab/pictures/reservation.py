"""One request's KV slots: a contiguous reservation beside paged blocks (Fig. 3's wastes).

``reservation_scene(request)`` draws a :class:`~pagedlab.simulate.policies.OneRequest` on one
slot axis: contiguous (tokens, reserved, never used) over paged (the only waste: < B empty
slots of the last block), both zoomed to the first ``paged_blocks * B`` slots. A category
holding any slot is at least ``MIN_W`` wide.
"""

from __future__ import annotations

from pagedlab.pictures.drawing import Box, Drawing, Label, Rect
from pagedlab.pictures.theme import CATEGORY_COLORS, INK, tint
from pagedlab.simulate.reservation import OneRequest

USED, EMPTY = CATEGORY_COLORS["tokens"], tint(CATEGORY_COLORS["tokens"], 0.3)
FUTURE = tint(CATEGORY_COLORS["reserved"], 0.45)  # allocated, for a future token
SIZE = (8.0, 3.55)  # inches
X0, X1 = 1.55, 7.8  # the slot axis, inches
BAR_H = 0.34
ROW_Y = {"contiguous": 2.6, "paged": 2.0, "contiguous-zoom": 1.22, "zoom": 0.72}
MAX_CELLS = 128  # block boundaries drawn in the zoom; more blocks share one cell
MAX_SLOT_CELLS = 64  # up to this many slots in the zoom, each slot is drawn as its own cell
MIN_W = 0.05  # inches: the narrowest a category that holds a slot is drawn


def _row(d: Drawing, row: str, scale: float, parts: list[tuple[int, str, str]]) -> None:
    """Draw ``(slots, kind, face)`` parts left to right from X0, each nonzero one >= MIN_W."""
    widths = [n * scale for n, _, _ in parts]
    thin = [i for i, w in enumerate(widths) if 0 < w < MIN_W]
    widest = max(range(len(widths)), key=widths.__getitem__)
    widths[widest] -= sum(MIN_W - widths[i] for i in thin)
    x = X0
    for i, (_, kind, face) in enumerate(parts):
        w = MIN_W if i in thin else widths[i]
        if w > 0:
            d.rects.append(Rect(Box(x, ROW_Y[row], w, BAR_H), face, INK, kind, row, linewidth=0.5))
        x += w


def _paged(r: OneRequest) -> list[tuple[int, str, str]]:
    """The paged row's parts: tokens, empty slots the future tokens fill, empty for good."""
    future = min(r.future, r.paged_waste)
    return [(r.tokens, "tokens", USED), (future, "allocated-future", FUTURE),
            (r.paged_waste - future, "allocated-empty", EMPTY)]  # fmt: skip


def reservation_scene(request: OneRequest, scale_max: int | None = None) -> Drawing:
    """Contiguous reservation vs paged blocks for one request, in slots (see module doc)."""
    r = request
    d = Drawing(size=SIZE)
    scale = (X1 - X0) / (scale_max or r.reserved_slots)  # inches per slot
    kinds = ((r.tokens, "tokens"), (r.future, "reserved"), (r.never_used, "internal"))
    _row(d, "contiguous", scale, [(n, kind, CATEGORY_COLORS[kind]) for n, kind in kinds])
    _row(d, "paged", scale, _paged(r))
    _zoom(d, r)
    rows = (
        ("contiguous", f"contiguous: {r.reserved_slots} reserved"),
        ("paged", f"paged: {r.paged_blocks} × B={r.block_size}"),
        ("contiguous-zoom", "contiguous, zoomed"),
        ("zoom", "paged, zoomed"),
    )
    for row, text in rows:
        d.labels.append(Label(X0 - 0.08, ROW_Y[row] + BAR_H / 2, text, 7.5, ha="right"))
    top = scale_max or r.reserved_slots
    for i in range(5):
        slots = round(top * i / 4)
        d.labels.append(Label(X0 + slots * scale, ROW_Y["paged"] - 0.12, str(slots), 6.5))
    d.labels.append(Label(X0, ROW_Y["paged"] - 0.3, "KV slots (one token's K and V each)", 6.5,
                          ha="left"))  # fmt: skip
    title = (
        f"used {r.tokens}, reserved for future {r.future}, never used {r.never_used}; paged: "
        f"{r.paged_waste} allocated slots empty (< B = {r.block_size}), "
        f"{min(r.future, r.paged_waste)} of them for future tokens"
    )
    d.labels.append(Label(0.15, SIZE[1] - 0.22, title, 8.5, ha="left"))
    _legend(d)
    return d


def _zoom(d: Drawing, r: OneRequest) -> None:
    """The first ``paged_blocks * B`` slots of both, across the whole width, cell per block."""
    slots = r.paged_blocks * r.block_size
    scale = (X1 - X0) / slots
    parts, shown = [], 0  # the reservation's parts, clipped to the zoom's ``slots``
    for n, kind in ((r.tokens, "tokens"), (r.future, "reserved"), (r.never_used, "internal")):
        parts.append((min(n, slots - shown), kind, CATEGORY_COLORS[kind]))
        shown += parts[-1][0]
    _row(d, "contiguous-zoom", scale, parts)
    if r.reserved_slots > slots:
        more = f"first {slots} of its {r.reserved_slots} slots"
        d.labels.append(Label(X1, ROW_Y["contiguous-zoom"] + BAR_H + 0.1, more, 6.5, ha="right"))
    _row(d, "zoom", scale, _paged(r))
    if slots <= MAX_SLOT_CELLS:  # slot for slot: each token, reserved or empty slot is a cell
        for row in ("contiguous-zoom", "zoom"):
            for i in range(slots):
                box = Box(X0 + i * scale, ROW_Y[row], scale, BAR_H)
                d.rects.append(Rect(box, "none", INK, "slot", row, i, 0.3))
    if r.paged_blocks <= MAX_CELLS:
        for b in range(r.paged_blocks):
            box = Box(X0 + b * r.block_size * scale, ROW_Y["zoom"], r.block_size * scale, BAR_H)
            d.rects.append(Rect(box, "none", INK, "block", "zoom", b, 0.9))
    d.labels.append(Label(X0, ROW_Y["zoom"] - 0.12, "0", 6.5))
    d.labels.append(Label(X1, ROW_Y["zoom"] - 0.12, f"{slots} slots", 6.5, ha="right"))


def _legend(d: Drawing) -> None:
    rows = (  # contiguous's categories above, paging's below
        (0.3, ((USED, "token states"), (CATEGORY_COLORS["reserved"], "reserved for future tokens"),
               (CATEGORY_COLORS["internal"], "never used (internal fragmentation)"))),
        (0.08, ((FUTURE, "paged: allocated, for future tokens"),
                (EMPTY, "allocated, stays empty (paging's only waste)"))),
    )  # fmt: skip
    for y, keys in rows:
        x = 0.15
        for face, text in keys:
            d.rects.append(Rect(Box(x, y, 0.22, 0.14), face, INK, "key", "legend", linewidth=0.5))
            d.labels.append(Label(x + 0.3, y + 0.07, text, 7.0, ha="left"))
            x += 0.45 + 0.062 * len(text)
