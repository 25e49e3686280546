"""Fig. 19 (a) on this machine: seconds to swap the same K/V bytes out and in, by block size.

Prints one row per block size (best of 5). On a CUDA machine the copies go between device
memory and pinned host memory, as vLLM V0's swap did; on a CPU, between two CPU caches.
"""

from __future__ import annotations

from pagedlab.attention.swap_cost import measure_swap


def main() -> None:
    timings = measure_swap(repeats=5)
    print(f"swap of {timings[0].nbytes / 2**20:.0f} MiB (K and V), best of 5")
    print("block size  blocks   out ms    in ms   per block µs")
    for t in timings:
        per_block = 1e6 * t.total_s / (2 * t.num_blocks)
        print(
            f"{t.block_size:10d} {t.num_blocks:7d} {1e3 * t.swap_out_s:8.2f} "
            f"{1e3 * t.swap_in_s:8.2f} {per_block:12.1f}"
        )
    small, large = timings[0], timings[-1]
    ratio = small.total_s / large.total_s
    print(f"block size {small.block_size} is {ratio:.0f}x slower than {large.block_size}")


if __name__ == "__main__":
    main()
