"""How long the scheduler explorer takes to reach its states, and to draw its static view.

Two figures, caches cleared first: (1) every state of the default scene, steps 0..MAX_STEP
in order (what Play asks for), and the same steps again in reverse (what dragging the step
slider back asks for); (2) ``static_view`` over the explorer's axes in
``SchedulerExplorer.DECLARATION`` (both modes, steps 0, 4, ..., 60: every frame is
drawn, which includes each state's picture and readout).

Times are this thread's CPU time (``time.thread_time``), so that other jobs on a shared
machine do not count; ``--wall`` gives wall-clock time. Run:
``python benchmarks/bench_scheduler_explorer.py [--wall]``.
"""

from __future__ import annotations

import sys
import time

from pagedlab.explorers import scheduler as module
from pagedlab.explorers.scheduler import MAX_STEP, SchedulerExplorer, explorer_state
from pagedlab.explorers.site import static

CLOCK = time.perf_counter if "--wall" in sys.argv else time.thread_time


def clear_caches() -> None:
    for name in dir(module):
        cache_clear = getattr(getattr(module, name), "cache_clear", None)
        if callable(cache_clear):
            cache_clear()


def all_states(steps: range) -> float:
    start = CLOCK()
    for step in steps:
        explorer_state("swap", 4, 16, True, step)
    return CLOCK() - start


def static_view_seconds() -> tuple[float, int]:
    declared = SchedulerExplorer.DECLARATION
    assert declared is not None
    axes, play = declared.frames, declared.play
    explorer = SchedulerExplorer()
    start = CLOCK()
    static.static_view(explorer, axes, play)
    frames = 1
    for values in axes.values():
        frames *= len(values)
    return CLOCK() - start, frames


def main() -> None:
    clear_caches()
    forward = all_states(range(MAX_STEP + 1))
    clear_caches()
    backward = all_states(range(MAX_STEP, -1, -1))
    print(f"default scene, all {MAX_STEP + 1} states, steps in order:   {forward:7.2f} s")
    print(f"default scene, all {MAX_STEP + 1} states, steps in reverse: {backward:7.2f} s")
    clear_caches()
    seconds, frames = static_view_seconds()
    print(f"static_view of the scheduler explorer ({frames} frames):     {seconds:7.2f} s")


if __name__ == "__main__":
    main()
