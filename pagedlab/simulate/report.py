"""The paper's numbers beside ours (Fig. 2, Fig. 13), and the block-size trade-off.

``fig2_table`` and ``fig13_table`` (mean batch sizes; OPT-13B, ShareGPT, 2 req/s) print the
paper's numbers (``pagedlab.ground.paper``) beside ours; ``compare_table`` both, with the cause of
each difference (``GAP_NOTES``). ``block_size_sweep`` runs the paged policy per block size
and reports Fig. 18b's trade-off: internal fragmentation (grows with B), table entries per
sequence and sharing granularity (shrink and coarsen with B). Kernel speed is not simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagedlab.ground import paper
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.simulate.accounting import CATEGORIES, FIG2, SimResult
from pagedlab.simulate.engine import simulate
from pagedlab.simulate.policies import BYTES_PER_TOKEN_OPT13B, PAPER_POOL_SLOTS, vllm
from pagedlab.simulate.step_cost import StepCost
from pagedlab.simulate.validate import check_type
from pagedlab.simulate.workload import Trace

PAPER_MEAN_BATCH = paper.FIG13_MEAN_BATCH  # Fig. 13

GAP_NOTES = {
    "Orca (Max)": "7 extents of 2048 fit in the pool, in both; the buddy allocator cannot use "
    "the pool's remainder below 2048 slots (1,392 of 15,728 = 8.9 %), which is all of "
    "'external & others'. How the 7 x 2048 split into tokens / reserved / never used depends "
    "on the lengths of the running requests: our synthetic lengths, not ShareGPT's",
    "Orca (Pow2)": "the buddy allocator's rounding (reservation up to a power of two) is most "
    "of 'external & others'; its size depends on where the lengths fall between powers of "
    "two, and which free block the paper's allocator picks is not stated (ours: the "
    "smallest that fits, lowest address first)",
    "Orca (Oracle)": "as for Pow2: rounding plus free blocks too small for the waiting head; "
    "no internal fragmentation, in both",
    "vLLM": "what remains is empty slots in last blocks and free blocks a waiting request "
    "cannot use yet. Its batch size depends on our step-time model, chosen so that Little's "
    "law gives about the paper's batch at 2 req/s (see StepCost): not an independent check",
}
_HEADS = ("tokens", "reserved", "internal", "ext.+others")


def _check_results(results: Sequence[SimResult]) -> list[SimResult]:
    results = list(results)
    for i, r in enumerate(results):
        check_type(r, f"results[{i}]", SimResult)
    return results


def _pct(v: float | None) -> str:
    return f"{'–':>12}" if v is None else f"{100 * v:11.1f}%"


def fig2_table(results: Sequence[SimResult]) -> str:
    """The paper's Fig. 2 breakdown and ours (shares of the non-idle pool); ours also splits
    'external & others' into rounding and waiting, and shows the idle share."""
    results = _check_results(results)
    head = f"{'system':<14}{'':<6}" + "".join(f"{h:>12}" for h in _HEADS)
    head += f" | {'rounding':>8} {'free':>6} {'idle':>6}"
    lines = [head, "-" * len(head)]
    for r in results:
        name, ours, pool = r.policy.name, r.fig2_shares(), r.shares()
        if name in paper.FIG2_BREAKDOWN:
            row = paper.FIG2_BREAKDOWN[name]
            lines.append(f"{name:<14}{'paper':<6}" + "".join(_pct(row[c]) for c in FIG2))
            name = ""
        busy = 1 - pool["idle"]
        parts = (pool["rounding"] / busy, pool["external"] / busy) if busy > 0 else (0.0, 0.0)
        lines.append(
            f"{name:<14}{'ours':<6}"
            + "".join(_pct(ours[c]) for c in FIG2)
            + f" | {100 * parts[0]:7.1f}% {100 * parts[1]:5.1f}% {100 * pool['idle']:5.1f}%"
        )
    lines.append(
        "ext.+others = rounding (buddy extent beyond the reservation) + free (free slots while a "
        "request waits);\nidle = free slots while nobody waits, as a share of the whole pool, "
        "left out of the other columns."
    )
    return "\n".join(lines)


def fig13_table(results: Sequence[SimResult]) -> str:
    """Mean batched requests: ours beside the paper's Fig. 13 (OPT-13B, ShareGPT, 2 req/s)."""
    results = _check_results(results)
    lines = [f"{'system':<14} {'ours':>6} {'paper':>6}"]
    for r in results:
        pb = paper.FIG13_MEAN_BATCH.get(r.policy.name)
        lines.append(
            f"{r.policy.name:<14} {r.mean_batch:6.2f} {'' if pb is None else f'{pb:6.2f}':>6}"
        )
    return "\n".join(lines)


def compare_table(results: Sequence[SimResult], with_paper: bool = True) -> str:
    """Fig. 2 and Fig. 13, ours beside the paper's (OPT-13B, ShareGPT, 2 req/s), and why each
    row differs; ``with_paper=False`` prints only ours (for any other setting)."""
    results = _check_results(results)
    check_type(with_paper, "with_paper", bool)
    if not with_paper:
        lines = [f"{'system':<14}" + "".join(f"{h:>12}" for h in _HEADS) + f"{'batch':>8}"]
        for r in results:
            s = r.fig2_shares()
            lines.append(
                f"{r.policy.name:<14}" + "".join(_pct(s[c]) for c in FIG2) + f"{r.mean_batch:8.2f}"
            )
        return "\n".join(lines)
    why = [
        f"{r.policy.name}: {GAP_NOTES[r.policy.name]}"
        for r in results
        if r.policy.name in GAP_NOTES
    ]
    figures = ["Fig. 2", fig2_table(results), "", "Fig. 13", fig13_table(results), ""]
    return "\n".join([*figures, "why they differ:", *why])


def breakdown_table(results: Sequence[SimResult]) -> str:
    """Our six categories as shares of the whole pool (they sum to 100 %)."""
    results = _check_results(results)
    lines = [f"{'system':<14}" + "".join(f"{c:>12}" for c in CATEGORIES)]
    for r in results:
        s = r.shares()
        lines.append(f"{r.policy.name:<14}" + "".join(_pct(s[c]) for c in CATEGORIES))
    return "\n".join(lines)


SWEEP_BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
    check_type(trace, "trace", Trace)
    sizes = [check_int(b, f"sizes[{i}]", minimum=1) for i, b in enumerate(sizes)]
    if not sizes:
        raise ValueError("sizes must name at least one block size, got []")
    rows = []
    final, prompt = trace.final_len, trace.prompt
    for b in sizes:
        pol = vllm(b)
        r = simulate(trace, pol, pool_slots=pool_slots, cost=cost)
        s = r.fig2_shares()
        entries_mean = float(np.mean(-(-final // b)))
        shareable = float(np.sum(prompt // b * b) / np.sum(prompt))
        # internal: of the non-idle pool, like the token share
        rows.append(SweepRow(b, s["tokens"], s["internal"], r.mean_batch, r.preemptions,
                             ceil_div(pol.max_len, b), entries_mean, shareable,
                             b * BYTES_PER_TOKEN_OPT13B / 1024))  # fmt: skip
    return rows


def sweep_table(rows: Sequence[SweepRow]) -> str:
    """One line per block size: the columns of ``SweepRow``."""
    rows = list(rows)
    for i, w in enumerate(rows):
        check_type(w, f"rows[{i}]", SweepRow)
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
