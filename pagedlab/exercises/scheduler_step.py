"""Notebook 09's capstone: the scheduler's ``step()``, the policy of one iteration (§4.5).

The learner writes ``my_scheduler_step(state)``: one step of an FCFS scheduler with whole
prefills and no token budget (the paper's §4.5 policy, which pagedlab's ``Scheduler(pool,
mode=...)`` runs: the latest arrival is preempted first; vLLM V0 and V1 take the last of
``running`` instead), preempting by recompute or (``state.mode == "swap"``) by swapping to a host
pool as large as the device's, recompute when the host pool is full. :class:`StepState`
gives the mechanics (prefill, decode, drop, swap out and in, free: real
:class:`~pagedlab.BlockTable` and :mod:`~pagedlab.memory.swap_space` calls on real
:class:`~pagedlab.BlockAllocator` pools, in the order the Scheduler makes them); the learner
owns the policy: whether this is a prefill step, which groups decode and in which order, the
victim, swap or recompute, where it is queued, when the step stops, when swapped groups come
back, and what happens to a finished group.

Grading (:func:`replay_steps`): each case is a seeded list of requests on a small pool, in
one mode. The same requests are added to pagedlab's
:class:`~pagedlab.memory.scheduler.Scheduler` and stepped to the end; the learner's step is
run as many times on a :class:`StepState` over pools of the same size. After every step both
are compared (:data:`PARTS`): which groups were admitted, decoded, preempted, swapped out or
in and finished, the four queues in order, every running group's blocks and both pools' free
lists (their order too). The first step where they differ is named.
Torch-free: the live site grades it in the browser.
"""

from __future__ import annotations

import random
from bisect import insort
from collections.abc import Callable
from typing import Any

from pagedlab.exercises.core import Case, Exercise, Mistake, seeded
from pagedlab.exercises.drivers import PARTS, Spec, StepState, adapt_step, replay_steps
from pagedlab.memory.capacity import prefill_need
from pagedlab.memory.requests import Group

NB09 = "09_when_memory_runs_out"


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

FIXED: list[tuple[int, int, list[Spec], str, tuple[str, ...]]] = [  # recompute mode
    (4, 4, [("A", 6, 2, 1), ("B", 6, 2, 1), ("C", 6, 2, 1)],
     "A and B finish at step 3 and their blocks are freed; C is admitted into them at step "
     "4, not in the decode step 3", ()),
    (12, 4, [("A", 6, 6, 2), ("B", 6, 6, 2)],
     "two samples share the prompt: their first decode copies the shared last block", ()),
    (11, 2, [("A", 12, 5, 1), ("B", 11, 1, 1), ("C", 5, 3, 1)],
     "admission is FCFS: B does not fit beside A, so C, which would, waits behind it", ()),
    (7, 2, [("A", 5, 1, 1), ("B", 6, 4, 1), ("C", 3, 2, 1)],
     "C is admitted at step 3 while B runs: a step that admits runs prefills only, B does "
     "not decode in it", ("decode_in_prefill_step", "oldest")),
    (7, 4, [("A", 10, 4, 1), ("B", 7, 4, 1), ("C", 4, 4, 1), ("D", 5, 4, 1)],
     "D never ran; C is preempted at step 3: it goes to the front of waiting, ahead of D",
     ("back",)),
    (6, 4, [("A", 6, 8, 1), ("B", 6, 8, 1), ("C", 6, 8, 1)],
     "three requests fill the pool, and the pool fills again as they grow: the newest running "
     "group is preempted, not the oldest", ("oldest",)),
    (5, 2, [("A", 3, 4, 1), ("B", 3, 4, 1)],
     "the group that needs a block is the newest itself: it is preempted and the step stops",
     ()),
    (8, 3, [("A", 4, 5, 1), ("B", 4, 5, 1), ("C", 4, 5, 1)],
     "blocks of 3 (not a power of two), preemptions again and again", ()),
]  # fmt: skip

FIXED_SWAP: list[tuple[int, int, list[Spec], str, tuple[str, ...]]] = [
    (6, 4, [("A", 6, 8, 1), ("B", 6, 8, 1), ("C", 6, 8, 1), ("D", 2, 2, 1)],
     "swap mode: C is swapped out at step 4; while it is, D is not admitted, though it would "
     "fit", ("admit_while_swapped",)),
    (8, 2, [("A", 5, 6, 1), ("B", 5, 6, 1), ("C", 5, 6, 1), ("D", 2, 2, 1)],
     "swap mode: A finishes at step 7; its blocks are freed after that step, and swapped-out "
     "B comes back at step 8, before C and D are admitted", ("admit_while_swapped",)),
    (14, 2, [("A", 1, 8, 2), ("B", 10, 6, 1), ("C", 3, 1, 1), ("D", 5, 2, 2),
             ("E", 5, 1, 1)],
     "swap mode: at step 7 the host pool cannot take B's blocks: B is recomputed instead, and "
     "later readmitted in arrival order among the running", ()),
]  # fmt: skip


