"""Notebook 09 (when memory runs out): the scheduler's preemption decisions, and the capstone
``scheduler_step``. The system decision ``swap_or_recompute`` needs torch: :mod:`.nb09_cost`.

Every expected answer comes from the real :class:`pagedlab.memory.scheduler.Scheduler`: the
victim it picks (``running[-1]`` of a scheduler that admitted these requests), the tokens its
preemption queues for recompute, and :func:`pagedlab.memory.swap_space.swap_in_need` on a
real host pool.

The capstone: the learner writes ``my_scheduler_step(state)``, one step of an FCFS scheduler
with whole prefills and no token budget (the paper's §4.5 policy, which ``Scheduler(pool,
mode=...)`` runs), preempting by recompute or (``state.mode == "swap"``) by swapping to a
host pool as large as the device's. :class:`~pagedlab.exercises.drivers.StepState` gives the
mechanics (real block tables and swap-space calls, in the order the Scheduler makes them);
the learner owns the policy. Each case is a seeded list of requests on a small pool, stepped
to the end by pagedlab's Scheduler and as many times by the learner's step
(:func:`~pagedlab.exercises.drivers.replay_steps`), compared after every step
(:data:`~pagedlab.exercises.drivers.PARTS`). Torch-free: the live site grades these.
"""

from __future__ import annotations

import random
from bisect import insort
from collections import Counter
from itertools import cycle
from typing import Any

from pagedlab.exercises.core import Function, Mistake, Replay, cases
from pagedlab.exercises.drivers import PARTS, Spec, StepState, replay_steps
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.capacity import prefill_need
from pagedlab.memory.requests import Group, Request, StepResult
from pagedlab.memory.scheduler import Scheduler
from pagedlab.memory.swap_space import swap_in_need

NB09 = "09_when_memory_runs_out"


# --- the solutions ---------------------------------------------------------------------------
def pick_victim(running: list[tuple[str, int]]) -> str:
    """The running request the scheduler preempts: the one that arrived last (FCFS, §4.5)."""
    return max(running, key=lambda pair: pair[1])[0]


def tokens_to_recompute(prompt_len: int, num_samples: int, generated: int) -> int:
    """Tokens the next prefill computes after a preemption by recompute (§4.5)."""
    return prompt_len + num_samples * generated


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


def by_arrival(group: Group) -> int:
    """The key every queue is kept in: arrival order (FCFS)."""
    return group.order


def scheduler_step(state: StepState) -> None:
    """One step: a prefill step if nothing is swapped out and the head of waiting fits; else
    decode oldest first, preempting the newest, then swap back in if nothing was preempted."""
    while not state.swapped and state.waiting and state.prefill_fits(state.waiting[0]):
        group = state.waiting.pop(0)  # FCFS: the head, or nobody
        state.prefill(group)
        insort(state.running, group, key=by_arrival)
    if state.did["admitted"]:
        return  # a prefill step: the running groups wait
    i, finishing = 0, []
    while i < len(state.running):
        group = state.running[i]
        while not state.decode_fits(group):
            victim = state.running.pop()  # the most recent arrival
            if state.mode == "swap" and state.swap_out_fits(victim):
                state.swap_out(victim)
                insort(state.swapped, victim, key=by_arrival)
            else:
                state.drop(victim)
                insort(state.waiting, victim, key=by_arrival)  # ahead of all that never ran
            if victim is group:
                break
        if group not in state.running:
            break  # it preempted itself: the step stops
        state.decode(group)
        if group.generated == group.request.output_len:
            finishing.append(state.running.pop(i))
        else:
            i += 1
    while not state.did["preempted"] and state.swapped and state.swap_in_fits(state.swapped[0]):
        group = state.swapped.pop(0)  # the oldest comes back first
        state.swap_in(group)
        insort(state.running, group, key=by_arrival)
    for group in finishing:  # its last token is computed into its blocks: freed after the step
        state.release(group)
        state.finished.append(group)


