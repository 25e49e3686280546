"""Memory saved by sharing blocks, measured on a real allocator (paper §6.3, Figs. 14-15).

``parallel_savings`` (n samples) and ``beam_savings`` (beam width k) run the real block tables
(``pagedlab.memory.sharing``) token by token and count the blocks in use after each step, with
sharing (the pool's count) and without (``width * ceil(tokens / block_size)``).
``final_saved``: blocks saved / blocks without sharing once generation ends; ``mean_saved``:
the same ratio over the block-steps of the whole generation, closer to a serving average.
Beam scores are seeded synthetic log-probabilities (``log(u)``, u uniform): reproducible, but
not a real model's beams. Not modelled: many requests at once, preemption, mixed lengths.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.ground import paper
from pagedlab.ground.checks import ceil_div, check_choice, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.sharing import beam_step, fork_samples

PAPER_SAVED = paper.SECTION_6_3_SAVED_RANGE
"""The paper's range on Alpaca (§6.3): parallel sampling 6.1-9.8 %, beam search 37.6-55.2 %."""

PAPER_FIG15 = {(mode, w): v for mode, row in paper.FIG15_SAVED.items() for w, v in row.items()}
"""The paper's Fig. 15 (OPT-13B, Alpaca trace): memory saved by sharing, per (mode, width)."""

ALPACA_MEAN_LENGTHS = paper.MEAN_LENGTHS["alpaca"]
"""Mean input / output lengths of the paper's Alpaca trace (§6.1, Fig. 11)."""


@dataclass(frozen=True)
class Savings:
    mode: str  # "parallel" or "beam"
    width: int  # n samples or beam width k
    prompt_len: int
    output_len: int
    block_size: int
    blocks_with: int  # at the end of generation
    blocks_without: int
    final_saved: float
    mean_saved: float

    def row(self) -> str:
        return (
            f"{self.mode:8s} {self.width:2d}  {self.blocks_without:4d} {self.blocks_with:4d}"
            f"  {100 * self.final_saved:5.1f} %  {100 * self.mean_saved:5.1f} %"
        )


MAX_PROMPT_LEN = MAX_OUTPUT_LEN = 4096
"""Longest prompt and generation one run simulates, token by token."""

MAX_SAVINGS_WIDTH = 64
"""Most samples or beams one run simulates."""

MAX_RUN_BLOCKS = 4096
"""Most blocks a run may hold without sharing (``width * ceil((prompt_len + output_len) /
block_size)``): beyond that, a token-by-token run with a fork per beam takes minutes."""

MAX_REQUESTS = 10_000
"""Most requests ``alpaca_savings`` draws."""


def _check(
    prompt_len: int, output_len: int, width: int, block_size: int, width_name: str
) -> tuple[int, int, int, int]:
    checked = (
        check_int(prompt_len, "prompt_len", minimum=1, maximum=MAX_PROMPT_LEN),
        check_int(output_len, "output_len", minimum=1, maximum=MAX_OUTPUT_LEN),
        check_int(width, width_name, minimum=1, maximum=MAX_SAVINGS_WIDTH),
        check_int(block_size, "block_size", minimum=1, maximum=MAX_PROMPT_LEN + MAX_OUTPUT_LEN),
    )
    p, o, w, b = checked
    if w * ceil_div(p + o, b) > MAX_RUN_BLOCKS:
        raise ValueError(
            f"{width_name}={w} sequences of prompt_len + output_len = {p + o} tokens in blocks "
            f"of {b} hold {w * ceil_div(p + o, b)} blocks without sharing; at most "
            f"{MAX_RUN_BLOCKS} (use a larger block_size or shorter sequences)"
        )
    return checked


def _pool(prompt_len: int, output_len: int, width: int, block_size: int) -> BlockAllocator:
    per_seq = ceil_div(prompt_len + output_len, block_size)
    return BlockAllocator(width * (per_seq + 1) + 1, block_size)


def parallel_savings(prompt_len: int, output_len: int, n: int, block_size: int = 16) -> Savings:
    """n samples of one prompt, each generating ``output_len`` tokens."""
    prompt_len, output_len, n, block_size = _check(prompt_len, output_len, n, block_size, "n")
    alloc = _pool(prompt_len, output_len, n, block_size)
    prompt = BlockTable(alloc)
    prompt.append_tokens(prompt_len)
    samples = fork_samples(prompt, n)
    used, without = [], []
    for step in range(1, output_len + 1):
        for table in samples:
            table.append_tokens(1)
        used.append(alloc.num_blocks - alloc.num_free)
        without.append(n * ceil_div(prompt_len + step, block_size))
    return _result("parallel", n, prompt_len, output_len, block_size, used, without)


