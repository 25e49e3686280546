"""How long one setting takes in every explorer, server side (no browser).

A setting is two control moves, as a learner makes them: two different controls, each set
to a random value in its range (seeded), one after the other. A move is what a key press on
a slider does: the control's ``value`` changes and the explorer's observer runs (state, then
the picture assigned, then ``finish``, the kernel call if any, then the readout). Outside a
browser every move runs to its end, kernel included. For each explorer, ``SETTINGS`` = 100
settings; printed: the median and p90 time until the second move's picture was assigned
(what the page can show first; this includes the first move's ``finish``) and until both
moves were done; then, per move, the time from the control's change to that move's own
picture (state + picture, no ``finish``: in the browser a move's ``finish`` runs after its
picture has left, and only for the last of a burst of moves). Then, for the allocation
explorer, the same settings again (kernel memoised) and Play steps.

Times are this thread's CPU time (``time.thread_time``), so that other jobs on a shared
machine do not count; ``--wall`` gives wall-clock time. Run:
``python benchmarks/bench_explorer.py [--wall] [ExplorerName ...]`` (names: only those).
Target: a setting <= 50 ms (median).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

import ipywidgets as widgets

from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.explorers.base import Explorer
from pagedlab.explorers.batch import BatchExplorer
from pagedlab.explorers.kernel import KernelExplorer
from pagedlab.explorers.sharing import PrefixCacheExplorer, SharingExplorer
from pagedlab.explorers.waste import BlockSizeExplorer, ReservationExplorer
from pagedlab.simulate import block_size_sweep, make_trace

SETTINGS = 100
# CPU time of this thread: on a shared machine (other jobs on the cores) wall-clock time
# measures the neighbours; --wall measures wall-clock time instead.
CLOCK = time.perf_counter if "--wall" in sys.argv else time.thread_time


def stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1e3:6.1f} ms  p90 {p90 * 1e3:6.1f} ms"


def random_value(rng: random.Random, control: widgets.ValueWidget) -> object:
    if isinstance(control, widgets.IntSlider):
        steps = (control.max - control.min) // control.step
        return control.min + control.step * rng.randint(0, steps)
    values = [o[1] if isinstance(o, tuple) else o for o in control.options]
    return rng.choice(values)


def settings(explorer: Explorer, seed: int = 0) -> list[list[tuple[str, object]]]:
    """``SETTINGS`` settings: two moves each, of two different controls (of the one control,
    if an explorer has only one), each to a new value."""
    rng, values, out = random.Random(seed), dict(explorer.values), []
    while len(out) < SETTINGS:
        setting = []
        names = list(explorer.controls)
        for name in rng.sample(names, 2) if len(names) > 1 else names * 2:
            value = random_value(rng, explorer.controls[name])
            while value == values[name]:
                value = random_value(rng, explorer.controls[name])
            setting.append((name, value))
            values[name] = value
        out.append(setting)
    return out


def run(
    explorer: Explorer, plan: list[list[tuple[str, object]]], moves: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Time every setting: until its last picture was assigned, and until both moves were done.

    ``moves``, if given, receives each move's time from its change to its own picture.
    """
    shown: list[float] = []
    explorer.picture.observe(lambda _change: shown.append(CLOCK()), names="value")
    picture, done = [], []
    for setting in plan:
        start = CLOCK()
        for name, value in setting:
            control = explorer.controls[name]
            if isinstance(control, widgets.IntSlider):  # the range a dependent slider has now
                value = min(max(value, control.min), control.max)  # type: ignore[type-var]
            shown.clear()
            moved = CLOCK()
            control.value = value
            if moves is not None and shown:
                moves.append(shown[0] - moved)
        end = CLOCK()
        done.append(end - start)
        picture.append((shown[-1] if shown else end) - start)
    return picture, done


def main() -> None:
    rows = block_size_sweep(make_trace(2.0, 60.0, workload="sharegpt", seed=0))
    factories: list[Callable[[], Explorer]] = [
        AllocationExplorer,
        KernelExplorer,
        SharingExplorer,
        PrefixCacheExplorer,
        ReservationExplorer,
        lambda: BlockSizeExplorer(rows),
        BatchExplorer,
    ]
    print(f"one setting = two control moves; {SETTINGS} random settings per explorer")
    print(
        f"{'explorer':20s}  {'until the last picture':34s}  {'until done (incl. kernel check)':34s}"
        "  per move, until its own picture"
    )
    only = [arg for arg in sys.argv[1:] if not arg.startswith("--")]  # explorer class names
    for make in factories:
        explorer = make()
        if only and type(explorer).__name__ not in only:
            continue
        moves: list[float] = []
        picture, done = run(explorer, settings(explorer), moves)
        print(f"{type(explorer).__name__:20s}  {stats(picture)}  {stats(done)}  {stats(moves)}")
    allocation = AllocationExplorer()
    plan = settings(allocation)
    run(allocation, plan)
    allocation.set(block_size=4, length=5, layout="example [4, 1, …]")
    _, again = run(allocation, plan)
    print(f"AllocationExplorer, same settings again (kernel memoised): {stats(again)}")
    allocation.set(block_size=4, length=1, layout="example [4, 1, …]")
    play = []
    for _ in range(40):
        start = CLOCK()
        allocation.step()
        play.append(CLOCK() - start)
    print(f"AllocationExplorer, Play steps (length + 1):          {stats(play)}")


if __name__ == "__main__":
    main()
