"""Notebook 09's system decision: swap or recompute one preempted sequence, with the reason,
priced by :class:`pagedlab.attention.swap_cost.CostModel` (§7.3, Fig. 19): needs torch.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pagedlab.attention.swap_cost import CostModel
from pagedlab.exercises.nb09 import NB09
from pagedlab.grade.cases import Mistake, cases

# --- a system decision, with its reason ----------------------------------------------------
from pagedlab.grade.core import Function


# --- a system decision, with its reason ----------------------------------------------------
def swap_or_recompute(
    num_tokens: int, block_size: int, prefill_tokens_per_s: float
) -> tuple[str, str]:
    """Cheaper for one preempted sequence under pagedlab's CostModel, and why (§7.3, Fig. 19)."""
    model = CostModel(prefill_tokens_per_s=prefill_tokens_per_s)
    swap = 2 * model.swap_s(num_tokens, block_size)  # out and back in
    recompute = model.recompute_s(num_tokens)
    if swap < recompute:
        return "swap", "prefill"
    bytes_only = CostModel(prefill_tokens_per_s=prefill_tokens_per_s, transfer_latency_s=0.0)
    moving = 2 * bytes_only.swap_s(num_tokens, block_size)  # whole blocks move, empty slots too
    return "recompute", "latency" if moving < recompute else "bandwidth"


def _decision_expected(num_tokens: int, block_size: int, rate: float,
                       ways: int = 2) -> tuple[str, str]:  # fmt: skip
    """The same decision read off CostModel's own swap_s and recompute_s, with the latency
    term taken out (transfer_latency_s = 0) to see whether it is what tips it; ``ways=1`` is
    the mistake of pricing the swap one way only."""
    model = CostModel(prefill_tokens_per_s=rate)
    if ways * model.swap_s(num_tokens, block_size) < model.recompute_s(num_tokens):
        return "swap", "prefill"
    return _recompute_because(num_tokens, block_size, rate)


def _recompute_because(num_tokens: int, block_size: int, rate: float) -> tuple[str, str]:
    """("recompute", why): "latency" if moving the bytes alone would be cheaper."""
    no_latency = CostModel(prefill_tokens_per_s=rate, transfer_latency_s=0.0)
    recompute = no_latency.recompute_s(num_tokens)
    cheaper_bytes = 2 * no_latency.swap_s(num_tokens, block_size) < recompute
    return "recompute", "latency" if cheaper_bytes else "bandwidth"


DECISIONS = [
    (1024, 256, 8000.0, "big blocks and a slow prefill: few large copies beat recomputing",
     ("always_recompute",)),
    (1024, 1, 8000.0, "blocks of 1, the same slow prefill: the bytes alone would be cheaper "
     "to move, but 80 transfers per token each way cost more",
     ("always_swap", "no_reason", "one_way")),
    (1024, 16, 10000.0, "the default constants: even moving the bytes costs more than "
     "recomputing", ("always_swap", "latency_always", "one_way")),
    (1024, 16, 8000.0, "blocks of 16 at 8,000 tokens/s: the transfers' latency tips it",
     ("always_swap", "one_way")),
    (4096, 64, 8000.0, "a longer sequence, blocks of 64"),
    (100, 128, 5000.0, "a short sequence in big blocks, a slower prefill"),
]  # fmt: skip


def _decision(rng: random.Random) -> tuple[int, int, float]:
    return (rng.choice([128, 512, 1024, 4096]), rng.choice([1, 4, 16, 64, 256]),
            rng.choice([4000.0, 8000.0, 10000.0, 20000.0]))  # fmt: skip


def _reason_always(reason: str) -> Callable[[int, int, float], tuple[str, str]]:
    """The right choice, but ``reason`` whenever it is recompute (a mistake's answer)."""

    def answer(n: int, b: int, r: float) -> tuple[str, str]:
        choice = _decision_expected(n, b, r)[0]
        return (choice, reason) if choice == "recompute" else ("swap", "prefill")

    return answer


EXERCISES_09_DECISION = [
    Function(swap_or_recompute, NB09,
        task="A system decision, with its reason. One preempted sequence of num_tokens tokens "
        "in blocks of block_size, a prefill of prefill_tokens_per_s; costs from "
        "CostModel(prefill_tokens_per_s=...) (swap_s one way, recompute_s). Return (the "
        'cheaper choice, "swap" or "recompute"; the reason: "prefill" if swap wins, '
        '"latency" if recompute wins only because of the per-transfer latency (moving the '
        'bytes alone would be cheaper), "bandwidth" if even the bytes cost more).',
        cases=lambda: cases(DECISIONS, _decision, 12, 904, expect=_decision_expected),
        setup="from pagedlab.attention.swap_cost import CostModel",
        mistakes=[
            Mistake("swap moves the blocks out and back in: count both ways.",
                    lambda n, b, r: _decision_expected(n, b, r, ways=1), "one_way"),
            Mistake("recompute is not always cheaper: with big blocks the copies are few and "
                    "large.", _recompute_because, "always_recompute"),
            Mistake("swap is not always cheaper: small blocks mean many transfers, each with its "
                    "latency.", lambda n, b, r: ("swap", "prefill"), "always_swap"),
            Mistake("the reason: would moving the bytes alone (no latency) beat recomputing?",
                    _reason_always("bandwidth"), "no_reason"),
            Mistake("the reason: here even the bytes alone cost more than recomputing "
                    "(bandwidth).", _reason_always("latency"), "latency_always"),
        ],
    ),
]  # fmt: skip
