"""Notebook 09's capstone: the scheduler's ``step()``, the policy of one iteration (§4.5).

The learner writes ``my_scheduler_step(state)``: one step of a recompute-mode FCFS scheduler
with whole prefills and no token budget (vLLM V0's default scheduler; pagedlab's
``Scheduler(pool, mode="recompute")``). :class:`StepState` gives the mechanics (allocate,
decode, drop, free: real :class:`~pagedlab.BlockTable` calls on a real
:class:`~pagedlab.BlockAllocator`, in the order the Scheduler makes them); the learner owns
the policy: whether this is a prefill step, which groups decode and in which order, the
victim, where it is queued, when the step stops, and what happens to a finished group.

Grading (:func:`replay_steps`): each case is a seeded list of requests on a small pool. The
same requests are added to pagedlab's :class:`~pagedlab.memory.scheduler.Scheduler` and
stepped to the end; the learner's step is run as many times on a :class:`StepState` over a
pool of the same size. After every step both are compared: which groups were admitted,
decoded, preempted and finished, the three queues in order, every running group's blocks
and the pool's free list (its order too). The first step where they differ is named.
Torch-free: the live site grades it in the browser.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pagedlab.exercises.core import Case, Exercise, Mistake
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import prefill_need, samples_need
from pagedlab.memory.requests import Group, Request
from pagedlab.memory.scheduler import Scheduler

NB09 = "09_when_memory_runs_out"
Spec = tuple[str, int, int, int]  # (name, prompt_len, output_len, num_samples)


class StepState:
    """The scheduler's state, for one step written by hand (recompute mode, whole prefills).

    Queues (plain lists of :class:`~pagedlab.memory.requests.Group`, yours to change):
    ``waiting`` (FCFS, front first), ``running`` (arrival order, oldest first), ``finished``.
    A group has ``name``, ``generated`` (tokens each sample generated) and ``request``
    (``prompt_len``, ``output_len``, ``num_samples``). The mechanics, on real block tables:

    - ``prefill_fits(group)`` / ``prefill(group)``: whether its whole (re)prefill (prompt,
      plus every sample's generated tokens after a preemption) fits the free blocks now;
      do it (the group gets its tables; put it in ``running`` yourself).
    - ``decode_fits(group)`` / ``decode(group)``: whether one more token for every sample
      fits now (copy-on-write included); append it (``generated`` grows by one).
    - ``drop(group)``: preempt by recompute: free all its blocks (queue it yourself).
    - ``release(group)``: free a finished group's blocks (move it to ``finished`` yourself).

    Each mechanic is recorded (admitted, decoded, preempted, finished), which the grader
    compares with pagedlab's Scheduler.
    """

    def __init__(self, num_blocks: int, block_size: int, specs: list[Spec]) -> None:
        self.pool = BlockAllocator(num_blocks, block_size)
        self.waiting: list[Group] = [
            Group(Request(*spec), order=i, work=spec[1]) for i, spec in enumerate(specs)
        ]
        self.running: list[Group] = []
        self.finished: list[Group] = []
        self.did: dict[str, list[str]] = _nothing_done()

    @property
    def num_free(self) -> int:
        return self.pool.num_free

    def prefill_fits(self, group: Group) -> bool:
        r = group.request
        return prefill_need(r.prompt_len, group.generated, r.num_samples, self.pool.block_size) <= (
            self.pool.num_free
        )

    def prefill(self, group: Group) -> None:
        """The prompt into one table, a fork per other sample, then each sample's tokens."""
        if group.tables:
            raise ValueError(f"{group.name} already holds blocks: drop or release it first")
        if not self.prefill_fits(group):
            raise ValueError(f"{group.name}'s prefill does not fit {self.pool.num_free} blocks")
        first = BlockTable(self.pool)
        first.append_tokens(group.request.prompt_len)
        group.tables = [first] + [first.fork() for _ in range(group.request.num_samples - 1)]
        if group.generated:
            for table in group.tables:
                table.append_tokens(group.generated)
        group.status, group.prefilled = "running", group.work
        self.did["admitted"].append(group.name)

    def decode_fits(self, group: Group) -> bool:
        lasts = [(t.num_tokens, t.blocks[-1]) for t in group.tables]
        if not lasts:
            raise ValueError(f"{group.name} holds no blocks: it is not running")
        need = samples_need(lasts, 1, self.pool.block_size, self.pool.refcount)
        return need <= self.pool.num_free

    def decode(self, group: Group) -> None:
        if not group.tables:
            raise ValueError(f"{group.name} holds no blocks: it is not running")
        if group.generated == group.request.output_len:
            raise ValueError(f"{group.name} already generated all {group.generated} tokens")
        for table in group.tables:
            table.append_tokens(1)
        group.generated += 1
        self.did["decoded"].append(group.name)

    def drop(self, group: Group) -> None:
        for table in group.tables:
            table.free()
        r = group.request
        group.tables, group.status, group.prefilled = [], "waiting", 0
        group.work = r.prompt_len + r.num_samples * group.generated
        self.did["preempted"].append(group.name)

    def release(self, group: Group) -> None:
        for table in group.tables:
            table.free()
        group.tables, group.status = [], "finished"
        self.did["finished"].append(group.name)


def _nothing_done() -> dict[str, list[str]]:
    return {"admitted": [], "decoded": [], "preempted": [], "finished": []}


def scheduler_step(state: StepState) -> None:
    """One step: a prefill step if the head of waiting fits, else decode oldest first."""
    while state.waiting and state.prefill_fits(state.waiting[0]):
        group = state.waiting.pop(0)  # FCFS: the head, or nobody
        state.prefill(group)
        state.running.append(group)
    if state.did["admitted"]:
        return  # a prefill step: the running groups wait
    i = 0
    while i < len(state.running):
        group = state.running[i]
        while not state.decode_fits(group):
            victim = state.running.pop()  # the most recent arrival
            state.drop(victim)
            state.waiting.insert(0, victim)  # ahead of everything that never ran
            if victim is group:
                return
        state.decode(group)
        if group.generated == group.request.output_len:
            state.release(group)
            state.finished.append(state.running.pop(i))
        else:
            i += 1


STEP_STUB = '''def my_scheduler_step(state):
    """One step of a recompute-mode FCFS scheduler with whole prefills (vLLM V0's default).

    state.waiting (FCFS, front first), state.running (arrival order, oldest first) and
    state.finished are lists of groups: group.name, group.generated (tokens each sample
    generated), group.request.output_len. Moving groups between the lists is yours.
    Mechanics: state.prefill_fits(g) / state.prefill(g): a whole (re)prefill;
    state.decode_fits(g) / state.decode(g): one token for every sample;
    state.drop(g): preempt by recompute (frees its blocks);
    state.release(g): free a finished group's blocks.

    The policy: first come, first served. A step that admits runs prefills only (the
    running groups wait); otherwise the running groups decode, and when a token does not
    fit, groups are preempted until it does. A group that generated output_len tokens is
    finished.
    """
    raise NotImplementedError("write my_scheduler_step")
'''

Log = list[tuple[Any, ...]]


def _snapshot(did: dict[str, list[str]], waiting: list[Group], running: list[Group],
              finished: list[Group], pool: BlockAllocator) -> tuple[Any, ...]:  # fmt: skip
    return (
        list(did["admitted"]),
        list(did["decoded"]),
        list(did["preempted"]),
        list(did["finished"]),
        [g.name for g in waiting],
        [g.name for g in running],
        [g.name for g in finished],
        [[list(t.blocks) for t in g.tables] for g in running],
        pool.free_list(),
    )


PARTS = ("admitted", "decoded", "preempted", "finished", "waiting", "running", "finished queue",
         "running groups' blocks", "free list")  # fmt: skip


def replay_steps(step: Callable[[StepState], Any] | None, num_blocks: int, block_size: int,
                 specs: list[Spec]) -> Log:  # fmt: skip
    """Step ``specs`` to the end; ``step`` None: pagedlab's Scheduler does the steps, else
    ``step(state)`` does as many. After each step: :data:`PARTS`, as plain lists."""
    if step is None:
        scheduler = Scheduler(BlockAllocator(num_blocks, block_size), mode="recompute")
        for spec in specs:
            scheduler.add(Request(*spec))
        log: Log = []
        while not scheduler.done and len(log) < 1000:
            out = scheduler.step()
            did = {
                "admitted": out.admitted,
                "decoded": out.decoded,
                "preempted": out.preempted,
                "finished": out.finished,
            }
            s = scheduler
            log.append(_snapshot(did, s.waiting, s.running, s.finished, s.device))
        return log
    state = StepState(num_blocks, block_size, specs)
    log = []
    for _ in range(len(replay_steps(None, num_blocks, block_size, specs))):
        state.did = _nothing_done()
        step(state)
        log.append(_snapshot(state.did, state.waiting, state.running, state.finished, state.pool))
    return log


FIXED: list[tuple[int, int, list[Spec], str, tuple[str, ...]]] = [
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
    for num_blocks, size, specs, why, catches in FIXED:
        args = (num_blocks, size, specs)
        expected = replay_steps(None, *args)
        cases.append(Case(args, expected, _step_label(args), "fixed", why, catches))
    rng = random.Random(909)
    for _ in range(12):
        args = _generated_specs(rng)
        cases.append(Case(args, replay_steps(None, *args), _step_label(args), "generated"))
    return cases


def _step_label(args: tuple[Any, ...]) -> str:
    num_blocks, size, specs = args
    said = ", ".join(
        f"{n}: prompt {p}, output {o}" + (f", {k} samples" if k > 1 else "") for n, p, o, k in specs
    )
    return f"a pool of {num_blocks} blocks of {size}; requests in arrival order: {said}"


def _adapt_step(fn: Any) -> Callable[..., Any]:
    def run(num_blocks: int, size: int, specs: list[Spec]) -> Any:
        if not callable(fn):
            raise TypeError(f"pass your step function, got {type(fn).__name__}")
        return replay_steps(fn, num_blocks, size, specs)

    run.__name__ = str(getattr(fn, "__name__", type(fn).__name__))
    return run


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


def _variant(oldest: bool = False, back: bool = False, prefill_only: bool = True) -> Any:
    """A wrong step a learner writes first (the Mistakes' answers)."""

    def step(state: StepState) -> None:
        while state.waiting and state.prefill_fits(state.waiting[0]):
            group = state.waiting.pop(0)
            state.prefill(group)
            state.running.append(group)
        if state.did["admitted"] and prefill_only:
            return
        i = 0
        while i < len(state.running):
            group = state.running[i]
            if group.name in state.did["admitted"]:
                i += 1
                continue
            while not state.decode_fits(group):
                victim = state.running.pop(0 if oldest else -1)
                state.drop(victim)
                state.waiting.insert(len(state.waiting) if back else 0, victim)
                if victim is group:
                    return
                i -= int(oldest)
            state.decode(group)
            if group.generated == group.request.output_len:
                state.release(group)
                state.finished.append(state.running.pop(i))
            else:
                i += 1

    return lambda n, b, specs: replay_steps(step, n, b, specs)


EXERCISES_CAPSTONE_09 = [
    Exercise(
        name="scheduler_step",
        notebook=NB09,
        task="Build the scheduler's step (about 30 lines): one iteration of a recompute-mode "
        "FCFS scheduler with whole prefills, over the state object the stub describes. check "
        "runs seeded request traces through your step and through pagedlab's Scheduler and "
        "compares after every step: who was admitted, decoded, preempted and finished, the "
        "queues in order, the running groups' blocks and the free list.",
        params=("num_blocks", "block_size", "requests"),
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
        ],
        adapt=_adapt_step,
        compare=lambda e, g: isinstance(g, list) and g == e,
        convert=False,
        diagnose=_diagnose_step,
        todo="Write my_scheduler_step",
        stub_code=STEP_STUB,
        budget_s=5.0,
        hints=[
            "which groups does FCFS serve first, and so preempt last? Where in the queue does "
            "a group that arrived before every waiting one belong?"
        ],
    ),
]
