"""Event-driven simulation of KV memory under FCFS continuous batching (the paper's Fig. 2, 13).

Each step advances every running request by one token (``prompt + 1`` token states after its
first step; it leaves after its ``output``-th). Admission is FCFS, never skipping the head.
Contiguous policies (Orca) reserve ``Policy.reservation`` slots and get an ``Policy.extent``
from a buddy allocator by default (§6.1), never running out later. The paged policy admits
while the free blocks cover the prompt's plus a watermark (1 % of the pool, as vLLM; waived
when nothing runs); short of blocks, the newest request is preempted by recompute (back to the
queue's head, its output so far as prompt). ``StepCost.seconds`` sets arrivals per step.
A sequence of ``len`` tokens holds ``ceil(len / B)`` blocks, as a ``BlockTable`` would: the
simulator keeps counts. Between events (a finish, an arrival to an empty queue, the pool
running out, the horizon) only lengths change, so a run of steps is one numpy expression:
exact, not sampled. Not handled: prefill budgets, swapping, beam search and sharing.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.simulate.accounting import (
    CATEGORIES,
    FIG2,
    Rows,
    SimResult,
    contiguous_steps,
    paged_steps,
)
from pagedlab.simulate.contiguous import ALLOCATORS
from pagedlab.simulate.policies import PAPER_POOL_SLOTS, Policy
from pagedlab.simulate.step_cost import StepCost
from pagedlab.simulate.validate import check_real, check_type
from pagedlab.simulate.workload import Trace

__all__ = ["CATEGORIES", "FIG2", "SimResult", "StepCost", "simulate"]

MAX_POOL_SLOTS = 2**40
"""The largest pool ``simulate`` takes (about 900 PB of OPT-13B K/V): slot sums over a run's
steps stay well inside int64."""


@dataclass
class _Batch:
    """The running requests, oldest first; entry i of every array is the same request."""

    request: np.ndarray  # index into the trace
    length: np.ndarray  # tokens held before the next step
    steps_left: np.ndarray  # steps still to run
    final: np.ndarray  # true final length, prompt + output
    reserved: np.ndarray  # contiguous reservation (0 when paged)
    extent: np.ndarray  # slots the contiguous allocator took (0 when paged)

    @classmethod
    def empty(cls) -> _Batch:
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), z.copy(), z.copy(), z.copy(), z.copy())

    def __len__(self) -> int:
        return len(self.request)

    FIELDS = ("request", "length", "steps_left", "final", "reserved", "extent")

    def append(self, other: _Batch) -> None:
        """Add ``other``'s requests after this batch's (they are newer)."""
        for name in self.FIELDS:
            setattr(self, name, np.concatenate([getattr(self, name), getattr(other, name)]))

    def keep(self, mask: np.ndarray | slice) -> None:
        """Keep only the requests ``mask`` selects (True, or in the slice), in order."""
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name)[mask])

    def advance(self, k: int) -> None:
        self.length += k
        self.steps_left -= k


class _Run:
    """One simulation's state; ``run`` calls the named steps in order until the horizon."""

    def __init__(
        self,
        trace: Trace,
        policy: Policy,
        pool_slots: int,
        cost: StepCost,
        watermark: float,
        record: bool,
    ) -> None:
        self.trace, self.policy, self.cost, self.record = trace, policy, cost, record
        self.pool = pool_slots
        self.B = policy.block_size
        self.nblocks = pool_slots // self.B if policy.paged else 0
        self.watermark_blocks = int(watermark * self.nblocks)
        self.tail = pool_slots - self.nblocks * self.B if policy.paged else 0
        # per request: tokens it will hold before its next step, steps it still has to run
        self.context = trace.prompt.astype(np.int64)
        self.steps_left = trace.output.astype(np.int64)
        self.final = trace.final_len.astype(np.int64)
        if policy.paged:
            self.reserved = self.extent = np.zeros_like(self.final)
        else:
            self.reserved = policy.reservation(trace.prompt, trace.output)
            self.extent = policy.extent(self.reserved)
        self.arrival = trace.arrival.tolist()
        self.space = None if policy.paged else ALLOCATORS[policy.allocator](pool_slots)
        self.offset: dict[int, int] = {}
        self.batch = _Batch.empty()
        self.queue: deque[int] = deque()
        self.next_arrival = 0
        self.t = 0.0
        self.steps = self.finished = self.admitted = self.preemptions = 0
        self.batch_steps = 0  # sum over steps of the batch size
        self.sums = dict.fromkeys(CATEGORIES, 0)
        self.blocks_next = 0  # paged: blocks the batch holds after the next step
        self.rows: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "batch", *CATEGORIES)}

    # -- the steps of one iteration --------------------------------------------------------

    def arrive(self) -> None:
        """Queue every request that has arrived by now."""
        while self.next_arrival < len(self.arrival) and self.arrival[self.next_arrival] <= self.t:
            self.queue.append(self.next_arrival)
            self.next_arrival += 1

    def preempt_newest(self) -> None:
        """Paged: while the next step needs more blocks than the pool has, recompute the newest."""
        b = self.batch
        self.blocks_next = int((-(-(b.length + 1) // self.B)).sum())  # sum of ceil: blocks held
        while self.blocks_next > self.nblocks:
            victim, length = int(b.request[-1]), int(b.length[-1])
            self.context[victim], self.steps_left[victim] = length, int(b.steps_left[-1])
            b.keep(slice(-1))  # drop the newest
            self.blocks_next -= ceil_div(length + 1, self.B)
            self.queue.appendleft(victim)
            self.preemptions += 1

    def admit_paged(self) -> list[int]:
        """FCFS: admit the head while its prompt's blocks and the watermark fit."""
        new: list[int] = []
        while self.queue:
            need = ceil_div(int(self.context[self.queue[0]]) + 1, self.B)
            margin = self.watermark_blocks if len(self.batch) or new else 0
            if self.blocks_next + need + margin > self.nblocks:
                break
            self.blocks_next += need
            new.append(self.queue.popleft())
        return new

    def admit_contiguous(self) -> list[int]:
        """FCFS: admit the head while the allocator can place its reservation."""
        assert self.space is not None
        new: list[int] = []
        while self.queue:
            head = self.queue[0]
            start = self.space.alloc(int(self.reserved[head]))
            if start is None:
                break
            self.offset[head] = start
            new.append(self.queue.popleft())
        return new

    def join(self, new: list[int]) -> None:
        """Add the admitted requests to the running batch."""
        self.admitted += len(new)
        ids = np.asarray(new, np.int64)
        arrays = (self.context, self.steps_left, self.final, self.reserved, self.extent)
        self.batch.append(_Batch(ids, *(a[ids] for a in arrays)))

    def steps_until_event(self, new: list[int], dt: float) -> int:
        """Steps that can run before anything but lengths changes (at least 1)."""
        k = 1 if new else int(self.batch.steps_left.min())
        if not self.queue and self.next_arrival < len(self.arrival):
            k = min(k, max(1, math.ceil((self.arrival[self.next_arrival] - self.t) / dt)))
        return max(1, min(k, math.ceil((self.trace.duration_s - self.t) / dt)))

    def account(self, k: int, dt: float) -> None:
        """Add ``k`` steps of memory categories; paged runs may stop early (blocks run out)."""
        b, waiting = self.batch, bool(self.queue)
        if self.policy.paged:
            k, sums, rows = paged_steps(
                b.length, k, self.B, self.nblocks, self.tail, waiting, self.blocks_next, self.record
            )
        else:
            sums, rows = contiguous_steps(
                b.length, b.final, b.reserved, b.extent, k, self.pool, waiting, self.record
            )
        for name, v in zip(CATEGORIES, sums, strict=True):
            self.sums[name] += v
        self.keep_rows(k, dt, rows)
        self.steps += k
        self.batch_steps += len(b) * k
        self.t += dt * k
        b.advance(k)

    def keep_rows(self, k: int, dt: float, rows: Rows) -> None:
        if rows is None:
            return
        self.rows["t"].append(self.t + dt * np.arange(1, k + 1))
        self.rows["batch"].append(np.full(k, len(self.batch)))
        for name in CATEGORIES:
            self.rows[name].append(rows[name])

    def retire(self) -> None:
        """Remove the requests that produced their last token; free their extents."""
        done = self.batch.steps_left == 0
        if not done.any():
            return
        self.finished += int(done.sum())
        if self.space is not None:
            for i in self.batch.request[done].tolist():
                self.space.free(self.offset.pop(i))
        self.batch.keep(~done)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> SimResult:
        while self.t < self.trace.duration_s:
            self.arrive()
            if self.policy.paged:
                self.preempt_newest()
                new = self.admit_paged()
            else:
                new = self.admit_contiguous()
            if new:
                self.join(new)
            if not len(self.batch):
                if self.next_arrival >= len(self.arrival):
                    break
                self.t = max(self.t, self.arrival[self.next_arrival])
                continue
            prefill = int(self.context[np.asarray(new, np.int64)].sum()) if new else 0
            dt = self.cost.seconds(len(self.batch), prefill)
            self.account(self.steps_until_event(new, dt), dt)
            self.retire()
        return self.result()

    def result(self) -> SimResult:
        history = None
        if self.record:
            history = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self.rows.items()}
        return SimResult(
            policy=self.policy,
            pool_slots=self.pool,
            steps=self.steps,
            sim_time_s=self.t,
            finished=self.finished,
            admitted=self.admitted,
            preemptions=self.preemptions,
            mean_batch=self.batch_steps / self.steps if self.steps else 0.0,
            mean_slots={k: (v / self.steps if self.steps else 0.0) for k, v in self.sums.items()},
            history=history,
        )


def _check_fits(trace: Trace, policy: Policy, slots: int) -> None:
    """Refuse a trace one of whose requests could never be admitted."""
    if not len(trace):
        return
    longest = int(trace.final_len.max())
    if longest > policy.max_len:
        raise ValueError(f"a request of {longest} tokens exceeds max_len={policy.max_len}")
    if policy.paged:
        nblocks = slots // policy.block_size
        worst = ceil_div(longest, policy.block_size)
        if worst > nblocks:
            raise ValueError(
                f"pool_slots={slots} ({nblocks} blocks of {policy.block_size}) is smaller "
                f"than one request of {longest} tokens ({worst} blocks)"
            )
        return
    worst = int(policy.extent(policy.reservation(trace.prompt, trace.output)).max())
    biggest = 1 << (slots.bit_length() - 1) if policy.allocator == "buddy" else slots
    if worst > biggest:
        raise ValueError(
            f"pool_slots={slots} cannot place one {policy.name} extent of {worst} slots "
            f"(the largest it can place is {biggest})"
        )


def simulate(
    trace: Trace,
    policy: Policy,
    pool_slots: int = PAPER_POOL_SLOTS,
    cost: StepCost | None = None,
    watermark: float = 0.01,
    record: bool = False,
) -> SimResult:
    """Run ``trace`` under ``policy`` until the trace's duration ends; with ``record=True`` the
    result carries per-step arrays (``t``, ``batch``, every category) for short traces."""
    check_type(trace, "trace", Trace)
    check_type(policy, "policy", Policy)
    pool_slots = check_int(pool_slots, "pool_slots", minimum=1, maximum=MAX_POOL_SLOTS)
    if cost is not None:
        check_type(cost, "cost", StepCost)
    check_real(watermark, "watermark", at_least=0, below=1)
    check_type(record, "record", bool)
    _check_fits(trace, policy, pool_slots)
    return _Run(trace, policy, pool_slots, cost or StepCost(), float(watermark), record).run()
