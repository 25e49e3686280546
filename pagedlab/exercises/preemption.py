"""Exercises of notebook 09 (when memory runs out): the scheduler's preemption decisions.

Every expected answer comes from the real :class:`pagedlab.memory.scheduler.Scheduler` and its
preemption policy: the victim it picks (``running[-1]`` of a scheduler that admitted these
requests), the tokens :meth:`pagedlab.memory.scheduler.Scheduler._preempt` queues for
recompute, and :func:`pagedlab.memory.swap_space.swap_in_need` on a real host pool. The system
decision, priced by :class:`pagedlab.attention.swap_cost.CostModel` (torch), is in
:mod:`pagedlab.exercises.swap_choice`.
"""

from __future__ import annotations

from collections import Counter

from pagedlab.exercises.core import Case, Exercise, Mistake, seeded
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Group, Request, StepResult
from pagedlab.memory.scheduler import Scheduler
from pagedlab.memory.swap_space import swap_in_need

NB09 = "09_when_memory_runs_out"


# --- pick_victim ---------------------------------------------------------------------------------
def pick_victim(running: list[tuple[str, int]]) -> str:
    """The running request the scheduler preempts: the one that arrived last (FCFS, §4.5)."""
    return max(running, key=lambda pair: pair[1])[0]


def _victim_expected(arrivals: list[str]) -> str:
    """Admit requests named in arrival order into a roomy real scheduler; its victim."""
    scheduler = Scheduler(BlockAllocator(64, 4))
    for name in arrivals:
        scheduler.add(Request(name, 2, 4))
    while len(scheduler.running) < len(arrivals):
        scheduler.step()
    return scheduler.running[-1].name


def _victim_cases() -> list[Case]:
    specs: list[tuple[list[str], list[int], str, tuple[str, ...]]] = [
        (["A", "B", "C"], [0, 1, 2], "listed in arrival order: the last to arrive goes first",
         ("first",)),
        (["A", "B", "C"], [2, 0, 1], "listed out of order: go by arrival, not by position",
         ("last_listed", "first")),
        (["A", "B", "C", "D"], [3, 1, 0, 2], "four requests, the latest listed first",
         ("last_listed", "first")),
        (["X"], [0], "one running request: it is the victim", ()),
        (["P", "Q"], [1, 0], "two requests, the earlier listed last", ("last_listed", "first")),
        (["Z", "M", "A"], [1, 2, 0], "names do not follow arrival: Z arrived first, A last",
         ("last_listed", "first")),
    ]  # fmt: skip
    rng = seeded(901)
    for _ in range(12):
        count = rng.randint(2, 7)
        names = rng.sample("ABCDEFGHIJKLMNOPQRSTUVWXYZ", count)
        specs.append((names, rng.sample(range(count), count), "", ()))
    cases = []
    for names, shown, why, catches in specs:
        arrivals = [(names[i], i) for i in range(len(names))]
        running = [arrivals[i] for i in shown]
        cases.append(
            Case((running,), _victim_expected(names), kind="fixed" if why else "generated",
                 why=why, catches=catches)
        )  # fmt: skip
    return cases


# --- tokens_to_recompute -------------------------------------------------------------------------
def tokens_to_recompute(prompt_len: int, num_samples: int, generated: int) -> int:
    """Tokens the next prefill computes after a preemption by recompute (§4.5)."""
    return prompt_len + num_samples * generated


def _recompute_expected(prompt_len: int, num_samples: int, generated: int) -> int:
    """Run a real scheduler until each sample generated ``generated`` tokens, preempt."""
    pool = BlockAllocator(4 * num_samples * (prompt_len + generated + 2), 4)
    scheduler = Scheduler(pool, mode="recompute")
    group = scheduler.add(Request("r", prompt_len, generated + 3, num_samples))
    while group.status != "running" or group.prefilling or group.generated < generated:
        scheduler.step()
    scheduler._preempt(group, StepResult(scheduler.steps))  # the policy itself, as step() runs it
    return group.work


