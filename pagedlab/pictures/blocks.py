"""Scenes of paged KV memory, drawn from the real allocator and block tables (Figs. 6-7).

``scene(allocator, tables)`` shows ``tables[0]`` as PagedAttention sees it: its *logical view*
(slots past ``num_tokens`` tinted with a dot: allocated, empty), the *physical pool* in address
order (each block in the colour of the first drawn table holding it; light grey free, dark grey
held by a table not drawn; ``×2`` when shared), an *arrow* per logical block (through empty
lanes, never behind a block), its *block table*, and a key naming sequences by letter, never
by table id. It only reads the state; readable up to a 32-block pool and 64 positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures.drawing import FIG_H, Arrow, Box, Drawing, Label, Point, Rect, font_size
from pagedlab.pictures.theme import (
    FREE_COLOR,
    FREE_EDGE,
    HIGHLIGHT,
    INK,
    OTHER_COLOR,
    PALETTE,
    table_color,
    tint,
)

TAB = 0.22  # width of the tab carrying a block's index, with the gap after it
TAB_GAP = 0.045  # space between the tab and the block's first slot
TAB_FACE = INK  # tabs are dark with a white id: never mistaken for a slot
GAP = 0.16  # space after a block, room for an arrowhead
ROWS = 8  # blocks per column, in both views


# --- state -> drawing ------------------------------------------------------------------------
def slot_labels(table: BlockTable, values: Sequence[object] | None) -> list[str]:
    """Labels of a table's positions: ``values`` if given, else the example's 1, 2, 3, ..."""
    if values is None:
        return [str(p + 1) for p in range(table.num_tokens)]
    if len(values) < table.num_tokens:
        raise ValueError(
            f"values has {len(values)} entries but table {table.id} holds {table.num_tokens}"
        )
    return [f"{v:g}" if isinstance(v, float) else str(v) for v in values[: table.num_tokens]]


MIN_SIZE = 5.0


class _Grid:
    """Blocks in columns of ``rows`` inside ``box``: block ``i`` goes down, then right."""

    def __init__(self, box: Box, n: int, rows: int = ROWS) -> None:
        cols = max(1, ceil_div(n, rows))
        self.box, self.rows = box, max(1, ceil_div(n, cols))  # balanced: no orphan column
        self.pitch_x, self.pitch_y = box.w / cols, box.h / rows

    def block(self, i: int) -> Box:
        col, row = divmod(i, self.rows)
        height = self.pitch_y * 0.72
        top = self.box.y + self.box.h - row * self.pitch_y
        return Box(self.box.x + col * self.pitch_x, top - height, self.pitch_x - GAP, height)

    def slot_w(self, block_size: int) -> float:
        return (self.pitch_x - GAP - TAB) / block_size

    def route(self, i: int, start: Point) -> tuple[Point, ...]:
        """Waypoints from ``start`` (left of the grid) to block ``i``, through the empty lane
        above its row and the gap before its column, so no arrow passes behind a block."""
        col = i // self.rows
        if col == 0:
            return ()
        b = self.block(i)
        lane = b.y + b.h + (self.pitch_y - b.h) / 2
        corridor = b.x - GAP * 0.85
        return ((self.box.x - 0.12, lane), (corridor, lane), (corridor, b.y + b.h / 2))


def _block(d: Drawing, view: str, index: int, b: Box) -> None:
    """The block's id tab: dark with a white numeral, and a gap before the first slot, so the
    id never reads as one more slot ("4 | 1 2 3 4", not "4 1 2 3 4"). A highlighted block's
    outline is drawn last, by :func:`pool_view`, so no slot covers it."""
    d.boxes[(view, index)] = b
    tab = Box(b.x, b.y, TAB - TAB_GAP, b.h)
    d.rects.append(Rect(tab, TAB_FACE, TAB_FACE, "tab", view, index, 0.6))
    d.labels.append(Label(tab.x + tab.w / 2, b.y + b.h / 2, str(index), 6.0, "white"))


def _slot(d: Drawing, view: str, index: int, b: Box, offset: int, w: float, color: str,
          label: str | None, show: bool) -> None:  # fmt: skip
    """Slot ``offset`` of block ``b``: filled with ``label`` (written if ``show``) or empty."""
    slot = Box(b.x + TAB + offset * w, b.y, w, b.h)
    cx, cy = slot.x + w / 2, slot.y + b.h / 2
    if label is None:
        d.rects.append(Rect(slot, tint(color), color, "empty-slot", view, index))
        if show:
            d.labels.append(Label(cx, cy, "·", 9.0, INK))
    else:
        edge = INK if show else color  # narrow slots: no dark lines, one caption per block
        d.rects.append(Rect(slot, color, edge, "filled-slot", view, index, 0.6 if show else 0.3))
        if show:
            d.labels.append(Label(cx, cy, label, font_size(w, label)))


def logical_view(
    table: BlockTable,
    box: Box,
    values: Sequence[object] | None = None,
    color: str = PALETTE[0],
) -> Drawing:
    """A table's logical blocks in ``box``: one filled slot per token, empty slots after."""
    d = Drawing()
    size, n_tokens, n_blocks = table.block_size, table.num_tokens, len(table.blocks)
    labels = slot_labels(table, values)
    grid = _Grid(box, n_blocks)
    w = grid.slot_w(size)
    show = font_size(w, max(labels, key=len, default="0")) >= MIN_SIZE
    for i in range(n_blocks):
        b = grid.block(i)
        _block(d, "logical", i, b)
        for offset in range(size):
            pos = i * size + offset
            label = labels[pos] if pos < n_tokens else None
            _slot(d, "logical", i, b, offset, w, color, label, show)
    return d