STEP_STUB = '''def my_scheduler_step(state):
    """One step of an FCFS scheduler with whole prefills (the paper's policy, §4.5).

    Queues, lists of groups that are yours to change: state.waiting, state.running,
    state.swapped, state.finished, each kept in arrival order (group.order), except that a
    finished group joins the end of state.finished. A group has group.name, group.order,
    group.generated (tokens each sample generated) and group.request.output_len.
    Mechanics (each one checks what it needs and raises ValueError otherwise):
      state.prefill_fits(g) / state.prefill(g): a whole (re)prefill of a waiting group;
      state.decode_fits(g) / state.decode(g): one token for every sample of a running group;
      state.drop(g): preempt by recompute (frees its blocks);
      state.swap_out_fits(g) / state.swap_out(g): preempt by swapping its blocks to the host;
      state.swap_in_fits(g) / state.swap_in(g): bring a swapped group's blocks back;
      state.release(g): free a finished group's blocks.

    The policy (§4.5): first come, first served. A step that admits runs prefills only (the
    running groups wait). Otherwise the running groups decode, and when a token does not
    fit, groups are preempted until it does: in state.mode "swap" by swapping if the host
    pool has room, else by recompute. A group that generated output_len tokens is finished:
    its blocks are freed last, at the end of the step (the step's forward writes into them).
    A swapped-out group has the first claim on freed blocks: while one is swapped out,
    nothing is admitted, and swapped groups come back at the end of a step that preempted
    nobody.
    """
    raise NotImplementedError("write my_scheduler_step")
'''


# --- the cases: pick_victim, tokens_to_recompute, can_swap_in ---------------------------------
VICTIMS = [
    (["A", "B", "C"], [0, 1, 2], "listed in arrival order: the last to arrive goes first",
     ("first",)),
    (["A", "B", "C"], [2, 0, 1], "listed out of order: go by arrival, not by position",
     ("last_listed", "first")),
    (["A", "B", "C", "D"], [3, 1, 0, 2], "four requests, the latest listed first",
     ("last_listed", "first")),
    (["X"], [0], "one running request: it is the victim"),
    (["P", "Q"], [1, 0], "two requests, the earlier listed last", ("last_listed", "first")),
    (["Z", "M", "A"], [1, 2, 0], "names do not follow arrival: Z arrived first, A last",
     ("last_listed", "first")),
]  # fmt: skip
RECOMPUTES = [
    (10, 1, 5, "one sample: its prompt and the 5 tokens it generated", ("no_prompt",)),
    (10, 2, 5, "two samples: each sample's generated tokens are recomputed",
     ("one_sample", "no_prompt", "prompt_each")),
    (10, 1, 0, "preempted right after its prefill: only the prompt"),
    (6, 3, 4, "three samples share one prompt: it is computed once", ("prompt_each",)),
    (1, 4, 7, "a one-token prompt, four samples", ("one_sample", "prompt_each")),
]  # fmt: skip
SWAPS = [
    ([([0, 1], 6)], 4, 2, "2 blocks whose last has room for the next token: 2 free are enough",
     ("next_always",)),
    ([([0, 1], 8)], 4, 2, "the last block is full: the next token needs a third block",
     ("no_next",)),
    ([([0, 1], 6), ([0, 2], 6)], 4, 3, "two samples share block 0: it comes back once",
     ("per_sample",)),
    ([([0, 1], 6), ([0, 1], 6)], 4, 2, "both samples end in one partly filled block: one "
     "must copy it for its next token", ("no_cow",)),
    ([([0, 1], 6), ([0, 1], 6)], 4, 3, "the same group with room for that copy"),
    ([([3], 1)], 1, 1, "blocks of 1: every block is full, so the next token needs a new one",
     ("no_next",)),
    ([([0, 1, 2], 9), ([0, 1, 3], 9), ([0, 1, 3], 9)], 3, 6,
     "blocks of 3 (not a power of two): three samples, two of them sharing their last block",
     ("per_sample",)),
]  # fmt: skip


def _victim(names: list[str], shown: list[int]) -> str:
    """Admit requests named in arrival order into a roomy real scheduler; its victim."""
    scheduler = Scheduler(BlockAllocator(64, 4))
    for name in names:
        scheduler.add(Request(name, 2, 4))
    while len(scheduler.running) < len(names):
        scheduler.step()
    return scheduler.running[-1].name


def _victims(rng: random.Random) -> tuple[Any, ...]:
    count = rng.randint(2, 7)
    return rng.sample("ABCDEFGHIJKLMNOPQRSTUVWXYZ", count), rng.sample(range(count), count)


