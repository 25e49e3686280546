"""Pictures of shared blocks: several block tables over one pool, ref counts, copy-on-write.

``event_frames`` listens to the allocator during an operation and takes one drawing per
event, so a copy-on-write is its own steps (allocate, copy, release, write); a frame taken
mid-operation may show a table's old block, and its caption says what happened. Everything is
read, nothing written. Readable up to 6 tables and a 32-block pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.events import Event
from pagedlab.pictures.blocks import POOL_BOX, TAB, pool_view, sequence_names, slot_labels
from pagedlab.pictures.drawing import FIG_H, FIG_W, Box, Drawing, Label, Rect
from pagedlab.pictures.theme import HIGHLIGHT, INK, table_color

MAX_TABLES = 6
STRIPS_BOX = Box(0.75, 0.45, 3.4, FIG_H - 0.55 - 0.45)


def sharing_scene(
    allocator: BlockAllocator,
    tables: Sequence[BlockTable],
    values: Sequence[Sequence[object] | None] | None = None,
    highlight: Sequence[int] = (),
    caption: str = "",
    title: str = "",
    names: Sequence[str] | None = None,
    copies: Mapping[int, int] | None = None,
    highlight_key: str = "",
) -> Drawing:
    """Block-table strips of up to 6 ``tables`` (labelled by ``names``, with ``values``' words
    under them) and the whole pool with ref counts. ``highlight_key`` names the ``highlight``
    outline in the key; ``copies``: see :func:`~pagedlab.pictures.blocks.pool_view`."""
    if len(tables) > MAX_TABLES:
        raise ValueError(f"at most {MAX_TABLES} tables fit one picture, got {len(tables)}")
    if names is None:
        names = sequence_names(len(tables))
    if len(names) != len(tables):
        raise ValueError(f"names has {len(names)} entries for {len(tables)} tables")
    d = pool_view(allocator, tables, POOL_BOX, values, highlight, copies=copies)
    refcounts = allocator.refcounts()
    cells = max([8] + [len(t.blocks) for t in tables])
    pitch = STRIPS_BOX.h / max(4, len(tables))
    # top to bottom in a row: title, ref-count badges, cells, words (never overlapping)
    w, h = STRIPS_BOX.w / cells, min(0.24, pitch * 0.4)
    for row, table in enumerate(tables):
        color = table_color(row)
        top = STRIPS_BOX.y + STRIPS_BOX.h - row * pitch
        y = top - 0.2 - h
        # few distinct strings: each new one costs a glyph layout (see canvas._glyphs)
        d.labels.append(Label(STRIPS_BOX.x, top - 0.07, names[row], 7.5, ha="left"))
        tokens = f"{table.num_tokens} tokens"
        d.labels.append(Label(STRIPS_BOX.x + 0.85, top - 0.07, tokens, 7.5, ha="left"))
        d.labels.append(Label(STRIPS_BOX.x - 0.08, y + h / 2, "blocks", 7.0, ha="right"))
        if values is not None and values[row] is not None:
            words = slot_labels(table, values[row])
            size = table.block_size
            groups = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
            d.labels.append(Label(STRIPS_BOX.x, y - 0.09, " | ".join(groups), 6.5, ha="left"))
        for i, block in enumerate(table.blocks):
            cell = Box(STRIPS_BOX.x + i * w, y, w, h)
            shared = refcounts[block] > 1
            edge, width = (HIGHLIGHT, 1.6) if block in highlight else (INK, 0.6)
            d.rects.append(Rect(cell, color, edge, "table-cell", "table", block, width))
            d.labels.append(Label(cell.x + w / 2, cell.y + h / 2, str(block), 7.0))
            if shared:
                mark = Box(cell.x + w - 0.17, cell.y + h - 0.04, 0.17, 0.1)
                d.rects.append(Rect(mark, INK, INK, "badge", "table", block))
                d.labels.append(
                    Label(mark.x + 0.085, mark.y + 0.05, f"×{refcounts[block]}", 5.5, "white")
                )
    top = FIG_H - 0.3
    heading = title or f"{len(tables)} sequences share one pool"
    d.labels.append(Label(0.15, top, heading, 9.0, ha="left"))
    pool_title = f"physical pool: {allocator.num_blocks} blocks ({allocator.num_free} free)"
    d.labels.append(Label(POOL_BOX.x, top, pool_title, 9.0, ha="left"))
    d.labels.append(
        Label(POOL_BOX.x, 0.95, "×n: ref count (tables holding the block)", 7.0, ha="left")
    )
    if highlight_key:
        swatch = Box(POOL_BOX.x, 0.6, 0.22, 0.14)
        d.rects.append(Rect(swatch, "white", HIGHLIGHT, "key", "legend", None, 1.6))
        d.labels.append(Label(swatch.x + 0.3, swatch.y + 0.07, highlight_key, 7.0, ha="left"))
    if caption:
        d.labels.append(Label(FIG_W - 0.1, 0.17, caption, 8.0, ha="right"))
    return d


def event_caption(event: Event, tables: Sequence[BlockTable], names: Sequence[str]) -> str:
    """``str(event)`` with "table <id>: " replaced by the drawn sequence's name."""
    text = str(event)
    prefix = f"table {event.table}: "
    if event.table is None or not text.startswith(prefix):
        return text
    ids = [t.id for t in tables]
    name = names[ids.index(event.table)] if event.table in ids else "a sequence not drawn"
    return f"{name}: {text[len(prefix) :]}"


@dataclass(frozen=True)
class Frame:
    drawing: Drawing
    caption: str
    event: Event | None  # None for the frames before and after the operation


def event_frames(
    allocator: BlockAllocator,
    tables: Callable[[], Sequence[BlockTable]],
    action: Callable[[], object],
    values: Callable[[], Sequence[Sequence[object] | None] | None] = lambda: None,
    title: str = "",
    names: Sequence[str] | None = None,
) -> list[Frame]:
    """One frame before ``action()``, one per allocator event during it, one after;
    ``tables`` (and ``values``) are called at each frame (a beam step replaces them)."""
    copies: dict[int, int] = {}  # copy-on-write target -> source, seen so far

    def draw(lit: Sequence[int], text: str) -> Drawing:
        return sharing_scene(allocator, tables(), values(), lit, text, title, names, copies)

    frames = [Frame(draw((), "before"), "before", None)]

    def snap(event: Event) -> None:
        lit = [event.block] + ([event.src] if event.src is not None else [])
        if event.kind == "copy" and event.src is not None:
            copies[event.block] = event.src
        current = tables()
        text = event_caption(event, current, names or sequence_names(len(current)))
        d = draw(lit, text)
        if event.kind == "write" and event.offset is not None:
            b = d.boxes[("pool", event.block)]  # outline the slot written
            w = (b.w - TAB) / allocator.block_size
            slot = Box(b.x + TAB + event.offset * w, b.y, w, b.h)
            d.rects.append(Rect(slot, "none", HIGHLIGHT, "write", "pool", event.block, 2.0))
        frames.append(Frame(d, text, event))

    unsubscribe = allocator.subscribe(snap)
    try:
        action()
    finally:
        unsubscribe()
    frames.append(Frame(draw((), "after"), "after", None))
    return frames
