"""How fast is the scheduler? Steps per second on a 1,000-request trace, printed as figures.

Requests: prompts of 1..512 tokens, 1..256 output tokens, one sample in four forked into two
(uniform, seeded), all queued at the start. The device pool holds 1,024 blocks of 16 (16,384
tokens), so the trace preempts often. Four runs: swap or recompute, whole prefills or chunked
prefill with a budget of 512 tokens. Control plane only (no K/V data): the figure is the
scheduler's own cost, block tables and allocator included.

Run: python benchmarks/bench_scheduler.py
"""

from __future__ import annotations

import random
import time

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Request
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig

NUM_REQUESTS = 1_000
MAX_PROMPT, MAX_OUTPUT = 512, 256
BLOCK_SIZE, NUM_BLOCKS = 16, 1024
BUDGET = 512


def make_trace(seed: int = 0) -> list[Request]:
    rng = random.Random(seed)
    return [
        Request(
            f"r{i}",
            rng.randint(1, MAX_PROMPT),
            rng.randint(1, MAX_OUTPUT),
            2 if rng.random() < 0.25 else 1,
        )
        for i in range(NUM_REQUESTS)
    ]


def run(mode: str, chunked: bool) -> tuple[Scheduler, float]:
    scheduler = Scheduler(
        BlockAllocator(NUM_BLOCKS, BLOCK_SIZE),
        SchedulerConfig(
            mode=mode, token_budget=BUDGET if chunked else None, chunked_prefill=chunked
        ),
    )
    for request in make_trace():
        scheduler.add(request)
    start = time.perf_counter()
    scheduler.run()
    return scheduler, time.perf_counter() - start


def main() -> None:
    print(f"{NUM_REQUESTS} requests, pool {NUM_BLOCKS} blocks of {BLOCK_SIZE}")
    print(
        f"{'mode':10} {'prefill':14} {'steps':>6} {'steps/s':>8} {'preempt':>8} "
        f"{'moved':>7} {'recomputed':>10}"
    )
    for mode in ("swap", "recompute"):
        for chunked in (False, True):
            s, seconds = run(mode, chunked)
            moved = s.blocks_swapped_out + s.blocks_swapped_in
            kind = f"chunked {BUDGET}" if chunked else "whole"
            print(
                f"{mode:10} {kind:14} {s.steps:6d} {s.steps / seconds:8.0f} "
                f"{s.preemptions:8d} {moved:7d} {s.tokens_recomputed:10d}"
            )


if __name__ == "__main__":
    main()