def _recomputed(prompt_len: int, num_samples: int, generated: int) -> int:
    """Run a real scheduler until each sample generated ``generated`` tokens, preempt."""
    pool = BlockAllocator(4 * num_samples * (prompt_len + generated + 2), 4)
    scheduler = Scheduler(pool, mode="recompute")
    group = scheduler.add(Request("r", prompt_len, generated + 3, num_samples))
    while group.status != "running" or group.prefilling or group.generated < generated:
        scheduler.step()
    scheduler._preempt(group, StepResult(scheduler.steps))  # the policy itself, as step() runs it
    return group.work


def _swappable(samples: list[tuple[list[int], int]], block_size: int, num_free: int) -> bool:
    """swap_in_need of a real group whose host blocks a real host pool holds."""
    holders = Counter(b for blocks, _ in samples for b in blocks)
    size, used = max(holders) + 1, sorted(holders)
    host = BlockAllocator(size, block_size, free_order=used + [
        b for b in range(size) if b not in holders])  # fmt: skip
    for block in used:
        assert host.allocate() == block
        for _ in range(holders[block] - 1):
            host.share(block)
    group = Group(Request("swapped", 1, 1, len(samples)), 0)
    group.host = [list(blocks) for blocks, _ in samples]
    group.host_tokens = [tokens for _, tokens in samples]
    return swap_in_need(group, host) <= num_free


def _swapped_group(rng: random.Random) -> tuple[Any, ...]:
    size, shared = rng.choice([1, 2, 3, 4]), rng.randint(0, 3)
    samples, next_block = [], shared
    for _s in range(rng.randint(1, 3)):
        own = rng.randint(1 if shared else 0, 2)  # a shared last block is never written
        blocks = list(range(shared)) + list(range(next_block, next_block + own))
        next_block += own
        if not blocks:
            blocks, next_block = [next_block], next_block + 1
        samples.append((blocks, (len(blocks) - 1) * size + rng.randint(1, size)))
    need = len({b for blocks, _ in samples for b in blocks})
    return samples, size, need + rng.randint(-1, 2)


def _need(samples: list[tuple[list[int], int]], b: int, cow: bool = True, nxt: bool = True,
          per_sample: bool = False, always: bool = False) -> int:  # fmt: skip
    """The blocks a swap-in needs, counted with one mistake (a switch) or none."""
    need = len({x for blocks, _ in samples for x in blocks})
    need = sum(len(blocks) for blocks, _ in samples) if per_sample else need
    holders = Counter(blocks[-1] for blocks, _ in samples)
    for blocks, tokens in samples:
        need += int(always and tokens % b != 0)  # a new block even where the last has room
        if nxt and tokens % b == 0:
            need += 1
        elif nxt and cow and holders[blocks[-1]] > 1:
            need += 1
            holders[blocks[-1]] -= 1
    return need


# --- the cases: scheduler_step -----------------------------------------------------------------
STEPS: list[tuple[Any, ...]] = [  # recompute mode
    (4, 4, [("A", 6, 2, 1), ("B", 6, 2, 1), ("C", 6, 2, 1)], "recompute",
     "A and B finish at step 3 and their blocks are freed; C is admitted into them at step "
     "4, not in the decode step 3"),
    (12, 4, [("A", 6, 6, 2), ("B", 6, 6, 2)], "recompute",
     "two samples share the prompt: their first decode copies the shared last block"),
    (11, 2, [("A", 12, 5, 1), ("B", 11, 1, 1), ("C", 5, 3, 1)], "recompute",
     "admission is FCFS: B does not fit beside A, so C, which would, waits behind it"),
    (7, 2, [("A", 5, 1, 1), ("B", 6, 4, 1), ("C", 3, 2, 1)], "recompute",
     "C is admitted at step 3 while B runs: a step that admits runs prefills only, B does "
     "not decode in it", ("decode_in_prefill_step", "oldest")),
    (7, 4, [("A", 10, 4, 1), ("B", 7, 4, 1), ("C", 4, 4, 1), ("D", 5, 4, 1)], "recompute",
     "D never ran; C is preempted at step 3: it goes to the front of waiting, ahead of D",
     ("back",)),
    (6, 4, [("A", 6, 8, 1), ("B", 6, 8, 1), ("C", 6, 8, 1)], "recompute",
     "three requests fill the pool, and the pool fills again as they grow: the newest running "
     "group is preempted, not the oldest", ("oldest",)),
    (5, 2, [("A", 3, 4, 1), ("B", 3, 4, 1)], "recompute",
     "the group that needs a block is the newest itself: it is preempted and the step stops"),
    (8, 3, [("A", 4, 5, 1), ("B", 4, 5, 1), ("C", 4, 5, 1)], "recompute",
     "blocks of 3 (not a power of two), preemptions again and again"),
    (6, 4, [("A", 6, 8, 1), ("B", 6, 8, 1), ("C", 6, 8, 1), ("D", 2, 2, 1)], "swap",
     "swap mode: C is swapped out at step 4; while it is, D is not admitted, though it would "
     "fit", ("admit_while_swapped",)),
    (8, 2, [("A", 5, 6, 1), ("B", 5, 6, 1), ("C", 5, 6, 1), ("D", 2, 2, 1)], "swap",
     "swap mode: A finishes at step 7; its blocks are freed after that step, and swapped-out "
     "B comes back at step 8, before C and D are admitted", ("admit_while_swapped",)),
    (14, 2, [("A", 1, 8, 2), ("B", 10, 6, 1), ("C", 3, 1, 1), ("D", 5, 2, 2),
             ("E", 5, 1, 1)], "swap",
     "swap mode: at step 7 the host pool cannot take B's blocks: B is recomputed instead, and "
     "later readmitted in arrival order among the running"),
]  # fmt: skip


