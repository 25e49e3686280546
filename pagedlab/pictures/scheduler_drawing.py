"""The scheduler at one step as a ``Drawing``: device pool, host pool, queues, events.

``scheduler_drawing(scheduler, result)`` reads the scheduler's state and changes nothing. A
block is a cell of ``block_size`` slots in its request's colour (all samples alike), ``×2``
where shared, light grey when free, outlined black if it moved this step. No numpy or
matplotlib (the live site draws it as SVG).
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedlab.memory.requests import Group, StepPlan
from pagedlab.memory.scheduler import Scheduler
from pagedlab.pictures.drawing import FIG_W, Box, Drawing, Label, Rect
from pagedlab.pictures.theme import FREE_COLOR, FREE_EDGE, HIGHLIGHT, INK, table_color, tint

DEVICE_BOX = Box(0.15, 2.55, 5.3, 1.45)
HOST_BOX = Box(0.15, 0.6, 5.3, 1.45)
PER_ROW = 8


def group_color(group: Group) -> str:
    """A request's colour: by arrival order, the same in every picture of a run."""
    return table_color(group.order)


def _contents(
    holders: Sequence[tuple[Group, Sequence[int], int]], block_size: int
) -> dict[int, tuple[Group, int, int]]:
    """block -> (group, tokens written in it, holders) from (group, block list, tokens)."""
    out: dict[int, tuple[Group, int, int]] = {}
    for group, blocks, tokens in holders:
        for i, block in enumerate(blocks):
            filled = min(block_size, tokens - i * block_size)
            _, before, count = out.get(block, (group, 0, 0))
            out[block] = (group, max(before, filled), count + 1)
    return out


def pool_drawing(
    title: str,
    num_blocks: int,
    block_size: int,
    contents: dict[int, tuple[Group, int, int]],
    box: Box,
    view: str,
    lit: Sequence[int] = (),
) -> Drawing:
    """``num_blocks`` blocks in rows of ``PER_ROW`` inside ``box``, titled."""
    d = Drawing()
    d.labels.append(Label(box.x, box.y + box.h + 0.12, title, 8.5, ha="left"))
    rows = max(1, -(-num_blocks // PER_ROW))
    pitch_x, pitch_y = box.w / PER_ROW, box.h / max(rows, 2)
    w, h = pitch_x - 0.1, min(0.42, pitch_y * 0.62)
    for block in range(num_blocks):
        row, col = divmod(block, PER_ROW)
        x, y = box.x + col * pitch_x, box.y + box.h - (row + 1) * pitch_y + (pitch_y - h) / 2
        cell = Box(x, y, w, h)
        d.boxes[(view, block)] = cell
        edge = HIGHLIGHT if block in lit else FREE_EDGE
        width = 1.8 if block in lit else 0.6
        d.labels.append(Label(x + w / 2, y - 0.09, str(block), 5.5))
        if block not in contents:
            d.rects.append(Rect(cell, FREE_COLOR, edge, "free-block", view, block, width))
            continue
        group, filled, holders = contents[block]
        color = group_color(group)
        slot_w = w / block_size
        for offset in range(block_size):
            face = color if offset < filled else tint(color)
            slot = Box(x + offset * slot_w, y, slot_w, h)
            kind = "filled-slot" if offset < filled else "empty-slot"
            d.rects.append(Rect(slot, face, color, kind, view, block, 0.3))
        d.rects.append(
            Rect(cell, "none", edge if block in lit else INK, "block", view, block, width)
        )
        d.labels.append(Label(x + w / 2, y + h / 2, group.name, 7.0))
        if holders > 1:
            badge = Box(x + w - 0.2, y + h - 0.06, 0.22, 0.14)
            d.rects.append(Rect(badge, INK, INK, "badge", view, block))
            d.labels.append(Label(badge.x + 0.11, badge.y + 0.07, f"×{holders}", 6.0, "white"))
    return d


def _queue(d: Drawing, y: float, name: str, groups: Sequence[Group], detail: bool) -> float:
    """One queue as a row of chips (wrapping); returns the height it took."""
    d.labels.append(Label(5.75, y, f"{name}:", 8.0, ha="left"))
    x, top = 6.55, y
    for group in groups:
        text = group.name
        if detail:
            text += f" {group.generated}/{group.request.output_len}"
        width = 0.16 + 0.075 * len(text)
        if x + width > FIG_W - 0.05:
            x, y = 6.55, y - 0.22
        chip = Box(x, y - 0.09, width, 0.18)
        d.rects.append(Rect(chip, tint(group_color(group), 0.55), group_color(group), "chip", name))
        d.labels.append(Label(x + width / 2, y, text, 6.5))
        x += width + 0.06
    return top - y + 0.3


def scheduler_drawing(scheduler: Scheduler, result: StepPlan | None = None) -> Drawing:
    """The whole scheduler after ``result`` (its last step), as a Drawing; reads only."""
    s, size = scheduler, scheduler.block_size
    device = _contents([(g, t.blocks, t.num_tokens) for g in s.running for t in g.tables], size)
    host_rows = [
        (g, held, n) for g in s.swapped for held, n in zip(g.host, g.host_tokens, strict=True)
    ]
    host = _contents(host_rows, size)
    lit_device: list[int] = []
    lit_host: list[int] = []
    if result is not None:
        for name in result.swapped_in:
            lit_device += s.groups[name].device_blocks()
        for name in result.swapped_out:
            lit_host += s.groups[name].host_blocks()
    d = Drawing()
    budget = f", budget {s.config.token_budget}" if s.config.token_budget else ""
    mode = s.mode + budget + (", chunked prefill" if s.config.chunked_prefill else "")
    step = result.step if result is not None else s.steps
    d.labels.append(Label(0.15, 4.42, f"step {step} · {mode}", 9.5, ha="left"))
    pools = (
        ("device pool (GPU)", s.device, device, DEVICE_BOX, "device", lit_device),
        ("host pool (CPU swap space)", s.host, host, HOST_BOX, "host", lit_host),
    )
    for title, pool, contents, box, view, lit in pools:
        title += f": {pool.num_free} of {pool.num_blocks} free"
        d.extend(pool_drawing(title, pool.num_blocks, size, contents, box, view, lit))
    y = 4.1
    for name, groups, detail in (
        ("waiting", s.waiting, False),
        ("running", s.running, True),
        ("swapped", s.swapped, True),
        ("finished", s.finished, False),
    ):
        y -= _queue(d, y, name, groups, detail)
    d.labels.append(Label(5.75, y - 0.05, "this step:", 8.0, ha="left"))
    events = result.events() if result is not None else []
    if result is not None and result.decoded:
        events.append(f"decoded {', '.join(result.decoded)} ({result.decode_tokens} tokens)")
    if result is not None and result.prefill_tokens:
        chunks = ", ".join(f"{n} {k}" for n, k in result.prefill_tokens.items())
        events.append(f"prefilled {chunks}")
    for line in events[:8] or ["(nothing yet)"]:
        y -= 0.22
        d.labels.append(Label(5.85, y - 0.05, line, 7.0, ha="left"))
    counters = (
        f"preemptions {s.preemptions} · blocks moved {s.blocks_swapped_out + s.blocks_swapped_in}"
        f" (out {s.blocks_swapped_out}, in {s.blocks_swapped_in}) · tokens recomputed "
        f"{s.tokens_recomputed}"
    )
    d.labels.append(Label(0.15, 0.2, counters, 8.0, ha="left"))
    return d