def pool_contents(
    allocator: BlockAllocator,
    tables: Sequence[BlockTable],
    values: Sequence[Sequence[object] | None] | None = None,
) -> dict[tuple[int, int], str]:
    """Label of every written slot ``(block, offset)``, from the tables' slot mappings (tables
    sharing a block wrote the same content: the first one's label wins)."""
    size = allocator.block_size
    contents: dict[tuple[int, int], str] = {}
    for index, table in enumerate(tables):
        labels = slot_labels(table, None if values is None else values[index])
        for pos, slot in enumerate(table.slot_mapping()):
            contents.setdefault(divmod(slot, size), labels[pos])
    return contents


def pool_view(
    allocator: BlockAllocator,
    tables: Sequence[BlockTable],
    box: Box,
    values: Sequence[Sequence[object] | None] | None = None,
    highlight: Sequence[int] = (),
    copies: Mapping[int, int] | None = None,
) -> Drawing:
    """Every physical block in address order, coloured by the first table holding it; a
    copy-on-write target in ``copies`` no table holds yet is drawn as its source."""
    d = Drawing()
    size, refcounts = allocator.block_size, allocator.refcounts()
    contents = pool_contents(allocator, tables, values)
    owner: dict[int, int] = {}
    for index, table in enumerate(tables):
        for block in table.blocks:
            owner.setdefault(block, index)
    for dst, src in (copies or {}).items():
        if dst not in owner and src in owner and refcounts[dst] > 0:
            owner[dst] = owner[src]
            for offset in range(size):
                if (src, offset) in contents:
                    contents[(dst, offset)] = contents[(src, offset)]
    grid = _Grid(box, allocator.num_blocks)
    w = grid.slot_w(size)
    show = font_size(w, max(contents.values(), key=len, default="0")) >= MIN_SIZE
    for block in range(allocator.num_blocks):
        b = grid.block(block)
        _block(d, "pool", block, b)
        lit = block in highlight
        if block not in owner:
            free = refcounts[block] == 0
            face = FREE_COLOR if free else OTHER_COLOR
            rest = Box(b.x + TAB, b.y, b.w - TAB, b.h)
            kind = "free-block" if free else "other-block"
            d.rects.append(Rect(rest, face, HIGHLIGHT if lit else FREE_EDGE, kind, "pool", block))
            continue
        color = table_color(owner[block])
        filled = []
        for offset in range(size):
            label = contents.get((block, offset))
            _slot(d, "pool", block, b, offset, w, color, label, show)
            if label is not None:
                filled.append(label)
        if not show and filled:
            span = filled[0] if len(filled) == 1 else f"{filled[0]}–{filled[-1]}"
            cx = b.x + TAB + (b.w - TAB) / 2
            half = 0.03 + 0.035 * len(span)  # a white back under the caption
            back = Box(cx - half, b.y + b.h * 0.22, 2 * half, b.h * 0.56)
            d.rects.append(Rect(back, "white", "white", "caption", "pool", block, 0.0))
            d.labels.append(Label(cx, b.y + b.h / 2, span, 6.5))
        if refcounts[block] > 1:
            badge = Box(b.x + b.w - 0.2, b.y + b.h - 0.05, 0.22, 0.14)
            d.rects.append(Rect(badge, INK, INK, "badge", "pool", block))
            d.labels.append(
                Label(badge.x + 0.11, badge.y + 0.07, f"×{refcounts[block]}", 6.0, "white")
            )
    for block in sorted(set(highlight)):  # around the whole block, tab and slots
        d.rects.append(
            Rect(d.boxes[("pool", block)], "none", HIGHLIGHT, "outline", "pool", block, 1.8)
        )
    return d