def beam_savings(
    prompt_len: int, output_len: int, k: int, block_size: int = 16, seed: int = 0
) -> Savings:
    """Beam search of width k with synthetic, seeded scores for ``output_len`` steps."""
    prompt_len, output_len, k, block_size = _check(prompt_len, output_len, k, block_size, "k")
    rng = random.Random(check_int(seed, "seed"))
    alloc = _pool(prompt_len, output_len, k, block_size)
    prompt = BlockTable(alloc)
    prompt.append_tokens(prompt_len)
    beams, scores = [prompt], [0.0]
    used, without = [], []
    for step in range(1, output_len + 1):
        candidates = [
            (score + math.log(1.0 - rng.random()), parent)
            for parent, score in enumerate(scores)
            for _ in range(k)
        ]
        candidates.sort(reverse=True)
        best = candidates[:k]
        beams = beam_step(beams, [parent for _, parent in best]).beams
        scores = [score for score, _ in best]
        used.append(alloc.num_blocks - alloc.num_free)
        without.append(k * ceil_div(prompt_len + step, block_size))
    return _result("beam", k, prompt_len, output_len, block_size, used, without)


def alpaca_savings(
    mode: str, width: int, num_requests: int = 200, block_size: int = 16, seed: int = 0
) -> float:
    """Saved fraction over a synthetic Alpaca-like trace, pooled over block-steps.

    Lengths are drawn from exponential distributions with the trace's means (19.31 in,
    58.45 out; at least 1 each), seeded: skewed like the real trace, but not the real trace.
    """
    check_choice(mode, "mode", tuple(PAPER_SAVED))
    width = check_int(width, "width", minimum=1, maximum=MAX_SAVINGS_WIDTH)
    num_requests = check_int(num_requests, "num_requests", minimum=1, maximum=MAX_REQUESTS)
    block_size = check_int(block_size, "block_size", minimum=1, maximum=MAX_PROMPT_LEN)
    seed = check_int(seed, "seed")
    rng = random.Random(seed)
    saved = total = 0.0
    for i in range(num_requests):
        p = min(MAX_PROMPT_LEN, max(1, round(rng.expovariate(1 / ALPACA_MEAN_LENGTHS[0]))))
        o = min(MAX_OUTPUT_LEN, max(1, round(rng.expovariate(1 / ALPACA_MEAN_LENGTHS[1]))))
        if mode == "parallel":
            r = parallel_savings(p, o, width, block_size)
        else:
            r = beam_savings(p, o, width, block_size, seed=seed + i)
        # mean_saved is a ratio of sums; weight it back by the request's block-steps
        steps = sum(width * ceil_div(p + t, block_size) for t in range(1, o + 1))
        saved += r.mean_saved * steps
        total += steps
    return saved / total


def _result(
    mode: str, width: int, p: int, o: int, size: int, used: list[int], without: list[int]
) -> Savings:
    final, mean = 1 - used[-1] / without[-1], 1 - sum(used) / sum(without)
    return Savings(mode, width, p, o, size, used[-1], without[-1], final, mean)


def savings_table(
    prompt_len: int = 19,
    output_len: int = 58,
    widths: tuple[int, ...] = (2, 4, 6),
    block_size: int = 16,
) -> list[Savings]:
    """Parallel sampling then beam search for each width (defaults: Alpaca-like means)."""
    if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence):
        raise TypeError(f"widths must be a tuple of ints, got {widths!r}")
    widths = tuple(check_int(w, "width", minimum=1, maximum=MAX_SAVINGS_WIDTH) for w in widths)
    return [parallel_savings(prompt_len, output_len, w, block_size) for w in widths] + [
        beam_savings(prompt_len, output_len, w, block_size) for w in widths
    ]


def format_savings(rows: list[Savings]) -> str:
    """A plain-text table with the paper's Fig. 15 value for the same mode and width beside
    ours ("-" for a width the figure does not show)."""
    for r in rows:
        if not isinstance(r, Savings):
            raise TypeError(f"rows must hold Savings, got {r!r}")
    lines = ["mode     width without with  final    mean    paper (Fig. 15, Alpaca)"]
    for r in rows:
        fig15 = PAPER_FIG15.get((r.mode, r.width))
        lines.append(f"{r.row()}   " + ("-" if fig15 is None else f"{100 * fig15:.2f} %"))
    return "\n".join(lines)
