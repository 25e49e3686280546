"""How long one control move takes in every explorer, server side (no browser).

A move is what a key press on a slider does: one control's ``value`` changes and the
explorer's observer runs (state, then the picture assigned, then ``finish``, the kernel
call if any, then the readout). For each explorer, 60 random moves (seeded) of a random
control to a random value in its range; printed: the median and p90 time until the
picture was assigned (what the page can show first) and until the move was done. Then, for
the allocation explorer, the same moves again (kernel memoised) and Play steps.

Times are this thread's CPU time (``time.thread_time``), so that other jobs on a shared
machine do not count; ``--wall`` gives wall-clock time. Run:
``python benchmarks/bench_explorer.py [--wall]``. Target: a move <= ~30 ms (median).
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

MOVES = 60
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


def moves(explorer: Explorer, seed: int = 0) -> list[tuple[str, object]]:
    """``MOVES`` (control, value) pairs, each changing its control from the value before."""
    rng, values, out = random.Random(seed), dict(explorer.values), []
    while len(out) < MOVES:
        name = rng.choice(list(explorer.controls))
        value = random_value(rng, explorer.controls[name])
        if value != values[name]:
            out.append((name, value))
            values[name] = value
    return out


def run(explorer: Explorer, plan: list[tuple[str, object]]) -> tuple[list[float], list[float]]:
    """Time every move: until the picture was assigned, and until the move was done."""
    shown: list[float] = []
    explorer.picture.observe(lambda _change: shown.append(CLOCK()), names="value")
    picture, done = [], []
    for name, value in plan:
        control = explorer.controls[name]
        if isinstance(control, widgets.IntSlider):  # the range a dependent slider has now
            value = min(max(value, control.min), control.max)  # type: ignore[type-var]
        shown.clear()
        start = CLOCK()
        control.value = value
        end = CLOCK()
        done.append(end - start)
        picture.append((shown[0] if shown else end) - start)
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
    print(f"one control move, {MOVES} random moves per explorer (first visit of each setting)")
    print(f"{'explorer':20s}  {'until the picture':34s}  until done (incl. kernel check)")
    for make in factories:
        explorer = make()
        picture, done = run(explorer, moves(explorer))
        print(f"{type(explorer).__name__:20s}  {stats(picture)}  {stats(done)}")
    allocation = AllocationExplorer()
    plan = moves(allocation)
    run(allocation, plan)
    allocation.set(block_size=4, length=5, layout="example [4, 1, …]")
    _, again = run(allocation, plan)
    print(f"AllocationExplorer, same moves again (kernel memoised): {stats(again)}")
    allocation.set(block_size=4, length=1, layout="example [4, 1, …]")
    play = []
    for _ in range(40):
        start = CLOCK()
        allocation.step()
        play.append(CLOCK() - start)
    print(f"AllocationExplorer, Play steps (length + 1):          {stats(play)}")


if __name__ == "__main__":
    main()
