"""The paper's numbers, our numbers beside them, and the block-size trade-off.

``PAPER_TOKEN_SHARE`` is Fig. 2 (share of KV memory holding token states); ``PAPER_MEAN_BATCH``
is Fig. 13 (OPT-13B, ShareGPT, 2 req/s: mean batched requests). ``compare_table`` prints ours
beside them with the likely cause of each difference (``GAP_NOTES``).

``block_size_sweep`` runs the paged policy for each block size and reports what the paper's
Fig. 18b trades off: internal fragmentation (grows with B), block-table entries per sequence
(shrink with B: fewer, larger gathers for the kernel) and sharing granularity (only whole
blocks are shared, and a copy-on-write copies a whole block of B slots). Kernel speed itself is
not simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagedlab.simulate.engine import SimResult, StepCost, simulate
from pagedlab.simulate.memory import BYTES_PER_TOKEN_OPT13B, PAPER_POOL_SLOTS, vllm
from pagedlab.simulate.workload import Trace

PAPER_TOKEN_SHARE = {
    "Orca (Max)": 0.204,
    "Orca (Pow2)": 0.268,
    "Orca (Oracle)": 0.382,
    "vLLM": 0.963,
}
PAPER_MEAN_BATCH = {"Orca (Max)": 7.00, "Orca (Pow2)": 9.81, "Orca (Oracle)": 13.62, "vLLM": 30.42}

GAP_NOTES = {
    "Orca (Max)": "batch is memory-bound at floor(15728/2048) = 7 in both; token share "
    "depends on our assumed length spread",
    "Orca (Pow2)": "our first-fit packs power-of-two extents tightly, so less external "
    "fragmentation than the paper measured -> more batched",
    "Orca (Oracle)": "same cause: our first-fit over a synthetic trace fragments less than "
    "the paper's system did -> more batched",
    "vLLM": "close; what remains is empty slots in last blocks and free blocks a waiting "
    "request cannot use yet; batch sits at the saturation edge of our step-cost model",
}

SWEEP_BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def compare_table(results: Sequence[SimResult], with_paper: bool = True) -> str:
    """Fixed-width table: token share and mean batch, ours vs the paper's, with the gap's cause.

    The paper's numbers are for OPT-13B, ShareGPT, 2 req/s: pass ``with_paper=False`` for
    any other setting, and only our columns are printed.
    """
    if not with_paper:
        lines = [f"{'system':<14} {'tokens':>7} {'batch':>7}"]
        for r in results:
            tok = 100 * r.fig2_shares()["tokens"]
            lines.append(f"{r.policy.name:<14} {tok:6.1f}% {r.mean_batch:7.2f}")
        return "\n".join(lines)
    head = f"{'system':<14} {'tokens ours':>11} {'paper':>6} {'batch ours':>10} {'paper':>6}"
    lines, why = [head, "-" * len(head)], []
    for r in results:
        name = r.policy.name
        pt, pb = PAPER_TOKEN_SHARE.get(name), PAPER_MEAN_BATCH.get(name)
        lines.append(
            f"{name:<14} {100 * r.fig2_shares()['tokens']:10.1f}% "
            f"{'' if pt is None else f'{100 * pt:5.1f}%':>6} {r.mean_batch:10.2f} "
            f"{'' if pb is None else f'{pb:6.2f}':>6}"
        )
        if name in GAP_NOTES:
            why.append(f"{name}: {GAP_NOTES[name]}")
    return "\n".join(lines + ["", "why they differ:"] + why)


def breakdown_table(results: Sequence[SimResult]) -> str:
    """Fig. 2's breakdown (shares of the non-idle pool) and, apart, the idle share of the pool."""
    cats = ("tokens", "reserved", "internal", "external")
    lines = [f"{'system':<14}" + "".join(f"{c:>10}" for c in cats) + f"{'(idle)':>10}"]
    for r in results:
        s, idle = r.fig2_shares(), r.shares()["idle"]
        row = "".join(f"{100 * s[c]:9.1f}%" for c in cats) + f"{100 * idle:9.1f}%"
        lines.append(f"{r.policy.name:<14}" + row)
    return "\n".join(lines)


@dataclass(frozen=True)
class SweepRow:
    block_size: int
    token_share: float
    internal_share: float
    mean_batch: float
    preemptions: int
    table_entries_max: int  # entries for one max-length sequence
    table_entries_mean: float  # mean over the trace's requests at their final length
    shareable_prompt: float  # share of prompt tokens in whole blocks (shareable)
    cow_copy_kib: float  # KV copied by one copy-on-write of a block, OPT-13B


def block_size_sweep(
    trace: Trace,
    sizes: Sequence[int] = SWEEP_BLOCK_SIZES,
    pool_slots: int = PAPER_POOL_SLOTS,
    cost: StepCost | None = None,
) -> list[SweepRow]:
    """One paged simulation per block size; see the module docstring for the columns."""
    rows = []
    final, prompt = trace.final_len, trace.prompt
    for b in sizes:
        pol = vllm(int(b))
        r = simulate(trace, pol, pool_slots=pool_slots, cost=cost)
        s = r.fig2_shares()
        rows.append(
            SweepRow(
                block_size=int(b),
                token_share=s["tokens"],
                internal_share=s["internal"],  # of the non-idle pool, like token_share
                mean_batch=r.mean_batch,
                preemptions=r.preemptions,
                table_entries_max=-(-pol.max_len // b),
                table_entries_mean=float(np.mean(-(-final // b))),
                shareable_prompt=float(np.sum(prompt // b * b) / np.sum(prompt)),
                cow_copy_kib=b * BYTES_PER_TOKEN_OPT13B / 1024,
            )
        )
    return rows


def sweep_table(rows: Sequence[SweepRow]) -> str:
    head = (
        f"{'B':>4} {'tokens':>7} {'internal':>8} {'batch':>6} {'entries/seq':>11} "
        f"{'shareable':>9} {'CoW copy':>9}"
    )
    lines = [head]
    for w in rows:
        lines.append(
            f"{w.block_size:>4} {100 * w.token_share:6.1f}% {100 * w.internal_share:7.2f}% "
            f"{w.mean_batch:6.1f} {w.table_entries_mean:11.1f} {100 * w.shareable_prompt:8.1f}% "
            f"{w.cow_copy_kib / 1024:6.1f} MiB"
        )
    return "\n".join(lines)
