"""Notebook 11's pictures: what vLLM 0.34 and Hugging Face do now, drawn from real state.

Each reads its state and changes nothing; every colour drawn is in the picture's key.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedlab.frontier.async_steps import Timeline
from pagedlab.frontier.hybrid import HybridRequest
from pagedlab.frontier.miss_reasons import REASONS, RequestMisses
from pagedlab.frontier.partial_prefix import PartialAdmission
from pagedlab.frontier.peers import TraceResult
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.pictures.drawing import Arrow, Box, Drawing, Label, Rect, font_size
from pagedlab.pictures.theme import FREE_COLOR, FREE_EDGE, INK, OTHER_COLOR, PALETTE

RESERVED = "#555555"  # a block no request can get: vLLM's null block, HF's trash sectors
REQUEST_COLORS = {"A": PALETTE[0], "B": PALETTE[1], "C": PALETTE[2]}
REASON_COLORS = dict(zip(REASONS, ("#009E73", "#9E9E9E", "#E69F00", "#CC79A7", "#D55E00"),
                         strict=True))  # fmt: skip
WORK_COLORS = {
    "prefill": PALETTE[4],
    "decode": PALETTE[2],
    "decode, input a placeholder": "#A6E3CF",
    "preempted": PALETTE[5],
    "preempted, token in flight (kept)": "#000000",
}


def _cell(d: Drawing, box: Box, face: str, text: str, kind: str, view: str,
          block: int | None = None, color: str = INK) -> None:  # fmt: skip
    d.rects.append(Rect(box, face, FREE_EDGE if face == FREE_COLOR else INK, kind, view, block))
    if text:
        size = font_size(box.w, text)
        d.labels.append(Label(box.x + box.w / 2, box.y + box.h / 2, text, size, color))
    if block is not None:
        d.boxes[(view, block)] = box


def _key(d: Drawing, items: Sequence[tuple[str, str]], y: float, x: float = 0.3) -> None:
    for text, face in items:
        _cell(d, Box(x, y, 0.18, 0.18), face, "", "key", "legend")
        d.labels.append(Label(x + 0.25, y + 0.09, text, 7.0, INK, "left"))
        x += 0.45 + 0.075 * len(text)


def three_allocators(results: Sequence[TraceResult], pools: Sequence[Sequence[int]],
                     reserved: Sequence[Sequence[int]]) -> Drawing:  # fmt: skip
    """One row per rule: its pool's block ids coloured by the request holding them at the
    end of the trace (A was freed, so its blocks show free); ``reserved`` ids per row."""
    n = max(len(p) for p in pools)
    d = Drawing(size=(9.0, 0.9 + 0.75 * len(results)))
    w = min(0.55, 5.8 / n)
    for row, (result, pool_ids, kept) in enumerate(zip(results, pools, reserved, strict=True)):
        y = d.size[1] - 0.75 - 0.75 * row
        c = result.blocks.get("C", [])
        d.labels.append(Label(0.15, y + 0.2, f"{result.rule}: C gets {c}", 8.0, INK, "left"))
        live = {b: name for name, blocks in result.blocks.items() if name != "A" for b in blocks}
        for i, block in enumerate(pool_ids):
            box = Box(2.6 + i * w, y, w * 0.92, 0.4)
            if block in kept:
                _cell(d, box, RESERVED, str(block), "reserved", f"row{row}", block, "#FFFFFF")
            elif block in live:
                face = REQUEST_COLORS[live[block]]
                _cell(d, box, face, f"{live[block]}:{block}", "held", f"row{row}", block)
            else:
                _cell(d, box, FREE_COLOR, str(block), "free-block", f"row{row}", block)
    keys = [("null block / trash sector", RESERVED), ("B", PALETTE[1]), ("C", PALETTE[2]),
            ("free (A's blocks, freed)", FREE_COLOR)]  # fmt: skip
    _key(d, keys, 0.15)
    return d


def partial_hit(alloc: BlockAllocator, first: PartialAdmission, second: PartialAdmission,
                kept: bool) -> Drawing:  # fmt: skip
    """The pool after a partial hit: the first request's blocks, the second's (shared full
    blocks and its private copy), an arrow from the copy's source to its destination;
    ``kept``: the copy has not run, so the source is still held for it."""
    d = Drawing(size=(9.0, 2.2))
    n = alloc.num_blocks
    w = min(0.7, 8.0 / n)
    copy = second.copy
    for block in range(n):
        box = Box(0.4 + block * w, 1.0, w * 0.92, 0.5)
        rc = alloc.refcount(block)
        if rc == 0:
            _cell(d, box, FREE_COLOR, str(block), "free-block", "pool", block)
            continue
        in_first, in_second = block in first.blocks, block in second.blocks
        face = PALETTE[2] if in_first and in_second else PALETTE[0] if in_first else PALETTE[1]
        if not in_first and not in_second:
            face = OTHER_COLOR
        _cell(d, box, face, f"{block} (ref {rc})", "held", "pool", block)
    if copy is not None:
        a, b = d.boxes[("pool", copy.src)], d.boxes[("pool", copy.dst)]
        start, end = (a.x + a.w / 2, a.y + a.h), (b.x + b.w / 2, b.y + b.h)
        top = a.y + a.h + 0.3
        d.arrows.append(Arrow(start, end, INK, copy.src, copy.dst,
                              via=((start[0], top), (end[0], top))))  # fmt: skip
        state = "pending: both ends held" if kept else "ran: source released"
        d.labels.append(Label(4.5, 1.95, f"KVCacheBlockCopy(src={copy.src}, dst={copy.dst}) "
                              f"{state}", 8.0, INK))  # fmt: skip
    keys = [("first request", PALETTE[0]), ("second request", PALETTE[1]),
            ("shared by both", PALETTE[2]), ("held for the copy only", OTHER_COLOR),
            ("free", FREE_COLOR)]  # fmt: skip
    _key(d, keys, 0.3)
    return d


def hybrid_tables(request: HybridRequest) -> Drawing:
    """One row per KV cache group: its block table, the null block where a window let go."""
    rows = len(request.tables)
    cols = max(len(t) for t in request.tables)
    d = Drawing(size=(9.0, 0.8 + 0.55 * rows))
    w = min(0.6, 6.5 / max(1, cols))
    for r, (group, table) in enumerate(zip(request.groups, request.tables, strict=True)):
        y = d.size[1] - 0.6 - 0.55 * r
        name = f"{group.kind} x{group.layers}" + (
            f" (window {group.window})" if group.window else ""
        )
        d.labels.append(Label(0.15, y + 0.18, name, 7.5, INK, "left"))
        for i, block in enumerate(table):
            box = Box(2.3 + i * w, y, w * 0.92, 0.36)
            if block == 0:
                _cell(d, box, RESERVED, "null", "null-entry", f"group{r}", None, "#FFFFFF")
            else:
                _cell(d, box, PALETTE[r % len(PALETTE)], str(block), "table-cell", f"group{r}")
    groups = [(f"group {r}", PALETTE[r % len(PALETTE)]) for r in range(rows)]
    _key(d, [*groups, ("null block (0): left the window, freed", RESERVED)], 0.12)
    return d


def async_timeline(timeline: Timeline, title: str = "") -> Drawing:
    """Requests down, steps across: each step's planned work; a star marks a decode whose
    input token was still being computed when the step was planned (a placeholder).
    ``title`` (short) goes top left."""
    names = sorted(timeline.outputs)
    steps = len(timeline.plans)
    d = Drawing(size=(9.0, 1.0 + 0.45 * len(names)))
    w = min(0.6, 7.6 / max(1, steps))
    if title:
        d.labels.append(Label(0.1, d.size[1] - 0.2, title, 7.5, INK, "left"))
    for s, plan in enumerate(timeline.plans):
        d.labels.append(Label(1.0 + s * w + w / 2, d.size[1] - 0.2, f"t{plan.step}", 7.0))
        for r, name in enumerate(names):
            box = Box(1.0 + s * w, d.size[1] - 0.7 - 0.45 * r, w * 0.92, 0.36)
            work = plan.work.get(name, "")
            if name in plan.stale:
                _cell(d, box, WORK_COLORS["preempted, token in flight (kept)"], "stale", "stale",
                      "steps", color="#FFFFFF")  # fmt: skip
            elif name in plan.preempted:
                _cell(d, box, WORK_COLORS["preempted"], "out", "preempted", "steps")
            elif work.startswith("prefill"):
                _cell(d, box, WORK_COLORS["prefill"], work.split()[1], "prefill", "steps",
                      color="#FFFFFF")  # fmt: skip
            elif work == "decode*":
                _cell(d, box, WORK_COLORS["decode, input a placeholder"], "*", "placeholder",
                      "steps")  # fmt: skip
            elif work == "decode":
                _cell(d, box, WORK_COLORS["decode"], "", "decode", "steps")
            else:
                _cell(d, box, FREE_COLOR, "", "idle", "steps")
    for r, name in enumerate(names):
        d.labels.append(Label(0.5, d.size[1] - 0.52 - 0.45 * r, name, 8.0))
    _key(d, [*WORK_COLORS.items(), ("idle", FREE_COLOR)], 0.12, x=0.2)
    return d


def miss_bars(results: Sequence[RequestMisses], block_size: int) -> Drawing:
    """One bar per request, its prompt tokens split by reason (widths to scale)."""
    d = Drawing(size=(9.0, 1.1 + 0.36 * len(results)))
    longest = max((r.tokens for r in results), default=1)
    scale = 6.6 / longest
    for i, r in enumerate(results):
        y = d.size[1] - 0.5 - 0.36 * i
        d.labels.append(Label(0.15, y + 0.13, f"{r.name} (step {r.step})", 7.0, INK, "left"))
        x = 1.3
        for reason in REASONS:
            n = r.counts[reason]
            if n:
                box = Box(x, y, n * scale, 0.26)
                _cell(d, box, REASON_COLORS[reason], str(n) if n * scale > 0.3 else "",
                      reason, "bars")  # fmt: skip
                x += n * scale
        d.labels.append(Label(x + 0.05, y + 0.13, f"{r.tokens}", 6.5, INK, "left"))
    d.labels.append(Label(4.5, 0.62, f"block size {block_size}: prompt tokens by reason",
                          7.5))  # fmt: skip
    _key(d, list(REASON_COLORS.items()), 0.15, x=0.1)
    return d
