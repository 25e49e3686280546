"""Notebook 09 (when memory runs out): the scheduler's preemption decisions, and the capstone
``scheduler_step``; ``swap_or_recompute`` needs torch (:mod:`.nb09_cost`). Answers come from
the real :class:`pagedlab.memory.scheduler.Scheduler` and ``swap_in_need`` on a real host pool.

The capstone: a subclass of the real Scheduler whose ``policy`` (the seam) is the learner's:
FCFS with whole prefills and no token budget (the paper's §4.5, what
``Scheduler(pool, SchedulerConfig(mode))`` runs), preempting by recompute or (mode "swap") by
swapping, from the building blocks; everything else is the real class. Each case: seeded
requests on a small pool, stepped to the end by both (:func:`~pagedlab.grade.drivers.replay_steps`),
compared after every step. Torch-free: the live site grades these.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import cycle
from typing import Any

from pagedlab.grade.cases import Mistake, cases
from pagedlab.grade.core import Function, Replay
from pagedlab.grade.drivers import PARTS, Spec, replay_steps
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.capacity import prefill_need
from pagedlab.memory.requests import Group, Request, StepPlan
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


class MyScheduler(Scheduler):
    """pagedlab's Scheduler with the step's policy written out: whole prefills, no token
    budget (§4.5; what ``Scheduler.policy`` decides with those settings)."""

    def policy(self, out):  # untyped, as the learner writes it
        if not self.swapped:  # a swapped-out group has the first claim on freed blocks
            while self.waiting and self.admit(self.waiting[0], out):  # FCFS: the head, or nobody
                pass
            if out.admitted:
                return  # a prefill step: the running groups wait
        for group in list(self.running):  # the oldest first
            while group in self.running and not self.decode(group, out):
                victim = self.running[-1]  # the most recent arrival
                if not (self.mode == "swap" and self.swap_out(victim, out)):
                    self.recompute(victim, out)
        while not out.preempted and self.swapped and self.swap_in(self.swapped[0], out):
            pass  # the oldest comes back first


STEP_STUB = '''from pagedlab.memory.scheduler import Scheduler


class MyScheduler(Scheduler):
    def policy(self, out):
        """Decide one step of an FCFS scheduler with whole prefills (the paper's §4.5) into
        the plan ``out``; everything else (blocks, tables, finishing) is the Scheduler's.

        Queues, oldest first: self.waiting, self.running, self.swapped (each a list of
        groups: group.name, group.order). self.mode is "recompute" or "swap".
        Building blocks (each returns False, and changes nothing, when it does not fit):
          self.admit(g, out): start waiting g with its whole (re)prefill;
          self.decode(g, out): one token for every sample of running g (on its last token
            g finishes, and leaves self.running);
          self.swap_out(g, out): preempt running g by swapping its blocks to the host pool;
          self.swap_in(g, out): bring swapped g back;
          self.recompute(g, out): preempt running g by dropping its blocks (no False: it
            always can; g goes back to self.waiting in arrival order).
        out.admitted and out.preempted list the names admitted and preempted so far.

        The policy: first come, first served. A step that admits runs prefills only (the
        running groups wait). Otherwise the running groups decode, and when a token does not
        fit, groups are preempted until it does: in mode "swap" by swapping if the host pool
        has room, else by recompute. A swapped-out group has the first claim on freed
        blocks: while one is swapped out nothing is admitted, and swapped groups come back
        at the end of a step that preempted nobody.
        """
        raise NotImplementedError("write MyScheduler.policy")
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
    ([([0, 1], 6)], 3, 2, "6 tokens fill 2 blocks of 3 exactly: the next token needs a new "
     "block", ("no_next",)),
    ([([0, 1], 5)] * 3, 4, 3, "3 samples share a partly filled last block: the first two to "
     "write each copy it (2 blocks + 2 copies > 3 free)", ("copies_once",)),
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
    scheduler = Scheduler(pool)  # preempts by recompute
    group = scheduler.add(Request("r", prompt_len, generated + 3, num_samples))
    while group.status != "running" or group.prefilling or group.generated < generated:
        scheduler.step()
    scheduler._preempt(group, StepPlan(scheduler.steps))  # the policy itself, as step() runs it
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
          per_sample: bool = False, always: bool = False, once: bool = False) -> int:  # fmt: skip
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
            holders[blocks[-1]] = 1 if once else holders[blocks[-1]] - 1
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
    return cases(STEPS, lambda rng: (*_generated_specs(rng), next(modes)), 16, 909,
                 expect=lambda *a: replay_steps(Scheduler, *a), label=_step_label)  # fmt: skip


def _step_label(num_blocks: int, size: int, specs: list[Spec], mode: str) -> str:
    said = ", ".join(
        f"{n}: prompt {p}, output {o}" + (f", {k} samples" if k > 1 else "") for n, p, o, k in specs
    )
    return (
        f"mode={mode!r}, a pool of {num_blocks} blocks of {size} (and a host pool as large); "
        f"requests in arrival order: {said}"
    )


def _variant(**wrong: bool) -> Any:
    """The solution's policy with one common mistake switched on (a Mistake's answer)."""

    class Wrong(Scheduler):
        def policy(self, out: StepPlan) -> None:
            if wrong.get("admit_while_swapped") or not self.swapped:
                while self.waiting and self.admit(self.waiting[0], out):
                    pass
                if out.admitted and not wrong.get("decode_in_prefill_step"):
                    return
            for group in list(self.running):
                if group.name in out.admitted:
                    continue
                while group in self.running and not self.decode(group, out):
                    victim = self.running[0 if wrong.get("oldest") else -1]
                    if not (self.mode == "swap" and self.swap_out(victim, out)):
                        self.recompute(victim, out)
                        if wrong.get("back"):
                            self.waiting.remove(victim)
                            self.waiting.append(victim)
            while not out.preempted and self.swapped and self.swap_in(self.swapped[0], out):
                pass

    return lambda *args: replay_steps(Wrong, *args)


EXERCISES_09 = [
    Function(pick_victim, NB09,
        task="No block is free for a running request's next token. running lists the running "
        "requests as (name, arrival order) pairs, in no particular order. Which one does the "
        "scheduler preempt?",
        cases=lambda: cases(VICTIMS, _victims, 12, 901, expect=_victim,
                            given=lambda names, shown: ([(names[i], i) for i in shown],)),
        mistakes=[
            Mistake("the list is in no particular order: go by arrival order, not by position.",
                    lambda r: r[-1][0], "last_listed"),
            Mistake("FCFS serves the earliest first, so it preempts the latest, not the "
                    "earliest.", lambda r: min(r, key=lambda pair: pair[1])[0], "first"),
        ],
    ),
    Function(tokens_to_recompute, NB09,
        task="A request with a prompt of prompt_len tokens and num_samples parallel samples is "
        "preempted by recompute after each sample generated `generated` tokens. How many "
        "tokens does its next prefill compute?",
        cases=lambda: cases(RECOMPUTES, lambda rng: (
            rng.randint(1, 40), rng.randint(1, 4), rng.randint(0, 20)), 12, 902,
            expect=_recomputed),
        mistakes=[
            Mistake("every sample's generated tokens were dropped, not one sample's.",
                    lambda p, n, g: p + g, "one_sample"),
            Mistake("the prompt's K/V was dropped too.", lambda p, n, g: n * g, "no_prompt"),
            Mistake("the samples share one prompt: it is recomputed once, not once per sample.",
                    lambda p, n, g: n * (p + g), "prompt_each"),
        ],
    ),
    Function(can_swap_in, NB09,
        task="A swapped-out group holds, per sample, (its host blocks in logical order, its "
        "tokens); samples may share blocks. The device has num_free free blocks. Can it be "
        "swapped in now, with room for each sample's next token?",
        cases=lambda: cases(SWAPS, _swapped_group, 16, 903, expect=_swappable),
        mistakes=[
            Mistake("a last block with room takes the next token without a new block.",
                    lambda s, b, f: _need(s, b, always=True) <= f, "next_always"),
            Mistake("the next token of a full last block needs a new block: count it.",
                    lambda s, b, f: _need(s, b, nxt=False) <= f, "no_next"),
            Mistake("a block shared by samples comes back once.",
                    lambda s, b, f: _need(s, b, per_sample=True) <= f, "per_sample"),
            Mistake("samples sharing a partly filled last block copy it (copy-on-write) to "
                    "write.", lambda s, b, f: _need(s, b, cow=False) <= f, "no_cow"),
            Mistake("every sample but the last to write into a shared partly filled block "
                    "copies it: one copy per sharer, not one per block.",
                    lambda s, b, f: _need(s, b, once=True) <= f, "copies_once"),
        ],
    ),
    Replay(
        name="scheduler_step",
        notebook=NB09,
        task="Write the policy of the scheduler's step (about 15 lines): MyScheduler subclasses "
        "pagedlab's Scheduler and overrides policy(self, out), one step of an FCFS scheduler "
        "with whole prefills that preempts by recompute, or (self.mode == 'swap') by swapping "
        "to a host pool, built of the Scheduler's blocks the stub lists. check runs seeded "
        "request traces in both modes through your class and through pagedlab's Scheduler "
        "and compares after every step: who was admitted, decoded, preempted, swapped out or "
        "in and finished, the queues in order, the running groups' blocks and both free lists.",
        params=("num_blocks", "block_size", "requests", "mode"),
        cases=_step_cases,
        solution=MyScheduler,
        mistakes=[
            Mistake("FCFS serves the oldest first, so the victim is the most recent arrival.",
                    _variant(oldest=True), "oldest"),
            Mistake("a preempted group arrived before everything still waiting: FCFS serves it "
                    "first.", _variant(back=True), "back"),
            Mistake("without chunked prefill a step that admits runs its prefills only.",
                    _variant(decode_in_prefill_step=True), "decode_in_prefill_step"),
            Mistake("while a group is swapped out it has the first claim on freed blocks: "
                    "nothing new is admitted.", _variant(admit_while_swapped=True),
                    "admit_while_swapped"),
        ],
        compare=lambda e, g: isinstance(g, list) and g == e,
        driver="scheduler",
        parts=PARTS,
        todo="Write MyScheduler.policy",
        stub_code=STEP_STUB,
        entry="MyScheduler",
        budget_s=5.0,
    ),
]  # fmt: skip
