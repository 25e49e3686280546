"""External fragmentation: the same pool seen by a contiguous allocator and by paging (Fig. 3).

``fragmentation_scene(pool, running, newcomer)`` draws both on one address axis: the holes a
contiguous newcomer cannot use (it overlaps a running request when no hole is big enough), and
the newcomer's blocks ``N0``, ``N1``, ... wherever paging put them. Reads state only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures.drawing import Box, Drawing, Label, Rect, stack
from pagedlab.pictures.reservation import reservation_scene
from pagedlab.pictures.theme import CATEGORY_COLORS, FREE_COLOR, FREE_EDGE, INK, PALETTE
from pagedlab.simulate.reservation import OneRequest

SIZE = (8.0, 2.6)  # inches
X0, X1 = 1.55, 7.8  # the address axis, inches (the reservation picture's)
CELL_H = 0.34
ROW_Y = {"need": 1.72, "contiguous": 1.28, "paged": 0.62}
# Colours that no memory category uses, so the picture stacks under the reservation's key:
RUNNING, NEWCOMER = PALETTE[1], PALETTE[3]  # sky blue, reddish purple


def _runs(keys: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """(first block, length, key) of each maximal run of consecutive blocks with one key."""
    out: list[tuple[int, int, int]] = []
    for b in sorted(keys):
        if out and out[-1][0] + out[-1][1] == b and out[-1][2] == keys[b]:
            out[-1] = (out[-1][0], out[-1][1] + 1, keys[b])
        else:
            out.append((b, 1, keys[b]))
    return out


def _owners(running: Sequence[BlockTable]) -> dict[int, int]:
    """Block -> index of the running table that holds it."""
    return {b: i for i, t in enumerate(running) for b in t.blocks}


def holes(pool: BlockAllocator, running: Sequence[BlockTable]) -> list[tuple[int, int]]:
    """Maximal runs of blocks no running table holds, as (first block, length), in order."""
    held = _owners(running)
    free = {b: -1 for b in range(pool.num_blocks) if b not in held}
    return [(first, length) for first, length, _ in _runs(free)]


def fragmentation_scene(
    pool: BlockAllocator,
    running: Sequence[BlockTable],
    newcomer: BlockTable,
    names: Sequence[str] | None = None,
) -> Drawing:
    """The pool under a contiguous allocator and under paging (see the module doc)."""
    names = list(names) if names is not None else [f"R{i + 1}" for i in range(len(running))]
    if len(names) != len(running):
        raise ValueError(f"names must name each of the {len(running)} running tables, got {names}")
    d = Drawing(size=SIZE)
    n, size = pool.num_blocks, pool.block_size
    cell = (X1 - X0) / n

    def box(row: str, first: int, length: int) -> Box:
        return Box(X0 + first * cell, ROW_Y[row], length * cell, CELL_H)

    owners = _owners(running)
    for first, length, i in _runs(owners):  # a contiguous allocator sees stretches
        span = box("contiguous", first, length)
        d.rects.append(Rect(span, RUNNING, INK, "reservation", "contiguous", i, 0.6))
        d.labels.append(Label(span.x + span.w / 2, span.y + CELL_H / 2, names[i], 7.0))
    for i, t in enumerate(running):  # paging sees blocks
        for b in t.blocks:
            label = Label(X0 + (b + 0.5) * cell, ROW_Y["paged"] + CELL_H / 2, names[i], 6.5)
            d.labels.append(label)
            d.rects.append(Rect(box("paged", b, 1), RUNNING, INK, "block", "paged", b, 0.6))
    gaps = holes(pool, running)
    for first, length in gaps:
        span = box("contiguous", first, length)
        grey = CATEGORY_COLORS["external"]
        d.rects.append(Rect(span, grey, INK, "hole", "contiguous", first, 0.6))
        d.labels.append(
            Label(span.x + span.w / 2, span.y + CELL_H / 2, f"hole {length * size}", 6.5)
        )
    need = len(newcomer.blocks)
    widest = max(gaps, key=lambda g: g[1], default=(0, 0))
    start = min(widest[0], n - need)
    fits = widest[1] >= need
    outline = box("need", start, need)
    d.rects.append(Rect(outline, "none", NEWCOMER, "need", "contiguous", None, 1.6))
    verdict = "fits" if fits else f"no hole of {need * size} slots: external fragmentation"
    d.labels.append(Label(outline.x + outline.w + 0.08, outline.y + CELL_H / 2,
                          f"newcomer needs {need * size} adjacent slots: {verdict}", 7.0,
                          ha="left"))  # fmt: skip
    for logical, b in enumerate(newcomer.blocks):
        cell_box = box("paged", b, 1)
        d.rects.append(Rect(cell_box, NEWCOMER, INK, "newcomer", "paged", b, 0.9))
        d.labels.append(Label(cell_box.x + cell / 2, cell_box.y + CELL_H / 2, f"N{logical}", 6.5))
    taken = owners.keys() | set(newcomer.blocks)
    for b in range(n):  # free blocks, and every physical block's number under the paged row
        if b not in taken:
            d.rects.append(Rect(box("paged", b, 1), FREE_COLOR, FREE_EDGE, "free", "paged", b))
        d.labels.append(Label(X0 + (b + 0.5) * cell, ROW_Y["paged"] - 0.12, str(b), 6.0))
    for row, text in (("contiguous", "contiguous allocator"), ("paged", "paged (blocks)")):
        d.labels.append(Label(X0 - 0.08, ROW_Y[row] + CELL_H / 2, text, 7.5, ha="right"))
    d.labels.append(Label(X0, ROW_Y["contiguous"] - 0.1, "0", 6.0))
    d.labels.append(Label(X1, ROW_Y["contiguous"] - 0.1, f"{n * size} slots", 6.0, ha="right"))
    d.labels.append(Label(X1, ROW_Y["paged"] - 0.3, f"physical block ({size} slots each)", 6.5,
                          ha="right"))  # fmt: skip
    free_slots = sum(length for _, length in gaps) * size
    title = (
        f"external fragmentation: {free_slots} slots free, the largest hole "
        f"{widest[1] * size}; paging puts the newcomer in blocks {newcomer.blocks}"
    )
    d.labels.append(Label(0.15, SIZE[1] - 0.2, title, 8.5, ha="left"))
    _legend(d)
    return d


def _legend(d: Drawing) -> None:
    keys = (
        (RUNNING, INK, "running request"),
        (NEWCOMER, INK, "newcomer (N0: its logical block 0)"),
        (CATEGORY_COLORS["external"], INK, "hole (external fragmentation)"),
        (FREE_COLOR, FREE_EDGE, "free block"),
    )
    x = 0.15
    for face, edge, text in keys:
        d.rects.append(Rect(Box(x, 0.08, 0.2, 0.13), face, edge, "key", "legend", linewidth=0.5))
        d.labels.append(Label(x + 0.26, 0.145, text, 7.0, ha="left"))
        x += 0.45 + 0.058 * len(text)


def fig3_scene(
    request: OneRequest,
    pool: BlockAllocator,
    running: Sequence[BlockTable],
    newcomer: BlockTable,
    names: Sequence[str] | None = None,
) -> Drawing:
    """Fig. 3's three wastes: one request's reservation over a fragmented pool."""
    return stack(reservation_scene(request), fragmentation_scene(pool, running, newcomer, names))
