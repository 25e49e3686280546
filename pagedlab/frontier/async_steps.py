"""One step ahead: async scheduling (vLLM's ``AsyncScheduler``) on pagedlab's allocator.

Synchronously step t+1 is planned once step t's tokens are known. With async scheduling
(``vllm/v1/core/sched/async_scheduler.py``) step t+1 is planned *while step t runs*: a decoding
request's next input is a token that does not exist yet, so the plan carries an *output
placeholder* (its slot allocated now, its value arriving with step t's output). A request
preempted while its step-t token is in flight gets that token *stale*; vLLM 0.34 still appends
it unless ``drop_stale_output`` was set (``reset_prefix_cache``, a KV connector's hand-off;
``vllm/v1/core/sched/scheduler.py:1879-1889, 2362-2385``); ``drop_stale=True`` replays that
case (the token dropped, recomputed later). :func:`run_async` replays a few decoding requests
on a real :class:`BlockAllocator` (FCFS, recompute-preempt the last running request when an
append does not fit); token values are a function of (request, position), so every output
equals :func:`run_sync`'s. Invariants: each :class:`Plan` row has one entry per scheduled
request; a placeholder is resolved at the next update; a stale token reaches the output
unless ``drop_stale``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagedlab.ground.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable


def token(request: int, position: int) -> int:
    """The token a request produces at ``position``: a pure function, so runs compare."""
    return 1000 * (request + 1) + position


@dataclass
class _Req:
    index: int
    name: str
    prompt: int
    max_new: int
    outputs: list[int] = field(default_factory=list)
    table: BlockTable | None = None
    in_flight: bool = False  # a step that produces its next token is running

    @property
    def done(self) -> bool:
        return len(self.outputs) >= self.max_new


@dataclass(frozen=True)
class Plan:
    """Step ``step`` as planned: what each request does, what was preempted, what went stale."""

    step: int
    work: dict[str, str]  # request -> "prefill N" | "decode" (input a placeholder) | "decode*"
    preempted: tuple[str, ...]
    stale: tuple[str, ...]  # requests preempted with a token in flight (it arrives stale)
    free_blocks: int


@dataclass
class Timeline:
    plans: list[Plan]
    outputs: dict[str, list[int]]
    placeholders: int  # inputs planned before their value existed
    stale_tokens: int  # tokens that arrived after their request was preempted


def run_async(
    prompts: tuple[int, ...] = (6, 6, 6),
    max_new: int = 6,
    num_blocks: int = 7,
    block_size: int = 4,
    one_step_ahead: bool = True,
    drop_stale: bool = False,
) -> Timeline:
    """Decode ``prompts`` (their lengths), ``max_new`` tokens each, on ``num_blocks`` blocks.
    ``one_step_ahead=False`` is the synchronous loop (each update before the next plan);
    ``drop_stale``: a stale token is dropped (``reset_prefix_cache``), not kept."""
    max_new = check_int(max_new, "max_new", minimum=1)
    alloc = BlockAllocator(check_int(num_blocks, "num_blocks", minimum=1), block_size)
    reqs = [_Req(i, f"R{i}", check_int(p, "prompt", minimum=1), max_new)
            for i, p in enumerate(prompts)]  # fmt: skip
    if not reqs:
        raise ValueError("prompts must hold at least one prompt length")
    if any(not BlockTable(alloc).can_append(r.prompt + max_new) for r in reqs):
        raise ValueError(f"a request of {max(prompts)} + {max_new} tokens does not fit the pool")
    running: list[_Req] = []
    waiting = list(reqs)
    plans: list[Plan] = []
    in_flight: list[_Req] = []  # scheduled in the step now running
    stale: set[int] = set()
    placeholders = stale_tokens = 0
    step = 0
    while any(not r.done for r in reqs) or in_flight:
        if not one_step_ahead:
            stale_tokens += _update(in_flight, stale, running, drop_stale)
            in_flight = []
        work: dict[str, str] = {}
        preempted: list[str] = []
        marked: list[str] = []
        for r in list(running):  # running requests first, FCFS
            if r not in running or len(r.outputs) + r.in_flight >= r.max_new:
                continue
            while r in running:
                try:
                    r.table.append_tokens(1)  # type: ignore[union-attr]
                    break
                except OutOfBlocksError:
                    victim = running.pop()  # the last running request, by recompute
                    victim.table.free()  # type: ignore[union-attr]
                    victim.table = None
                    work.pop(victim.name, None)
                    if victim.in_flight:
                        stale.add(victim.index)
                        marked.append(victim.name)
                    waiting.insert(0, victim)
                    preempted.append(victim.name)
            if r in running:
                placeholders += r.in_flight  # its input token is still being computed
                work[r.name] = "decode*" if r.in_flight else "decode"
        if not preempted:
            for r in list(waiting):  # admit while the prompt and the tokens so far fit
                if r.in_flight or r.done:
                    continue
                table = BlockTable(alloc)
                n = r.prompt + len(r.outputs)
                if not table.can_append(n):
                    break
                table.append_tokens(n)
                r.table = table
                waiting.remove(r)
                running.append(r)
                work[r.name] = f"prefill {n}"
        if one_step_ahead:  # step t's tokens arrive only now, after step t+1 was planned
            stale_tokens += _update(in_flight, stale, running, drop_stale)
        in_flight = [r for r in running if r.name in work]
        for r in in_flight:
            r.in_flight = True
        plans.append(Plan(step, work, tuple(preempted), tuple(marked), alloc.num_free))
        step += 1
        if step > 50 * len(reqs) * max_new:
            raise RuntimeError("no progress")  # pragma: no cover
    return Timeline(plans, {r.name: r.outputs for r in reqs}, placeholders, stale_tokens)


def _update(in_flight: list[_Req], stale: set[int], running: list[_Req], drop: bool) -> int:
    """Step outputs arrive: each in-flight request gets its token (a stale one too, unless
    ``drop``); a running request with all its tokens finishes (its blocks are freed)."""
    arrived_stale = 0
    for r in in_flight:
        r.in_flight = False
        if r.index in stale:
            stale.discard(r.index)
            arrived_stale += 1
            if drop:
                continue
        r.outputs.append(token(r.index, r.prompt + len(r.outputs)))
        if r.done and r in running:
            running.remove(r)
            r.table.free()  # type: ignore[union-attr]
            r.table = None
    return arrived_stale
