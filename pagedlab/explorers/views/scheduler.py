"""What the scheduler explorer shows for one step, control plane only (the live site's version).

In the browser there is no torch, so :func:`scheduler_view` runs the same
:class:`~pagedlab.memory.scheduler.Scheduler` on notebook 9's requests with no K/V store
(:func:`pagedlab.pictures.control_scenes.scheduler_control_scene`): the same block decisions and the
same drawing, with ``Scheduler.check_invariants`` after every step.
"""

from __future__ import annotations

import html
from typing import cast

from pagedlab.explorers.views.controls import Choice, Control, Declaration, Play, Slider, Toggle
from pagedlab.explorers.views.shown import View
from pagedlab.memory.scheduler import MODES, Scheduler
from pagedlab.pictures.control_scenes import scheduler_control_scene
from pagedlab.pictures.scheduler_drawing import scheduler_drawing

MAX_STEP = 60

SCHEDULER_CONTROLS: tuple[Control, ...] = (
    Choice("mode", MODES, "mode", "swap"),
    Slider("block_size", 2, 8, "block size", 4),  # at 2 the two-sample request needs 14 of 16
    Slider("token_budget", 4, 64, "token budget", 16),
    Toggle("chunked_prefill", "chunked", True),
    Slider("step", 0, MAX_STEP, "step", 0),
)
SCHEDULER_EXPLORER = Declaration(
    "SchedulerExplorer",
    SCHEDULER_CONTROLS,
    frames={"mode": ["swap", "recompute"], "step": list(range(0, 61, 4))},
    play=Play("step"),
)


def check_controls(
    mode: object, block_size: object, token_budget: object, chunked_prefill: object, step: object
) -> tuple[str, int, int, bool, int]:
    """The controls' values, each checked by its declaration; raises TypeError/ValueError."""
    values = (mode, block_size, token_budget, chunked_prefill, step)
    checked = (c.accept(v) for c, v in zip(SCHEDULER_CONTROLS, values, strict=True))
    return cast(tuple[str, int, int, bool, int], tuple(checked))


def readout(s: Scheduler, check: str, total_steps: int | None = None) -> str:
    """The readout, as HTML: the step (of ``total_steps``), what preemption cost so far,
    ``check``, and once every request finished, their order."""
    step = f"step {s.steps}" + ("" if total_steps is None else f" of {total_steps}")
    moved = s.blocks_swapped_out + s.blocks_swapped_in
    lines = [
        f"{step} · preemptions {s.preemptions} · blocks moved {moved} · "
        f"tokens recomputed {s.tokens_recomputed}",
        check,
    ]
    if s.done:
        lines.append(f"all finished, in the order {', '.join(g.name for g in s.finished)}")
    return "<br>".join(html.escape(line) for line in lines)


def scheduler_view(
    mode: str, block_size: int, token_budget: int, chunked_prefill: bool, step: int
) -> View:
    """The scheduler after ``step`` steps (fewer if every request finished first)."""
    mode, size, budget, chunked, step = check_controls(
        mode, block_size, token_budget, chunked_prefill, step
    )
    scheduler = scheduler_control_scene(mode, size, budget, chunked)
    result = None
    while scheduler.steps < step and not scheduler.done:
        result = scheduler.step()
        scheduler.check_invariants()
    check = (
        "✓ no block leaked after any step (Scheduler.check_invariants); the K/V these blocks "
        "hold is the data plane: the notebook moves and reads it back with torch"
    )
    return View(scheduler, scheduler_drawing(scheduler, result), readout(scheduler, check))
