"""Speed of sharing operations and of one explorer slider step; prints figures, asserts nothing.

Usage: python benchmarks/bench_sharing.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pagedlab import BlockAllocator, BlockTable
from pagedlab.explorers.sharing import PrefixCacheExplorer, SharingExplorer
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.sharing import beam_step, fork_samples
from pagedlab.pictures.scenes import FIG9_STEP, figure9_before


def best_ms(run: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def fork_and_free() -> None:
    table = BlockTable(BlockAllocator(1024, 16))
    table.append_tokens(1000)
    for sample in fork_samples(table, 8):
        sample.free()


def prefix_admits() -> None:
    cache = PrefixCache(BlockAllocator(256, 16))
    for r in range(32):
        cache.admit(list(range(512)) + [r] * 20).table.free()


def main() -> None:
    explorer, prefix = SharingExplorer(), PrefixCacheExplorer()
    values = iter(range(1, 10_000))
    cases: list[tuple[str, Callable[[], object]]] = [
        ("fork 8 samples of a 1000-token table, free all", fork_and_free),
        (
            "Fig. 9 beam step (k=4), tree built first",
            lambda: beam_step(figure9_before(), FIG9_STEP),
        ),
        ("32 prefix-cache admits of 532 tokens", prefix_admits),
        ("SharingExplorer slider step", lambda: explorer.set(prompt_len=1 + next(values) % 24)),
        ("PrefixCacheExplorer slider step", lambda: prefix.set(shared=next(values) % 16)),
    ]
    for name, run in cases:
        print(f"{name:48s} {best_ms(run):8.2f} ms (best of 5)")


if __name__ == "__main__":
    main()
