"""Notebook 10 (a real model on pages): memory a real engine run holds, read off a real
:class:`pagedlab.engine.Engine` serving a seeded ``TinyLlama`` (``TINY``): its step records and
block tables after its first steps, never a formula (``orca_vs_paged_slots``: right after the
prefill; ``samples_share``: after the fork and the first decode, §4.4). Needs torch.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import torch

from pagedlab.attention import reference_attention
from pagedlab.engine import Engine
from pagedlab.grade.cases import Mistake, cases, per_salt
from pagedlab.grade.core import Function
from pagedlab.ground.checks import ceil_div
from pagedlab.model import TINY, TinyLlama

NB10 = "10_real_model"


@cache
def _model() -> TinyLlama:
    return TinyLlama(TINY, seed=0)


def _prompt(length: int, salt: int) -> list[int]:
    g = torch.Generator().manual_seed(1000 + 31 * salt + length)
    return torch.randint(0, int(TINY["vocab_size"]), (length,), generator=g).tolist()


def _engine(block_size: int, need_tokens: int) -> Engine:
    blocks = 4 * (need_tokens // block_size + 4)  # roomy: no preemption, one prefill step
    return Engine(
        _model(), blocks, block_size, prefix_caching=False, decode_attention=reference_attention
    )


# --- orca_vs_paged_slots ---------------------------------------------------------------------
def orca_vs_paged_slots(
    prompt_lens: list[int], max_new_tokens: int, block_size: int
) -> tuple[int, int]:
    """(slots an Orca (Oracle) reservation holds, slots the pages hold), right after prefill."""
    orca = sum(p + max_new_tokens for p in prompt_lens)
    paged = sum(ceil_div(p, block_size) * block_size for p in prompt_lens)
    return orca, paged


def _after_prefill(prompt_lens: tuple[int, ...], new: int, block_size: int) -> tuple[int, int]:
    """The real engine's first step: every prompt admitted and prefilled (roomy pool)."""
    engine = _engine(block_size, sum(prompt_lens) + new * len(prompt_lens))
    prompts = [_prompt(p, i) for i, p in enumerate(prompt_lens)]
    run = engine.start(prompts, new)
    record = engine.step(run)
    assert sorted(record.result.admitted) == sorted(run.names)
    assert all(not run.scheduler.groups[n].prefilling for n in run.names)
    return record.reserved_slots, record.running_blocks * block_size


ORCA_SPECS = [
    ([20, 25, 18, 17], 16, 8, "notebook 10's four prompts: 16 new tokens each, blocks of 8",
     ("prompt_only", "new_only", "tokens", "floor", "first_token")),
    ([7], 5, 4, "one prompt whose last block is partly filled",
     ("tokens", "floor", "first_token")),
    ([8, 16], 4, 8, "prompts that fill their blocks exactly: the first new token's K/V is not "
     "stored yet, so no block is opened for it", ("first_token",)),
    ([3, 3, 3], 10, 1, "blocks of 1: the pages hold exactly the prompt tokens", ("new_only",)),
    ([5, 12], 2, 16, "blocks of 16 longer than the prompts; two new tokens each",
     ("floor", "prompt_only")),
    ([10, 7], 4, 3, "blocks of 3 (not a power of two), each prompt's last block partly filled",
     ("floor", "tokens")),
]  # fmt: skip


def _orca_spec(rng: random.Random) -> tuple[Any, ...]:
    lens = [rng.randint(1, 30) for _ in range(rng.randint(1, 4))]
    # at least 2: with one new token a request ends in its prefill step (blocks freed)
    return lens, rng.randint(2, 20), rng.choice([1, 2, 3, 4, 5, 8, 16])


# --- samples_share ---------------------------------------------------------------------------
def samples_share(prompt_len: int, n: int, block_size: int) -> tuple[int, int]:
    """(distinct blocks n samples hold right after the fork, after their first decode)."""
    prompt_blocks = ceil_div(prompt_len, block_size)
    partial = prompt_len % block_size != 0
    return prompt_blocks, prompt_blocks + (n - 1 if partial else n)


def _forked(prompt_len: int, n: int, block_size: int) -> tuple[int, int]:
    """The real engine: step 1 prefills and forks, step 2 is every sample's first decode."""
    engine = _engine(block_size, n * (prompt_len + 3))
    run = engine.start([_prompt(prompt_len, n)], 3, n=n, temperature=1.0, seed=0)
    engine.step(run)
    group = run.scheduler.groups[run.names[0]]
    assert len(group.tables) == n and not group.prefilling and engine.stats.copies_on_write == 0
    after_fork = len(group.device_blocks())
    engine.step(run)
    assert group.generated == 1
    return after_fork, len(group.device_blocks())


