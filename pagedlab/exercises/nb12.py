"""Notebook 12's exercises: the KV-aware router's choice, and the bytes a disaggregated
request moves. Expected answers: :func:`pagedlab.frontier.fleet.routing.kv_pick` and
:func:`pagedlab.frontier.fleet.disagg.transfer_bytes` (the formula the notebook measures)."""

from __future__ import annotations

import random

from pagedlab.frontier.fleet.disagg import transfer_bytes
from pagedlab.frontier.fleet.events import to_int
from pagedlab.frontier.fleet.routing import kv_pick, leading_hits
from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function
from pagedlab.memory.prefix_cache import block_hashes

NB12 = "12_past_one_engine"


def kv_route(prompt: list[int], block_size: int, index: dict[str, set[int]],
             loads: dict[str, int], overlap_weight: float) -> str:  # fmt: skip
    """The engine a KV-aware router sends ``prompt`` to."""
    limit = (len(prompt) - 1) // block_size  # the last token is always computed

    def hits(name: str) -> int:
        count = 0
        for h in block_hashes(prompt[: limit * block_size], block_size):
            if int(h, 16) not in index[name]:
                break
            count += 1
        return count

    return max(loads, key=lambda name: overlap_weight * hits(name) - loads[name])


def _index(prompt: list[int], size: int, held: dict[str, list[int]]) -> dict[str, set[int]]:
    """Engine -> the int hashes of the listed blocks of ``prompt`` (by position)."""
    chain = [to_int(h) for h in block_hashes(prompt, size)]
    return {name: {chain[i] for i in blocks} for name, blocks in held.items()}


P = list(range(100, 140))  # 40 tokens: 10 blocks of 4, at most 9 can hit
P8 = list(range(7, 39))  # 32 tokens: block-aligned at 4 and 8

ROUTES = [
    (P, 4, _index(P, 4, {"A": [], "B": [0, 1, 2]}), {"A": 10, "B": 10}, 2.0,
     "B holds the first 3 blocks, equal loads: the overlap decides", ("ignore_overlap",)),
    (P, 4, _index(P, 4, {"A": [0, 1], "B": [0, 1, 2, 3]}), {"A": 0, "B": 30}, 2.0,
     "B's longer prefix is worth 8, its load costs 30: A", ("ignore_load",)),
    (P, 4, _index(P, 4, {"A": [0, 1, 2], "B": [0, 2, 3, 4, 5, 6]}), {"A": 4, "B": 4}, 1.0,
     "B misses block 1: its later blocks cannot hit", ("not_leading",)),
    (P8, 4, _index(P8, 4, {"A": list(range(8)), "B": list(range(7))}), {"A": 1, "B": 0}, 1.0,
     "a block-aligned prompt: its last block is recomputed, A's 8th block is worth nothing",
     ("last_token",)),
    (P, 8, _index(P, 8, {"A": [0], "B": [0], "C": [0, 1]}), {"A": 5, "B": 2, "C": 9}, 3.0,
     "three engines, blocks of 8"),
    (P, 4, _index(P, 4, {"A": [0], "B": [0]}), {"A": 2, "B": 2}, 1.0,
     "a tie: the first engine listed", ("last_wins",)),
]  # fmt: skip


def _route(rng: random.Random) -> tuple[object, ...]:
    size = rng.choice([2, 4, 8])
    prompt = [rng.randrange(1, 500) for _ in range(rng.randint(size + 1, 6 * size))]
    limit = (len(prompt) - 1) // size
    held = {n: list(range(rng.randint(0, limit))) for n in "ABC"}
    loads = {n: rng.randint(0, 12) for n in "ABC"}
    return prompt, size, _index(prompt, size, held), loads, rng.choice([0.5, 1.0, 2.0, 4.0])


