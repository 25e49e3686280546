"""Notebook 05 (sharing: fork, copy-on-write), and its capstone ``append_cow``, replayed on
pagedlab's BlockTable (:func:`~pagedlab.grade.drivers.cow_log`) beside the learner's
function. Answers: :func:`pagedlab.fork_samples`, ``parallel_savings``, real tables. No torch.
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function, Replay
from pagedlab.grade.drivers import ForkEvent, cow_log
from pagedlab.ground.checks import ceil_div
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.savings import parallel_savings
from pagedlab.memory.sharing import fork_samples

NB05 = "05_sharing"


# --- the solutions ---------------------------------------------------------------------------
def must_copy(num_tokens: int, block_size: int, holders: int) -> bool:
    """Does appending one token copy the last block first (copy-on-write)?"""
    return num_tokens % block_size != 0 and holders > 1


def refcounts_after_fork(prompt_len: int, block_size: int, n: int) -> list[int]:
    """Ref counts of the prompt's blocks after n samples each append one token."""
    full, partial = divmod(prompt_len, block_size)
    return [n] * full + ([1] if partial else [])


def blocks_held(prompt_len: int, output_len: int, n: int, block_size: int) -> int:
    """Blocks n parallel samples hold at the end, sharing the prompt's full blocks."""
    shared = prompt_len // block_size
    own = ceil_div(prompt_len + output_len, block_size) - shared
    return shared + n * own


def append_cow(allocator: BlockAllocator, blocks: list[int], num_tokens: int) -> list[int]:
    """The table's blocks after appending one token (its blocks may be shared by forks)."""
    blocks = list(blocks)
    if num_tokens % allocator.block_size == 0:  # full (or no) last block: a new block
        blocks.append(allocator.allocate())
    elif allocator.refcount(blocks[-1]) > 1:  # shared and partly filled: copy, then write
        copy = allocator.allocate()
        allocator.free(blocks[-1])  # drop this table's reference to the shared block
        blocks[-1] = copy
    return blocks


# --- the cases -------------------------------------------------------------------------------
COPIES = [
    (5, 4, 2, "5 tokens: the last block is partly filled and held by 2 tables, so it is copied",
     ("ref2",)),
    (4, 4, 2, "a full last block: the new token goes to a new block, nothing is copied",
     ("full_last",)),
    (5, 4, 1, "held by this table alone: the token is written in place", ("in_place",)),
    (13, 4, 2, "the shared partly filled block is the fourth, not the first"),
    (8, 4, 3, "full blocks held by 3 tables", ("full_last",)),
    (1, 4, 4, "one token in a block held by 4 tables", ("ref2",)),
    (7, 3, 3, "blocks of 3 (not a power of two), partly filled, shared"),
    (6, 3, 2, "blocks of 3 (not a power of two), full and shared: the new token takes a new "
     "block", ("full_last",)),
]  # fmt: skip
REFCOUNTS = [
    (7, 4, 2, "7 tokens: block 0 stays shared by both; the partly filled block is copied once",
     ("no_cow", "keeps_zero")),
    (8, 4, 2, "a full last block is never copied: each sample's token takes a new block",
     ("full_copied",)),
    (5, 4, 3, "3 samples: the first two writers copy the partly filled block", ("no_cow",)),
    (3, 4, 1, "one sample: nothing is shared, nothing is copied"),
    (4, 4, 4, "4 samples of a full block", ("full_copied",)),
    (1, 1, 3, "blocks of 1: every prompt block is full"),
    (10, 3, 2, "blocks of 3 (not a power of two)"),
]  # fmt: skip
HELD = [
    (7, 1, 2, 4, "a 7-token prompt, 2 samples of 1 token: the full block is held once, the "
     "partly filled one is copied", ("no_sharing", "partial_shared")),
    (8, 4, 2, 4, "a block-aligned prompt: both its blocks are shared", ("no_sharing",)),
    (5, 11, 3, 4, "3 samples writing well past the prompt", ("partial_shared",)),
    (16, 16, 4, 16, "the paper's blocks of 16"),
    (10, 6, 1, 4, "one sample: nothing to share"),
    (9, 5, 3, 3, "blocks of 3 (not a power of two)"),
]  # fmt: skip
FORKS: list[tuple[int, int, int, list[ForkEvent], str]] = [
    (8, 4, 7, [("fork", 0), ("append", 0)],
     "Fig. 8: a 7-token prompt forked; the first writer copies the shared partly filled block"),
    (8, 4, 7, [("fork", 0), ("append", 0), ("append", 1)],
     "then the other sample writes in place: it is the block's last holder"),
    (8, 4, 8, [("fork", 0), ("append", 0), ("append", 1)],
     "a full shared last block: each writer takes a new block, nothing is copied"),
    (8, 4, 5, [("append", 0), ("append", 0), ("append", 0), ("append", 0)],
     "no fork: appends fill the last block in place, then take a new one"),
    (10, 4, 6, [("fork", 0), ("fork", 0), ("append", 1), ("append", 2), ("append", 0)],
     "three holders: the first two writers copy, the last writes in place"),
    (9, 3, 4, [("fork", 0), ("append", 1), ("append", 1), ("append", 0)],
     "blocks of 3 (not a power of two)"),
]  # fmt: skip


