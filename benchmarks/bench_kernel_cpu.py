"""How long paged_attention takes in Triton's CPU interpreter (prints figures; not a test).

Two calls, each timed warm (after two untimed calls), median of many:

- the example call: 1 sequence, 1 head, head_dim 1, block size 4, length 5 (tables [4, 1]).
  Sliders call this on every move, so it should stay well under 50 ms;
- a 4-sequence, 64-position, head_dim 64 call (8 query heads over 2 kv heads, block 16);
- the input validation alone, on the example and on a 10,000 x 512 block table.

Wall time and process CPU time are both printed: on a loaded machine wall time includes
waiting for a core. Run: ``python benchmarks/bench_kernel_cpu.py [repeats]``.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import pagedlab
from pagedlab.attention import backend
from pagedlab.attention.ops import (
    block_tables_tensor,
    paged_attention,
    reference_attention,
    validate_paged_inputs,
)


def example_call() -> tuple[torch.Tensor, ...]:
    key_cache = torch.zeros(6, 4, 1, 1)
    value_cache = torch.zeros(6, 4, 1, 1)
    value_cache[4, :, 0, 0] = torch.tensor([1.0, 2, 3, 4])
    value_cache[1, 0, 0, 0] = 5.0
    return (
        torch.ones(1, 1, 1),
        key_cache,
        value_cache,
        torch.tensor([[4, 1]], dtype=torch.int32),
        torch.tensor([5], dtype=torch.int32),
    )


def batch_call() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    seqs, positions, block_size, heads, kv_heads, dim = 4, 64, 16, 8, 2, 64
    pages = positions // block_size
    num_blocks = seqs * pages
    perm = torch.randperm(num_blocks, generator=gen).view(seqs, pages).tolist()
    shape = (num_blocks, block_size, kv_heads, dim)
    return (
        torch.randn(seqs, heads, dim, generator=gen),
        torch.randn(shape, generator=gen),
        torch.randn(shape, generator=gen),
        block_tables_tensor(perm),
        torch.full((seqs,), positions, dtype=torch.int32),
    )


def measure(name: str, args: tuple[torch.Tensor, ...], repeats: int) -> None:
    for _ in range(2):
        paged_attention(*args)
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = paged_attention(*args)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    err = (out.float() - reference_attention(*args).float()).abs().max().item()
    print(
        f"{name:<44} median {1e3 * statistics.median(wall):7.1f} ms wall, "
        f"{1e3 * statistics.median(cpu):7.1f} ms CPU  ({repeats} runs, max |err| {err:.1e})"
    )


def measure_validation(name: str, args: tuple[torch.Tensor, ...], repeats: int) -> None:
    validate_paged_inputs(*args)
    cpu = []
    for _ in range(repeats):
        c = time.process_time()
        validate_paged_inputs(*args)
        cpu.append(time.process_time() - c)
    print(f"{name:<44} median {1e3 * statistics.median(cpu):7.2f} ms CPU  ({repeats} runs)")


def big_table() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    seqs, width, block_size, num_blocks = 10_000, 512, 16, 4096
    cache = torch.zeros(num_blocks, block_size, 2, 4)
    return (
        torch.zeros(seqs, 8, 4),
        cache,
        cache,
        torch.randint(0, num_blocks, (seqs, width), dtype=torch.int32, generator=gen),
        torch.randint(1, width * block_size, (seqs,), dtype=torch.int32, generator=gen),
    )


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    print(f"pagedlab {pagedlab.__version__ if hasattr(pagedlab, '__version__') else ''}")
    print(backend.describe())
    if backend.BACKEND == "unavailable":
        print("Triton is not available here; nothing to time.")
        return
    torch.set_num_threads(1)
    measure("example: 1 seq, 1 head, dim 1, block 4, len 5", example_call(), repeats)
    measure("4 seqs x 64 positions, 8/2 heads, dim 64", batch_call(), max(5, repeats // 5))
    measure_validation("validation only: the example", example_call(), 200)
    measure_validation("validation only: 10,000 x 512 table", big_table(), 10)


if __name__ == "__main__":
    main()