def _generated_specs(rng: random.Random) -> tuple[int, int, list[Spec]]:
    size = rng.choice([1, 2, 3, 4])
    specs = [
        (chr(65 + i), rng.randint(1, 10), rng.randint(1, 8), rng.choice([1, 1, 1, 2]))
        for i in range(rng.randint(2, 5))
    ]
    biggest = max(prefill_need(p, o, n, size) for _, p, o, n in specs)
    return biggest + rng.randint(0, 4), size, specs


def _step_cases() -> list[Any]:
    modes = cycle(("recompute", "swap"))
    return cases(
        STEPS,
        lambda rng: (*_generated_specs(rng), next(modes)),
        16,
        909,
        expect=lambda *args: replay_steps(None, *args),
        label=_step_label,
    )


def _step_label(num_blocks: int, size: int, specs: list[Spec], mode: str) -> str:
    said = ", ".join(
        f"{n}: prompt {p}, output {o}" + (f", {k} samples" if k > 1 else "") for n, p, o, k in specs
    )
    return (
        f"mode={mode!r}, a pool of {num_blocks} blocks of {size} (and a host pool as large); "
        f"requests in arrival order: {said}"
    )


def _variant(oldest: bool = False, back: bool = False, prefill_only: bool = True,
             admit_while_swapped: bool = False) -> Any:  # fmt: skip
    """A wrong step a learner writes first (the Mistakes' answers): the reference's, with
    one switch turned."""

    def step(state: StepState) -> None:
        while (admit_while_swapped or not state.swapped) and state.waiting and (
                state.prefill_fits(state.waiting[0])):  # fmt: skip
            group = state.waiting.pop(0)
            state.prefill(group)
            insort(state.running, group, key=by_arrival)
        if state.did["admitted"] and prefill_only:
            return
        i, finishing = 0, []
        while i < len(state.running):
            group = state.running[i]
            if group.name in state.did["admitted"]:
                i += 1
                continue
            while not state.decode_fits(group):
                victim = state.running.pop(0 if oldest else -1)
                if state.mode == "swap" and state.swap_out_fits(victim):
                    state.swap_out(victim)
                    insort(state.swapped, victim, key=by_arrival)
                else:
                    state.drop(victim)
                    state.waiting.insert(len(state.waiting) if back else 0, victim)
                if victim is group:
                    break
                i -= int(oldest)
            if group not in state.running:
                break
            state.decode(group)
            if group.generated == group.request.output_len:
                finishing.append(state.running.pop(i))
            else:
                i += 1
        while not state.did["preempted"] and state.swapped and (
                state.swap_in_fits(state.swapped[0])):  # fmt: skip
            group = state.swapped.pop(0)
            state.swap_in(group)
            insort(state.running, group, key=by_arrival)
        for group in finishing:
            state.release(group)
            state.finished.append(group)

    return lambda n, b, specs, mode: replay_steps(step, n, b, specs, mode)