def _prompt_table(pool: BlockAllocator, num_tokens: int) -> BlockTable:
    table = BlockTable(pool)
    table.append_tokens(num_tokens)
    return table


def _copied(n: int, size: int, holders: int) -> bool:
    table = _prompt_table(BlockAllocator(n // size + holders + 2, size), n)
    fork_samples(table, holders)
    return table.append_tokens(1) is not None


def _refcounts(prompt_len: int, size: int, n: int) -> list[int]:
    pool = BlockAllocator(prompt_len // size + 2 * n + 2, size)
    prompt = _prompt_table(pool, prompt_len)
    blocks = list(prompt.blocks)
    for sample in fork_samples(prompt, n):
        sample.append_tokens(1)
    return [pool.refcount(b) for b in blocks]


def _forks(rng: random.Random) -> tuple[Any, ...]:
    size, prompt = rng.choice([1, 2, 3, 4]), rng.randint(1, 10)
    events: list[ForkEvent] = []
    tables = 1
    for _e in range(rng.randint(2, 8)):
        if rng.random() < 0.3:
            events.append(("fork", rng.randrange(tables)))
            tables += 1
        else:
            events.append(("append", rng.randrange(tables)))
    return ceil_div(prompt, size) + 2 * len(events) + 2, size, prompt, events


def _forks_label(num_blocks: int, size: int, prompt: int, events: list[ForkEvent]) -> str:
    said = ", ".join(f"{kind} T{t}" for kind, t in events)
    return f"a pool of {num_blocks} blocks of {size}; T0 holds {prompt} tokens; then {said}"


EXERCISES_05 = [
    Function(must_copy, NB05,
        task="A sequence of num_tokens tokens; its last block is held by `holders` tables (its "
        "ref count). Does appending one token copy that block first (copy-on-write)?",
        cases=lambda: cases(COPIES, lambda rng: (
            rng.randint(1, 40), rng.choice([1, 2, 3, 4, 8]), rng.randint(1, 4)), 24, 501,
            expect=_copied),
        mistakes=[
            Mistake("a full last block is never written again: the new token gets a new block.",
                    lambda n, b, h: h > 1, "full_last"),
            Mistake("a block held only by this table is written in place: no copy.",
                    lambda n, b, h: n % b != 0, "in_place"),
            Mistake("a ref count of 2 already means shared.",
                    lambda n, b, h: n % b != 0 and h > 2, "ref2"),
        ],
    ),
    Function(refcounts_after_fork, NB05,
        task="fork_samples(prompt, n) on a prompt of prompt_len tokens, then each sample appends "
        "one token, sample 0 first. The ref counts of the prompt's blocks, in logical order?",
        cases=lambda: cases(REFCOUNTS, lambda rng: (
            rng.randint(1, 40), rng.choice([2, 3, 4, 8]), rng.randint(1, 5)), 20, 502,
            expect=_refcounts),
        mistakes=[
            Mistake("forgot the copy-on-write of the partly filled last block.",
                    lambda p, b, n: [n] * ceil_div(p, b), "no_cow"),
            Mistake("the last sample to write keeps the original last block (ref count 1).",
                    lambda p, b, n: [n] * (p // b) + ([0] if p % b else []), "keeps_zero"),
            Mistake("a full last block is not copied: each sample takes a new block instead.",
                    lambda p, b, n: [n] * (ceil_div(p, b) - 1) + [1], "full_copied"),
        ],
    ),
    Function(blocks_held, NB05,
        task="n parallel samples of a prompt of prompt_len tokens each generate output_len "
        "tokens. How many blocks do they hold at the end, sharing what can be shared?",
        cases=lambda: cases(HELD, lambda rng: (
            rng.randint(1, 60), rng.randint(1, 60), rng.randint(1, 6),
            rng.choice([2, 3, 4, 8, 16])), 20, 503,
            expect=lambda p, o, n, b: parallel_savings(p, o, n, b).blocks_with),
        mistakes=[
            Mistake("that is without sharing: the prompt's full blocks are held once.",
                    lambda p, o, n, b: n * ceil_div(p + o, b), "no_sharing"),
            Mistake("the prompt's partly filled block is copied by the samples' writes.",
                    lambda p, o, n, b: ceil_div(p, b) + n * (ceil_div(p + o, b) - ceil_div(p, b)),
                    "partial_shared"),
        ],
    ),
    Replay(append_cow, NB05,
        task="Build copy-on-write: append one token to a table holding `blocks` and "
        "num_tokens tokens, whose blocks other tables (forks) may share; return its new block "
        "list. Use the real allocator: allocator.block_size, allocator.refcount(b), "
        "allocator.allocate() (a new block), allocator.free(b) (drop one reference). check "
        "replays seeded forks and appends on your function and on pagedlab's BlockTable.",
        returns="list[int]",
        cases=lambda: cases(FORKS, _forks, 12, 1005, expect=lambda *args: cow_log(None, *args),
                            label=_forks_label),
        driver="cow",
        parts=("tables' blocks", "free list", "ref counts"),
        steps=lambda n, b, p, events: [f"event {k} ({kind} T{t})"
                                       for k, (kind, t) in enumerate(events, start=1)],
    ),
]  # fmt: skip
