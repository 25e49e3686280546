"""How long one step of the allocation explorer takes: state + kernel call + picture.

Prints medians over 100 random slider steps (block size 1-16, length 1-64, any layout):
cold (kernel results not cached yet), warm (the same steps again: memoised kernel), and
the picture alone (scene + render + PNG); plus Play steps (length + 1). Run:
``python benchmarks/bench_explorer.py``. The target for a step is <= 50 ms.
"""

from __future__ import annotations

import random
import statistics
import time

from pagedlab.explorers.allocation import (
    LAYOUTS,
    MAX_BLOCK_SIZE,
    MAX_LENGTH,
    AllocationExplorer,
    explorer_state,
)
from pagedlab.pictures.blocks import Canvas, scene


def median_ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:6.1f} ms  p90 {sorted(samples)[int(0.9 * len(samples))] * 1e3:6.1f} ms"  # noqa: E501


def main() -> None:
    rng = random.Random(0)
    steps = [
        (rng.randint(1, MAX_BLOCK_SIZE), rng.randint(1, MAX_LENGTH), rng.choice(LAYOUTS))
        for _ in range(100)
    ]
    explorer = AllocationExplorer()
    for block_size in range(1, MAX_BLOCK_SIZE + 1):  # one-off interpreter "compile" per size
        explorer_state(block_size, 1, LAYOUTS[0])

    shown: list[float] = []  # when the picture reached the widget (before the kernel runs)
    explorer.picture.observe(lambda _change: shown.append(time.perf_counter()), names="value")

    def run(
        settings: list[tuple[int, int, str]], picture: list[float] | None = None
    ) -> list[float]:
        times = []
        for block_size, length, layout in settings:
            start = time.perf_counter()
            explorer.set(block_size=block_size, length=length, layout=layout)
            times.append(time.perf_counter() - start)
            if picture is not None:
                picture.append(shown[-1] - start)
        return times

    print("allocation explorer, one step = state + kernel + picture (PNG into the widget)")
    first_picture: list[float] = []
    print(f"  random steps, kernel not cached : {median_ms(run(steps, first_picture))}")
    print(f"    of which until the picture    : {median_ms(first_picture)}")
    print(f"  same steps again, kernel cached : {median_ms(run(steps))}")
    explorer.set(block_size=4, length=1, layout=LAYOUTS[1])
    play = []
    for _ in range(40):
        start = time.perf_counter()
        explorer.step()
        play.append(time.perf_counter() - start)
    print(f"  play steps (length + 1), fresh  : {median_ms(play)}")

    canvas = Canvas(dpi=80)
    picture = []
    for block_size, length, layout in steps:
        state = explorer_state(block_size, length, layout)
        start = time.perf_counter()
        canvas.render(scene(state.allocator, [state.table])).png()
        picture.append(time.perf_counter() - start)
    print(f"  picture only (scene+render+PNG) : {median_ms(picture)}")
    state_only = []
    for block_size, length, layout in steps:
        start = time.perf_counter()
        explorer_state(block_size, length, layout)
        state_only.append(time.perf_counter() - start)
    print(f"  state only (kernel cached)      : {median_ms(state_only)}")


if __name__ == "__main__":
    main()
