"""What one engine step sends to the GPU, and who reads the one block table (§4.6).

``mixed_step_scene(step)`` draws a :class:`~pagedlab.attention.mixed_step.MixedStep`;
``tensor_parallel_scene(table, num_workers, num_kv_heads)`` one block table read by every
worker, each holding its share of the heads. Both read state only. Rect kinds (counted by the
tests): ``token``, ``pad``, ``index``, ``table-cell``, ``null``, ``worker-block``, ``free-block``.
"""

from __future__ import annotations

from pagedlab.attention.mixed_step import PAD_SLOT_ID, MixedStep
from pagedlab.ground.checks import check_int
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures.drawing import Arrow, Box, Drawing, Label, Rect
from pagedlab.pictures.theme import FREE_COLOR, FREE_EDGE, INK, table_color, tint

CELL = 0.42  # inches, one tensor entry
X0 = 1.55  # where the cells start; labels sit left of it
ROW_H = 0.3


def _cell(d: Drawing, x: float, y: float, text: str, face: str, kind: str, view: str,
          w: float = CELL, ink: str = INK) -> None:  # fmt: skip
    d.rects.append(Rect(Box(x, y, w - 0.03, ROW_H), face, ink, kind, view, linewidth=0.5))
    d.labels.append(Label(x + (w - 0.03) / 2, y + ROW_H / 2, text, 6.5, ink))


def _row_label(d: Drawing, y: float, text: str) -> None:
    d.labels.append(Label(X0 - 0.1, y + ROW_H / 2, text, 7.0, ha="right"))


def mixed_step_scene(step: MixedStep) -> Drawing:
    """The step's tensors, row by row (module doc)."""
    budget = int(step.slot_mapping.numel())
    rows = int(step.block_table.shape[0])
    height = 0.55 + 5 * (ROW_H + 0.16) + rows * ROW_H + 0.5
    d = Drawing(size=(max(X0 + budget * CELL + 0.3, 6.5), height))
    owner = [r for r, req in enumerate(step.requests) for _ in range(req.new)]
    y = height - 0.55 - ROW_H
    for name, values in (("input_ids", step.input_ids), ("positions", step.positions)):
        _row_label(d, y, name)
        for t, v in enumerate(values.tolist()):
            _cell(d, X0 + t * CELL, y, str(v), tint(table_color(owner[t]), 0.45), "token", name)
        y -= ROW_H + 0.16
    for name, values in (("query_start_loc", step.query_start_loc), ("seq_lens", step.seq_lens)):
        _row_label(d, y, name)
        for i, v in enumerate(values.tolist()):
            _cell(d, X0 + i * CELL, y, str(v), FREE_COLOR, "index", name)
        y -= ROW_H + 0.16
    _row_label(d, y, "block_table")
    width = int(step.block_table.shape[1])
    note_x, first_row, sent = X0 + width * CELL + 0.1, y, step.num_reqs
    for r in range(rows):
        used = len(step.tables[r].blocks) if r < sent else 0
        # attention gets block_table[:num_reqs]; rows of unused request slots stay behind
        face = FREE_COLOR if r < sent else "white"
        ink = INK if r < sent else FREE_EDGE
        for c, v in enumerate(step.block_table[r].tolist()):
            kind = "table-cell" if c < used else "null"
            own = tint(table_color(r), 0.45) if c < used else face
            _cell(d, X0 + c * CELL, y, str(v), own, kind, "block_table", ink=ink)
        y -= ROW_H
    middle = first_row - (sent - 1) * ROW_H / 2 + ROW_H / 2
    text = f"{rows} request slots x {width} entries, int32; sent: rows 0-{sent - 1}"
    d.labels.append(Label(note_x, middle, text, 6.5, ha="left"))
    if sent < rows:
        middle = first_row - (sent + (rows - sent - 1) / 2) * ROW_H + ROW_H / 2
        text = f"rows {sent}-{rows - 1}: unused request slots, not sent to attention"
        d.labels.append(Label(note_x, middle, text, 6.5, FREE_EDGE, ha="left"))
    y -= 0.16
    _row_label(d, y, "slot_mapping")
    for t, v in enumerate(step.slot_mapping.tolist()):
        if v == PAD_SLOT_ID:
            _cell(d, X0 + t * CELL, y, str(v), FREE_EDGE, "pad", "slot_mapping")
        else:
            _cell(d, X0 + t * CELL, y, str(v), tint(table_color(owner[t]), 0.45), "token",
                  "slot_mapping")  # fmt: skip
    pad = budget - step.num_tokens
    title = (
        f"one step: {step.num_tokens} tokens of {step.num_reqs} requests, flattened; "
        f"slot mapping padded with {PAD_SLOT_ID} x {pad} to the budget of {budget}"
    )
    d.labels.append(Label(0.15, height - 0.25, title, 8.0, ha="left"))
    return d


def tensor_parallel_scene(
    table: BlockTable, num_workers: int = 2, num_kv_heads: int = 4
) -> Drawing:
    """§4.6: one block table, read by every tensor-parallel worker (module doc)."""
    num_workers = check_int(num_workers, "num_workers", minimum=1)
    if check_int(num_kv_heads, "num_kv_heads", minimum=1) % num_workers:
        raise ValueError(
            f"num_kv_heads must be a multiple of num_workers = {num_workers}, got {num_kv_heads!r}"
        )
    pool = table.allocator.num_blocks
    cell = min(0.42, 6.2 / pool)
    height = 1.35 + num_workers * 0.78
    d = Drawing(size=(8.0, height))
    color = table_color(0)
    d.labels.append(Label(0.15, height - 0.22, "§4.6: one KV cache manager, one block table, "
                          f"{num_workers} tensor-parallel workers", 8.0, ha="left"))  # fmt: skip
    top = height - 0.8
    d.labels.append(Label(X0 - 0.1, top + ROW_H / 2, "block table", 7.0, ha="right"))
    for i, b in enumerate(table.blocks):
        _cell(d, X0 + i * CELL, top, str(b), tint(color, 0.45), "table-cell", "table")
    d.labels.append(Label(X0 + len(table.blocks) * CELL + 0.1, top + ROW_H / 2,
                          "(the scheduler's, sent to every worker each step)", 6.5,
                          ha="left"))  # fmt: skip
    heads = num_kv_heads // num_workers
    held = set(table.blocks)
    for w in range(num_workers):
        y = top - 0.7 - w * 0.78
        text = f"worker {w}: kv heads {w * heads}-{(w + 1) * heads - 1}"
        d.labels.append(Label(X0 - 0.1, y + ROW_H / 2, text, 6.5, ha="right"))
        for b in range(pool):
            face, kind = (color, "worker-block") if b in held else (FREE_COLOR, "free-block")
            box = Box(X0 + b * cell, y, cell - 0.03, ROW_H)
            d.rects.append(Rect(box, face, INK if b in held else FREE_EDGE, kind, f"worker{w}", b))
            d.labels.append(Label(box.x + box.w / 2, y + ROW_H / 2, str(b), 6.0))
        for i, b in enumerate(table.blocks):  # every worker's ids come from the table itself:
            x = X0 + b * cell + (cell - 0.03) / 2  # nothing passes from one GPU to another
            d.arrows.append(
                Arrow((X0 + i * CELL + (CELL - 0.03) / 2, top), (x, y + ROW_H), color, i, b)
            )
    d.labels.append(Label(0.15, 0.2, "each worker gets the same block ids from the scheduler; no "
                          "K/V moves between GPUs: a block holds only that worker's heads",
                          6.5, ha="left"))  # fmt: skip
    return d