def table_view(
    table: BlockTable,
    box: Box,
    color: str = PALETTE[0],
    name: str = "sequence A",
) -> Drawing:
    """The block table: logical index (top row) over physical block id (bottom row), cells
    sized for 32 entries (narrower past them)."""
    d = Drawing()
    blocks = table.blocks
    w, h = box.w / max(32, len(blocks)), box.h / 2
    d.labels.append(Label(box.x - 0.08, box.y + 1.5 * h, "logical", 7.0, ha="right"))
    d.labels.append(Label(box.x - 0.08, box.y + 0.5 * h, "physical", 7.0, ha="right"))
    entries = "entry" if len(blocks) == 1 else "entries"
    title = f"block table of {name}: {len(blocks)} {entries} (int32)"
    d.labels.append(Label(box.x, box.y + box.h + 0.13, title, 8.0, ha="left"))
    for i, block in enumerate(blocks):
        for row, text, face in ((1, str(i), "white"), (0, str(block), color)):
            cell = Box(box.x + i * w, box.y + row * h, w, h)
            d.rects.append(Rect(cell, face, INK, "table-cell", "table", i))
            d.labels.append(Label(cell.x + w / 2, cell.y + h / 2, text, font_size(w, text)))
    return d


LOGICAL_BOX = Box(0.15, 1.3, 3.55, FIG_H - 0.55 - 1.3)
POOL_BOX = Box(4.45, 1.3, 4.5, FIG_H - 0.55 - 1.3)
TABLE_BOX = Box(0.85, 0.55, 8.1, 0.36)


def sequence_names(count: int) -> list[str]:
    """Default names of ``count`` drawn sequences: "our sequence" alone, else "sequence A",
    "sequence B", ... (never a table's id, which would read as one more block number)."""
    if count == 1:
        return ["our sequence"]
    return [f"sequence {chr(ord('A') + i % 26)}" for i in range(count)]


def legend(names: Sequence[str], others: bool) -> Drawing:
    """A colour key per drawn sequence, then "allocated, empty", "free block" and, only when
    ``others``, the grey of blocks held by sequences that are not drawn."""
    d = Drawing()
    keys = [(table_color(i), INK, name) for i, name in enumerate(names)]
    keys.append((tint(table_color(0)), table_color(0), "allocated, empty"))
    keys.append((FREE_COLOR, FREE_EDGE, "free block"))
    if others:
        keys.append((OTHER_COLOR, FREE_EDGE, "held by sequences not drawn"))
    x, y = 0.15, 0.1
    for face, edge, text in keys:
        d.rects.append(Rect(Box(x, y, 0.22, 0.14), face, edge, "key", "legend"))
        d.labels.append(Label(x + 0.3, y + 0.07, text, 7.0, ha="left"))
        x += 0.45 + 0.062 * len(text)
    return d


def scene(
    allocator: BlockAllocator,
    tables: Sequence[BlockTable],
    values: Sequence[Sequence[object] | None] | None = None,
    highlight: Sequence[int] = (),
    caption: str = "",
    names: Sequence[str] | None = None,
) -> Drawing:
    """``tables[0]``'s logical view, block table and arrows; every table in the pool, named
    by ``names`` (default :func:`sequence_names`)."""
    if not tables:
        raise ValueError("tables is empty: pass at least the table to show")
    if names is None:
        names = sequence_names(len(tables))
    if len(names) != len(tables):
        raise ValueError(f"names has {len(names)} entries for {len(tables)} tables")
    table, color = tables[0], table_color(0)
    d = logical_view(table, LOGICAL_BOX, None if values is None else values[0], color)
    d.extend(pool_view(allocator, tables, POOL_BOX, values, highlight))
    d.extend(table_view(table, TABLE_BOX, color, name=names[0]))
    d.extend(legend(names, d.count("other-block", "pool") > 0))
    for i, block in enumerate(table.blocks):
        src, dst = d.boxes[("logical", i)], d.boxes[("pool", block)]
        start = (src.x + src.w, src.y + src.h / 2)
        end = (dst.x, dst.y + dst.h / 2)
        via = _Grid(POOL_BOX, allocator.num_blocks).route(block, start)
        d.arrows.append(Arrow(start, end, color, i, block, via))
    n, size = table.num_tokens, table.block_size
    top = FIG_H - 0.3
    d.labels.append(Label(0.15, top, f"{names[0]}: {n} tokens, blocks of {size}", 9.0, ha="left"))
    pool_title = f"physical pool: {allocator.num_blocks} blocks ({allocator.num_free} free)"
    d.labels.append(Label(4.45, top, pool_title, 9.0, ha="left"))
    if caption:
        d.labels.append(Label(0.15, 0.4, caption, 8.0, ha="left"))
    return d