def _wrong_route(prompt: list[int], size: int, index: dict[str, set[int]],
                 loads: dict[str, int], w: float, *, leading=True, limit=True,
                 load=True, overlap=True, last=False) -> str:  # fmt: skip
    """A router with one of the common slips (each keyword off)."""
    stop = (len(prompt) - (1 if limit else 0)) // size
    chain = [to_int(h) for h in block_hashes(prompt[: stop * size], size)]

    def hits(name: str) -> int:
        if not leading:
            return sum(h in index[name] for h in chain)
        return (
            leading_hits(prompt[: stop * size] + [0], size, index[name])
            if limit
            else next((i for i, h in enumerate(chain) if h not in index[name]), len(chain))
        )

    def score(name: str) -> float:
        return (w * hits(name) if overlap else 0) - (loads[name] if load else 0)

    names = list(loads)[::-1] if last else list(loads)
    return max(names, key=score)


def _bytes(rng: random.Random) -> tuple[int, ...]:
    return (rng.choice([2, 16, 30, 32]), rng.choice([1, 3, 8]), rng.choice([64, 128]),
            rng.choice([1, 2, 4]), rng.randint(1, 400), rng.choice([1, 4, 16, 32]))  # fmt: skip


BYTES = [
    (30, 3, 64, 2, 36, 16, "SmolLM2 in fp16, 36 tokens in blocks of 16: 3 whole blocks move",
     ("no_round", "no_kv", "no_layers")),
    (2, 2, 8, 4, 8, 4, "a block-aligned prompt: no rounding", ("no_kv",)),
    (32, 8, 128, 2, 100, 16, "Llama-3-8B's shape, 100 tokens", ("no_round", "no_kv")),
    (16, 1, 64, 1, 1, 32, "one token still moves a whole block"),
    (30, 3, 64, 4, 37, 1, "blocks of one token: nothing to round", ("no_layers",)),
]  # fmt: skip


EXERCISES_12 = [
    Function(kv_route, NB12,
        task="A KV-aware router's choice. index[name] is the set of int block hashes engine "
        "name published (BlockStored events; int(h, 16) of pagedlab's block_hashes), loads[name] "
        "the blocks its running requests hold. An engine's overlap is the number of leading "
        "full blocks of prompt in its index (the last token is always computed); return the "
        "name with the highest overlap_weight * overlap - load, the first in loads on a tie.",
        cases=lambda: cases(ROUTES, _route, 10, 1201, expect=kv_pick),
        setup="from pagedlab.memory.prefix_cache import block_hashes",
        mistakes=[
            Mistake("a prefix hit stops at the first block the engine lacks.",
                    lambda *a: _wrong_route(*a, leading=False), "not_leading"),
            Mistake("the last prompt token is always computed: at most (len - 1) // block_size "
                    "blocks can hit.", lambda *a: _wrong_route(*a, limit=False), "last_token"),
            Mistake("the score subtracts the engine's load.",
                    lambda *a: _wrong_route(*a, load=False), "ignore_load"),
            Mistake("the overlap counts: weighted, it is what the router saves.",
                    lambda *a: _wrong_route(*a, overlap=False), "ignore_overlap"),
            Mistake("on a tie, the first engine listed wins.",
                    lambda *a: _wrong_route(*a, last=True), "last_wins"),
        ],
    ),
    Function(transfer_bytes, NB12, name="disagg_bytes",
        task="Bytes engine A sends engine B for one disaggregated request: K and V of every "
        "layer, for the prompt's tokens in whole blocks of block_size (each kv head holds "
        "head_dim values of dtype_bytes per token).",
        cases=lambda: cases(BYTES, _bytes, 10, 1202, expect=transfer_bytes),
        mistakes=[
            Mistake("whole blocks move: round the tokens up to blocks.",
                    lambda n, h, d, b, t, s: n * 2 * h * d * b * t, "no_round"),
            Mistake("K and V both move.",
                    lambda n, h, d, b, t, s: n * h * d * b * -(-t // s) * s, "no_kv"),
            Mistake("every layer has its own K and V.",
                    lambda n, h, d, b, t, s: 2 * h * d * b * -(-t // s) * s, "no_layers"),
        ],
    ),
]  # fmt: skip
