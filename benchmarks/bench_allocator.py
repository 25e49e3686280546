"""How fast is the block manager? A decode trace of 20,000 sequences, printed as figures.

Each sequence has a prompt of 1..512 tokens and 1..256 decode steps (uniform, seeded). At most
512 run at once; the pool holds enough 16-token blocks for 512 sequences of full length.
Admit -> append the prompt -> one token per running sequence per step -> free when done.
The same loop without any allocator calls is timed too: the difference is the manager's cost.

Run: python benchmarks/bench_allocator.py
"""

from __future__ import annotations

import random
import time
import tracemalloc

from pagedlab import BlockAllocator, BlockTable
from pagedlab.checks import ceil_div

NUM_SEQUENCES = 20_000
MAX_PROMPT, MAX_DECODE = 512, 256
BLOCK_SIZE = 16
MAX_RUNNING = 512


def make_trace(seed: int = 0) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, MAX_PROMPT), rng.randint(1, MAX_DECODE)) for _ in range(NUM_SEQUENCES)]


def run(trace: list[tuple[int, int]], with_allocator: bool = True) -> int:
    """Replay ``trace``; returns the number of single-token appends."""
    blocks_per_seq = ceil_div(MAX_PROMPT + MAX_DECODE, BLOCK_SIZE)
    allocator = BlockAllocator(MAX_RUNNING * blocks_per_seq, BLOCK_SIZE)
    running: list[tuple[BlockTable | None, int]] = []  # (table, step at which it finishes)
    admitted = appends = step = 0
    while admitted < len(trace) or running:
        while len(running) < MAX_RUNNING and admitted < len(trace):
            prompt, decode = trace[admitted]
            table = None
            if with_allocator:
                table = BlockTable(allocator)
                table.append_tokens(prompt)
            running.append((table, step + decode))
            admitted += 1
        step += 1
        still_running = []
        for entry in running:
            table, finish = entry
            if table is not None:
                table.append_token()
            if finish > step:
                still_running.append(entry)
            elif table is not None:
                table.free()
        appends += len(running)
        running = still_running
    if with_allocator:
        assert allocator.num_free == allocator.num_blocks, "blocks leaked"
    return appends


def main() -> None:
    trace = make_trace()
    run(trace[:500])  # warm up
    start = time.perf_counter()
    run(trace, with_allocator=False)
    empty = time.perf_counter() - start
    start = time.perf_counter()
    appends = run(trace)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    run(trace)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"sequences          {NUM_SEQUENCES:,}  (block size {BLOCK_SIZE}, <= {MAX_RUNNING} running)"
    )
    print(f"single-token appends {appends:,}")
    print(f"whole trace        {seconds:.3f} s   ({appends / seconds / 1e6:.2f} M appends/s)")
    print(f"empty loop         {empty:.3f} s   (allocator's own cost {seconds - empty:.3f} s)")
    print(f"peak Python memory {peak / 2**20:.1f} MiB (tracemalloc, one more run)")


if __name__ == "__main__":
    main()