def _recompute_cases() -> list[Case]:
    specs = [
        (10, 1, 5, "one sample: its prompt and the 5 tokens it generated", ("no_prompt",)),
        (10, 2, 5, "two samples: each sample's generated tokens are recomputed",
         ("one_sample", "no_prompt", "prompt_each")),
        (10, 1, 0, "preempted right after its prefill: only the prompt", ()),
        (6, 3, 4, "three samples share one prompt: it is computed once", ("prompt_each",)),
        (1, 4, 7, "a one-token prompt, four samples", ("one_sample", "prompt_each")),
    ]  # fmt: skip
    rng = seeded(902)
    specs += [
        (rng.randint(1, 40), rng.randint(1, 4), rng.randint(0, 20), "", ()) for _ in range(12)
    ]
    return [
        Case((p, n, g), _recompute_expected(p, n, g), kind="fixed" if why else "generated",
             why=why, catches=catches)
        for p, n, g, why, catches in specs
    ]  # fmt: skip


# --- can_swap_in ---------------------------------------------------------------------------------
def can_swap_in(samples: list[tuple[list[int], int]], block_size: int, num_free: int) -> bool:
    """Whether a swapped group fits back: its distinct blocks plus room for each sample's next
    token (a full last block needs a new one; a last block other samples hold is copied)."""
    need = len({b for blocks, _ in samples for b in blocks})
    holders = Counter(blocks[-1] for blocks, _ in samples)
    for blocks, tokens in samples:
        if tokens % block_size == 0:
            need += 1
        elif holders[blocks[-1]] > 1:
            need += 1  # copy-on-write: every sample but the last to write copies it
            holders[blocks[-1]] -= 1
    return need <= num_free


def _swap_expected(samples: list[tuple[list[int], int]], block_size: int, num_free: int) -> bool:
    """swap_in_need of a real group whose host blocks a real host pool holds."""
    holders = Counter(b for blocks, _ in samples for b in blocks)
    size = max(holders) + 1
    used = sorted(holders)
    host = BlockAllocator(
        size, block_size, free_order=used + [b for b in range(size) if b not in holders]
    )
    for block in used:
        assert host.allocate() == block
        for _ in range(holders[block] - 1):
            host.share(block)
    group = Group(Request("swapped", 1, 1, len(samples)), 0)
    group.host = [list(blocks) for blocks, _ in samples]
    group.host_tokens = [tokens for _, tokens in samples]
    return swap_in_need(group, host) <= num_free


def _swap_cases() -> list[Case]:
    specs: list[tuple[list[tuple[list[int], int]], int, int, str, tuple[str, ...]]] = [
        ([([0, 1], 6)], 4, 2, "2 blocks whose last has room for the next token: 2 free are enough",
         ("next_always",)),
        ([([0, 1], 8)], 4, 2, "the last block is full: the next token needs a third block",
         ("no_next",)),
        ([([0, 1], 6), ([0, 2], 6)], 4, 3, "two samples share block 0: it comes back once",
         ("per_sample",)),
        ([([0, 1], 6), ([0, 1], 6)], 4, 2, "both samples end in one partly filled block: one "
         "must copy it for its next token", ("no_cow",)),
        ([([0, 1], 6), ([0, 1], 6)], 4, 3, "the same group with room for that copy", ()),
        ([([3], 1)], 1, 1, "blocks of 1: every block is full, so the next token needs a new one",
         ("no_next",)),
        ([([0, 1, 2], 9), ([0, 1, 3], 9), ([0, 1, 3], 9)], 3, 6,
         "blocks of 3 (not a power of two): three samples, two of them sharing their last block",
         ("per_sample",)),
    ]  # fmt: skip
    rng = seeded(903)
    for _ in range(16):
        size = rng.choice([1, 2, 3, 4])
        shared = rng.randint(0, 3)
        samples, next_block = [], shared
        for _s in range(rng.randint(1, 3)):
            own = rng.randint(1 if shared else 0, 2)  # a shared last block is never written
            blocks = list(range(shared)) + list(range(next_block, next_block + own))
            next_block += own
            if not blocks:
                blocks, next_block = [next_block], next_block + 1
            tokens = (len(blocks) - 1) * size + rng.randint(1, size)
            samples.append((blocks, tokens))
        need = len({b for blocks, _ in samples for b in blocks})
        specs.append((samples, size, need + rng.randint(-1, 2), "", ()))
    return [
        Case((samples, size, free), _swap_expected(samples, size, free),
             kind="fixed" if why else "generated", why=why, catches=catches)
        for samples, size, free, why, catches in specs
    ]  # fmt: skip


