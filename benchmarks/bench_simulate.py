"""Time a 1-hour ShareGPT-like trace at 2 req/s under each of the paper's four policies.

Target: each policy simulated in <= 5 s. Wall time suffers when other processes share
the cores; CPU time (process_time) is the steadier figure. Prints wall time, steps simulated and the
results beside the paper's Fig. 2 / Fig. 13 numbers (row by row), the Orca baselines on a
first-fit allocator instead of the paper's buddy allocator, how the batch sizes move when every
step takes half or twice as long, then the block-size sweep.
Run: python benchmarks/bench_simulate.py [--rate 2] [--hours 1] [--seed 0] [--no-sweep]
         [--workload sharegpt|alpaca]   (the paper's numbers are for ShareGPT at 2 req/s)
"""

from __future__ import annotations

import argparse
import time

from pagedlab.ground import paper
from pagedlab.simulate import (
    StepCost,
    block_size_sweep,
    breakdown_table,
    compare_table,
    make_trace,
    paper_policies,
    simulate,
    sweep_table,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload", choices=["sharegpt", "alpaca"], default="sharegpt")
    ap.add_argument("--no-sweep", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    trace = make_trace(a.rate, 3600 * a.hours, a.workload, seed=a.seed)
    print(f"trace built in {time.perf_counter() - t0:.2f} s: {trace.summary()}")
    results = []
    for pol in paper_policies(16):
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate(trace, pol)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        results.append(r)
        print(
            f"{pol.name:<14} {dt:5.2f} s wall {cpu:5.2f} s cpu  {r.steps:>7} steps  "
            f"{r.finished:>5} finished  {r.preemptions:>5} preemptions"
        )
    print()
    paper_setting = a.workload == "sharegpt" and a.rate == paper.FIG13_RATE  # Fig. 2 / Fig. 13
    print(compare_table(results, with_paper=paper_setting))
    print("\nour six categories, as shares of the whole pool:")
    print(breakdown_table(results))
    print("\nthe Orca baselines on first-fit (no rounding) instead of the buddy allocator:")
    first_fit = [simulate(trace, p) for p in paper_policies(16, allocator="first_fit")[:3]]
    print(compare_table(first_fit, with_paper=False))
    print("\nmean batch when every step takes x0.5 / x1 / x2 as long (StepCost.scaled):")
    for pol, r in zip(paper_policies(16), results, strict=True):
        half, double = (simulate(trace, pol, cost=StepCost().scaled(f)) for f in (0.5, 2.0))
        print(f"{pol.name:<14} {half.mean_batch:7.2f} {r.mean_batch:7.2f} {double.mean_batch:7.2f}")
    if not a.no_sweep:
        t0 = time.perf_counter()
        rows = block_size_sweep(trace)
        print(f"\nblock-size sweep ({len(rows)} paged runs) in {time.perf_counter() - t0:.1f} s")
        print(sweep_table(rows))


if __name__ == "__main__":
    main()