def _generated_specs(rng: random.Random) -> tuple[int, int, list[Spec]]:
    size = rng.choice([1, 2, 3, 4])
    specs = [
        (chr(65 + i), rng.randint(1, 10), rng.randint(1, 8), rng.choice([1, 1, 1, 2]))
        for i in range(rng.randint(2, 5))
    ]
    biggest = max(prefill_need(p, o, n, size) for _, p, o, n in specs)
    return biggest + rng.randint(0, 4), size, specs


def _step_cases() -> list[Case]:
    cases = []
    fixed = [(*spec[:3], "recompute", *spec[3:]) for spec in FIXED]
    fixed += [(*spec[:3], "swap", *spec[3:]) for spec in FIXED_SWAP]
    for num_blocks, size, specs, mode, why, catches in fixed:
        args = (num_blocks, size, specs, mode)
        expected = replay_steps(None, *args)
        cases.append(Case(args, expected, _step_label(args), "fixed", why, catches))
    rng = seeded(909)
    for k in range(16):
        args = (*_generated_specs(rng), ("recompute", "swap")[k % 2])
        cases.append(Case(args, replay_steps(None, *args), _step_label(args), "generated"))
    return cases


def _step_label(args: tuple[Any, ...]) -> str:
    num_blocks, size, specs, mode = args
    said = ", ".join(
        f"{n}: prompt {p}, output {o}" + (f", {k} samples" if k > 1 else "") for n, p, o, k in specs
    )
    return (
        f"mode={mode!r}, a pool of {num_blocks} blocks of {size} (and a host pool as large); "
        f"requests in arrival order: {said}"
    )


def _diagnose_step(fn: Callable[..., Any], case: Case) -> str:
    """The first step after which the learner's state and the Scheduler's differ, and how."""
    got = fn(*case.args)
    for k, (want, have) in enumerate(zip(case.expected, got, strict=False)):
        if want != have:
            wrong = [
                f"{name}: expected {w}, got {h}"
                for name, w, h in zip(PARTS, want, have, strict=False)
                if w != h
            ]
            return f"after step {k + 1}: " + "; ".join(wrong)
    return ""


def _variant(oldest: bool = False, back: bool = False, prefill_only: bool = True,
             admit_while_swapped: bool = False) -> Any:  # fmt: skip
    """A wrong step a learner writes first (the Mistakes' answers): the reference's, with
    one switch turned."""

    def step(state: StepState) -> None:
        while (
            (admit_while_swapped or not state.swapped)
            and state.waiting
            and (state.prefill_fits(state.waiting[0]))
        ):
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
        while (
            not state.did["preempted"] and state.swapped and (state.swap_in_fits(state.swapped[0]))
        ):
            group = state.swapped.pop(0)
            state.swap_in(group)
            insort(state.running, group, key=by_arrival)
        for group in finishing:
            state.release(group)
            state.finished.append(group)

    return lambda n, b, specs, mode: replay_steps(step, n, b, specs, mode)


EXERCISES_CAPSTONE_09 = [
    Exercise(
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
            Mistake(
                "FCFS serves the oldest first, so the victim is the most recent arrival.",
                _variant(oldest=True),
                "oldest",
            ),
            Mistake(
                "a preempted group arrived before everything still waiting: FCFS serves it first.",
                _variant(back=True),
                "back",
            ),
            Mistake(
                "without chunked prefill a step that admits runs its prefills only.",
                _variant(prefill_only=False),
                "decode_in_prefill_step",
            ),
            Mistake(
                "while a group is swapped out it has the first claim on freed blocks: "
                "nothing new is admitted.",
                _variant(admit_while_swapped=True),
                "admit_while_swapped",
            ),
        ],
        adapt=adapt_step,
        compare=lambda e, g: isinstance(g, list) and g == e,
        convert=False,
        diagnose=_diagnose_step,
        todo="Write my_scheduler_step",
        stub_code=STEP_STUB,
        budget_s=5.0,
    ),
]