def _swap_need_without(samples: list[tuple[list[int], int]], b: int, cow: bool, nxt: bool,
                       per_sample: bool) -> int:  # fmt: skip
    need = (
        sum(len(blocks) for blocks, _ in samples)
        if per_sample
        else len({x for blocks, _ in samples for x in blocks})
    )
    holders = Counter(blocks[-1] for blocks, _ in samples)
    for blocks, tokens in samples:
        if not nxt:
            continue
        if tokens % b == 0:
            need += 1
        elif cow and holders[blocks[-1]] > 1:
            need += 1
            holders[blocks[-1]] -= 1
    return need


EXERCISES_09 = [
    Exercise(
        name="pick_victim",
        notebook=NB09,
        task="No block is free for a running request's next token. running lists the running "
        "requests as (name, arrival order) pairs, in no particular order. Which one does the "
        "scheduler preempt?",
        params=("running",),
        returns="str",
        cases=_victim_cases,
        solution=pick_victim,
        mistakes=[
            Mistake(
                "the list is in no particular order: go by arrival order, not by position.",
                lambda r: r[-1][0],
                "last_listed",
            ),
            Mistake(
                "FCFS serves the earliest first, so it preempts the latest, not the earliest.",
                lambda r: min(r, key=lambda pair: pair[1])[0],
                "first",
            ),
        ],
    ),
    Exercise(
        name="tokens_to_recompute",
        notebook=NB09,
        task="A request with a prompt of prompt_len tokens and num_samples parallel samples is "
        "preempted by recompute after each sample generated `generated` tokens. How many "
        "tokens does its next prefill compute?",
        params=("prompt_len", "num_samples", "generated"),
        returns="int",
        cases=_recompute_cases,
        solution=tokens_to_recompute,
        mistakes=[
            Mistake(
                "every sample's generated tokens were dropped, not one sample's.",
                lambda p, n, g: p + g,
                "one_sample",
            ),
            Mistake("the prompt's K/V was dropped too.", lambda p, n, g: n * g, "no_prompt"),
            Mistake(
                "the samples share one prompt: it is recomputed once, not once per sample.",
                lambda p, n, g: n * (p + g),
                "prompt_each",
            ),
        ],
    ),
    Exercise(
        name="can_swap_in",
        notebook=NB09,
        task="A swapped-out group holds, per sample, (its host blocks in logical order, its "
        "tokens); samples may share blocks. The device has num_free free blocks. Can it be "
        "swapped in now, with room for each sample's next token?",
        params=("samples", "block_size", "num_free"),
        returns="bool",
        cases=_swap_cases,
        solution=can_swap_in,
        mistakes=[
            Mistake(
                "a last block with room takes the next token without a new block.",
                lambda s, b, f: (
                    _swap_need_without(s, b, True, True, False)
                    + len(s)
                    - sum(1 for _bl, t in s if t % b == 0)
                    <= f
                ),
                "next_always",
            ),
            Mistake(
                "the next token of a full last block needs a new block: count it.",
                lambda s, b, f: _swap_need_without(s, b, True, False, False) <= f,
                "no_next",
            ),
            Mistake(
                "a block shared by samples comes back once.",
                lambda s, b, f: _swap_need_without(s, b, True, True, True) <= f,
                "per_sample",
            ),
            Mistake(
                "samples sharing a partly filled last block copy it (copy-on-write) to write.",
                lambda s, b, f: _swap_need_without(s, b, False, True, False) <= f,
                "no_cow",
            ),
        ],
    ),
]