EXERCISES_09 = [
    Function(
        name="pick_victim",
        notebook=NB09,
        task="No block is free for a running request's next token. running lists the running "
        "requests as (name, arrival order) pairs, in no particular order. Which one does the "
        "scheduler preempt?",
        params=("running",),
        returns="str",
        cases=lambda: cases(VICTIMS, _victims, 12, 901, expect=_victim,
                            given=lambda names, shown: ([(names[i], i) for i in shown],)),
        solution=pick_victim,
        mistakes=[
            Mistake("the list is in no particular order: go by arrival order, not by position.",
                    lambda r: r[-1][0], "last_listed"),
            Mistake("FCFS serves the earliest first, so it preempts the latest, not the "
                    "earliest.", lambda r: min(r, key=lambda pair: pair[1])[0], "first"),
        ],
    ),
    Function(
        name="tokens_to_recompute",
        notebook=NB09,
        task="A request with a prompt of prompt_len tokens and num_samples parallel samples is "
        "preempted by recompute after each sample generated `generated` tokens. How many "
        "tokens does its next prefill compute?",
        params=("prompt_len", "num_samples", "generated"),
        returns="int",
        cases=lambda: cases(RECOMPUTES, lambda rng: (
            rng.randint(1, 40), rng.randint(1, 4), rng.randint(0, 20)), 12, 902,
            expect=_recomputed),
        solution=tokens_to_recompute,
        mistakes=[
            Mistake("every sample's generated tokens were dropped, not one sample's.",
                    lambda p, n, g: p + g, "one_sample"),
            Mistake("the prompt's K/V was dropped too.", lambda p, n, g: n * g, "no_prompt"),
            Mistake("the samples share one prompt: it is recomputed once, not once per sample.",
                    lambda p, n, g: n * (p + g), "prompt_each"),
        ],
    ),
    Function(
        name="can_swap_in",
        notebook=NB09,
        task="A swapped-out group holds, per sample, (its host blocks in logical order, its "
        "tokens); samples may share blocks. The device has num_free free blocks. Can it be "
        "swapped in now, with room for each sample's next token?",
        params=("samples", "block_size", "num_free"),
        returns="bool",
        cases=lambda: cases(SWAPS, _swapped_group, 16, 903, expect=_swappable),
        solution=can_swap_in,
        mistakes=[
            Mistake("a last block with room takes the next token without a new block.",
                    lambda s, b, f: _need(s, b, always=True) <= f, "next_always"),
            Mistake("the next token of a full last block needs a new block: count it.",
                    lambda s, b, f: _need(s, b, nxt=False) <= f, "no_next"),
            Mistake("a block shared by samples comes back once.",
                    lambda s, b, f: _need(s, b, per_sample=True) <= f, "per_sample"),
            Mistake("samples sharing a partly filled last block copy it (copy-on-write) to "
                    "write.", lambda s, b, f: _need(s, b, cow=False) <= f, "no_cow"),
        ],
    ),
    Replay(
        name="scheduler_step",
        notebook=NB09,
        task="Build the scheduler's step (about 35 lines): one iteration of an FCFS scheduler "
        "with whole prefills that preempts by recompute, or (state.mode == 'swap') by swapping "
        "to a host pool, over the state object the stub describes. check runs seeded request "
        "traces in both modes through your step and through pagedlab's Scheduler and compares "
        "after every step: who was admitted, decoded, preempted, swapped out or in and "
        "finished, the queues in order, the running groups' blocks and both free lists.",
        params=("num_blocks", "block_size", "requests", "mode"),
        returns="replay log",
        cases=_step_cases,
        solution=scheduler_step,
        mistakes=[
            Mistake("FCFS serves the oldest first, so the victim is the most recent arrival.",
                    _variant(oldest=True), "oldest"),
            Mistake("a preempted group arrived before everything still waiting: FCFS serves it "
                    "first.", _variant(back=True), "back"),
            Mistake("without chunked prefill a step that admits runs its prefills only.",
                    _variant(prefill_only=False), "decode_in_prefill_step"),
            Mistake("while a group is swapped out it has the first claim on freed blocks: "
                    "nothing new is admitted.", _variant(admit_while_swapped=True),
                    "admit_while_swapped"),
        ],
        compare=lambda e, g: isinstance(g, list) and g == e,
        driver="steps",
        parts=PARTS,
        todo="Write my_scheduler_step",
        stub_code=STEP_STUB,
        budget_s=5.0,
    ),
]  # fmt: skip