SHARE_SPECS = [
    (11, 3, 4, "11 tokens in blocks of 4: the third block is partly filled and shared by 3",
     ("no_sharing", "all_copy", "floor")),
    (8, 2, 4, "a prompt that fills its blocks: nothing to copy, each sample opens a new block",
     ("aligned_copy",)),
    (5, 1, 8, "one sample: nothing is shared, nothing is copied", ("all_copy",)),
    (20, 4, 8, "notebook 10's prompt length, 4 samples, blocks of 8",
     ("no_sharing", "all_copy", "floor")),
    (6, 2, 1, "blocks of 1 are always full: no copy-on-write ever", ("aligned_copy",)),
    (3, 5, 16, "a short prompt in one big block, 5 samples", ("no_sharing", "all_copy")),
    (7, 2, 3, "blocks of 3 (not a power of two): the third block is partly filled and shared",
     ("no_sharing", "all_copy", "floor")),
]  # fmt: skip


def _share_spec(rng: random.Random) -> tuple[int, int, int]:
    return rng.randint(1, 40), rng.randint(1, 5), rng.choice([1, 2, 3, 4, 5, 8, 16])


EXERCISES_10 = [
    Function(orca_vs_paged_slots, NB10,
        task="Requests with prompts of prompt_lens tokens, max_new_tokens new tokens each, are "
        "all admitted and prefilled in the engine's first step (blocks of block_size). Right "
        "after it, how many slots does an Orca (Oracle) reservation hold, and how many slots "
        "do the pages hold? Return (orca_slots, paged_slots).",
        cases=per_salt(lambda: cases(ORCA_SPECS, _orca_spec, 6, 1010,
                                     expect=lambda ls, m, b: _after_prefill(tuple(ls), m, b))),
        mistakes=[
            Mistake("the reservation is for the request's whole length, prompt included.",
                    lambda ls, m, b: (len(ls) * m, orca_vs_paged_slots(ls, m, b)[1]),
                    "new_only"),
            Mistake("Orca (Oracle) reserves room for the new tokens too, from the start.",
                    lambda ls, m, b: (sum(ls), orca_vs_paged_slots(ls, m, b)[1]), "prompt_only"),
            Mistake("the pages hold whole blocks: count the slots of every block taken.",
                    lambda ls, m, b: (orca_vs_paged_slots(ls, m, b)[0], sum(ls)), "tokens"),
            Mistake("a block is taken as soon as one token needs it.", lambda ls, m, b: (
                orca_vs_paged_slots(ls, m, b)[0], sum(p // b * b for p in ls)), "floor"),
            Mistake("the first new token comes from the prefill's logits, but its K/V is written "
                    "by the next step, not this one.", lambda ls, m, b: (
                        orca_vs_paged_slots(ls, m, b)[0],
                        sum(ceil_div(p + 1, b) * b for p in ls)), "first_token"),
        ],
    ),
    Function(samples_share, NB10,
        task="One prompt of prompt_len tokens, n parallel samples (§4.4), blocks of block_size. "
        "How many distinct blocks does the request hold right after the prefill forks the n "
        "samples, and after every sample's first decode? Return (after_fork, after_decode).",
        cases=per_salt(lambda: cases(SHARE_SPECS, _share_spec, 6, 1011, expect=_forked)),
        mistakes=[
            Mistake("a fork copies no block: the samples share every prompt block.",
                    lambda p, n, b: (n * ceil_div(p, b),
                                     n * ceil_div(p, b) + (n - 1) * (p % b != 0)), "no_sharing"),
            Mistake("the last sample to write into the shared block finds it no longer shared: "
                    "it writes in place, without a copy.",
                    lambda p, n, b: (ceil_div(p, b), ceil_div(p, b) + n), "all_copy"),
            Mistake("a full shared block is never copied: a sample whose next token starts a new "
                    "block takes a new block.",
                    lambda p, n, b: (ceil_div(p, b), ceil_div(p, b) + n - 1), "aligned_copy"),
            Mistake("a block is taken as soon as one token needs it.",
                    lambda p, n, b: (p // b, p // b + n), "floor"),
        ],
    ),
]  # fmt: skip
