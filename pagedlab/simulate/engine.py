"""Event-driven simulation of KV memory under FCFS continuous batching (the paper's Fig. 2, 13).

Model
    One iteration ("step") advances every running request by one token. A request admitted at
    a step boundary is prefilled in the next step: after its first step it holds ``prompt + 1``
    token states, after its ``output``-th step ``prompt + output`` and it leaves. Requests are
    admitted first-come first-served, never skipping the head of the queue:
    * contiguous policies reserve their whole reservation at admission in a ``FirstFit``
      address space and never run out later;
    * the paged policy admits while the free blocks cover the prompt's blocks plus a watermark
      (1 % of the pool, as vLLM does; waived when nothing runs). Before each step every running
      sequence must own ceil(len / B) blocks; when the pool cannot supply them the newest
      request is preempted by recompute (its blocks are freed, it returns to the head of the
      queue with everything generated so far as its new prompt) -- counted in ``preemptions``.
    A step lasts ``StepCost.seconds``; this only sets how many arrivals happen per step.

Memory categories (slots; they sum to the pool at every step -- tests check it)
    tokens    KV of tokens computed so far
    reserved  contiguous slots reserved for this request's future tokens (true final length
              minus current length); the paged policy reserves nothing
    internal  contiguous: reservation beyond the true final length; paged: empty slots in
              each sequence's last block (< B per sequence)
    external  "external fragmentation and others": free slots while a request waits.
              Contiguous: no hole fits the head's reservation (as in the paper's Fig. 2 this
              includes a total free space too small for it). Paged: free blocks held back by
              the watermark or too few for the head's prompt (not fragmentation, but memory
              that a waiting request cannot use), plus the pool's tail ``slots % B``.
    idle      free slots while nobody waits: no demand, so not a waste of the policy.
    Averages are over steps (time with nothing running is not a step). ``shares()`` divides by
    the pool; ``fig2_shares()`` by the pool minus idle slots, which is what we compare with the
    paper's Fig. 2 (its bars describe memory under pressure and sum to 100 %).

Correspondence with pagedlab.BlockAllocator / BlockTable
    A sequence of ``len`` tokens holds exactly ``ceil(len / B)`` blocks, the number a
    ``BlockTable.append_tokens`` run leaves in ``.blocks``; ``num_slots = blocks * B`` and
    ``internal = num_slots - len``. The pool is ``BlockAllocator(slots // B, B)``; a preempted
    sequence's ``BlockTable.free()`` returns its blocks. Which physical blocks are used is
    irrelevant to the accounting, so the simulator keeps counts, not tables.

Speed
    Between events (a request finishes, one arrives to an empty queue, the paged pool would
    run out, the horizon) nothing changes but lengths, so whole runs of steps are accounted in
    one numpy expression: exact, not sampled.

Not handled: prefill token budgets and prefill-only steps (a new request's prompt is processed
in the same step as everyone's decode, Orca-style), swapping to CPU, beam search and sharing.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from pagedlab.simulate.memory import PAPER_POOL_SLOTS, FirstFit, Policy
from pagedlab.simulate.workload import Trace

CATEGORIES = ("tokens", "reserved", "internal", "external", "idle")
FIG2 = CATEGORIES[:4]


@dataclass(frozen=True)
class StepCost:
    """Seconds per step: ``base + per_seq * batch + per_prefill_token * prompt tokens prefilled``.

    Defaults are a rough OPT-13B/A100 model: a 30 ms floor (reading 26 GB of weights plus
    kernel overheads) and 0.5 ms per sequence, so 30 sequences take 45 ms -- the step time at
    which Little's law (batch = rate x mean output x step) gives the paper's 30 requests at
    2 req/s. Only the time axis depends on it; memory accounting per step does not.
    """

    base_s: float = 0.030
    per_seq_s: float = 0.0005
    per_prefill_token_s: float = 0.0001

    def seconds(self, batch: int, prefill_tokens: int = 0) -> float:
        return self.base_s + self.per_seq_s * batch + self.per_prefill_token_s * prefill_tokens


@dataclass
class SimResult:
    policy: Policy
    pool_slots: int
    steps: int
    sim_time_s: float
    finished: int
    admitted: int
    preemptions: int
    mean_batch: float
    mean_slots: dict[str, float]  # category -> mean slots over steps
    history: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def shares(self) -> dict[str, float]:
        """Mean share of the pool in each category of ``CATEGORIES`` (sums to 1)."""
        return {k: v / self.pool_slots for k, v in self.mean_slots.items()}

    def fig2_shares(self) -> dict[str, float]:
        """Shares of the non-idle pool (tokens, reserved, internal, external; sums to 1)."""
        busy = self.pool_slots - self.mean_slots["idle"]
        return {k: (self.mean_slots[k] / busy if busy > 0 else 0.0) for k in FIG2}


def _check_fits(trace: Trace, policy: Policy, slots: int) -> int:
    """Validate the pool against the largest request; return the number of paged blocks."""
    if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or slots < 1:
        raise ValueError(f"pool_slots must be a positive int, got {slots!r}")
    if len(trace) and int(trace.final_len.max()) > policy.max_len:
        raise ValueError(
            f"a request of {int(trace.final_len.max())} tokens exceeds max_len={policy.max_len}"
        )
    if policy.paged:
        nblocks = slots // policy.block_size
        worst = -(-int(trace.final_len.max(initial=1)) // policy.block_size)
        if worst > nblocks:
            raise ValueError(
                f"pool of {slots} slots ({nblocks} blocks of {policy.block_size}) is smaller "
                f"than one request of {int(trace.final_len.max())} tokens ({worst} blocks)"
            )
        return nblocks
    worst = int(policy.reservation(trace.final_len).max(initial=1))
    if worst > slots:
        raise ValueError(
            f"pool of {slots} slots is smaller than one {policy.name} reservation of {worst} slots"
        )
    return 0


Sums = tuple[int, int, int, int, int]  # per category of CATEGORIES, summed over the steps
Rows = dict[str, np.ndarray] | None  # per category, one value per step (record mode)


def _paged_segment(
    c: np.ndarray, k: int, B: int, nblocks: int, tail: int, waiting: bool, used1: int, rows: bool
) -> tuple[int, Sums, Rows]:
    """Account up to ``k`` steps of lengths ``c`` (``used1`` blocks after the first step);
    stop before a step that lacks blocks."""
    if k == 1:
        used = np.array([used1])
    else:
        j = np.arange(1, k + 1, dtype=np.int64)
        used = (-(-(c[None, :] + j[:, None]) // B)).sum(axis=1)  # blocks held after step j
        if used[-1] > nblocks:  # monotone: the first step that cannot get its blocks waits
            k = int(np.argmax(used > nblocks))
            used = used[:k]
    c_sum, n = int(c.sum()), len(c)
    tok = c_sum * k + n * k * (k + 1) // 2
    used_sum = int(used.sum())
    free = (nblocks * k - used_sum) * B
    sums = (tok, 0, used_sum * B - tok, tail * k + free * waiting, free * (not waiting))
    if not rows:
        return k, sums, None
    tok_j = c_sum + n * np.arange(1, k + 1)
    per = {
        "tokens": tok_j,
        "reserved": np.zeros(k),
        "internal": used * B - tok_j,
        "external": tail + (nblocks - used) * B * waiting,
        "idle": (nblocks - used) * B * (not waiting),
    }
    return k, sums, {name: np.asarray(v, np.float64) for name, v in per.items()}


def _contiguous_segment(
    c: np.ndarray, final: np.ndarray, r: np.ndarray, k: int, pool: int, waiting: bool, rows: bool
) -> tuple[Sums, Rows]:
    """Account ``k`` steps of contiguous reservations ``r`` (closed form: lengths grow by 1)."""
    n, c_sum = len(c), int(c.sum())
    tok = c_sum * k + n * k * (k + 1) // 2
    free = pool - int(r.sum())
    internal = int(r.sum() - final.sum())
    f = int(final.sum())
    sums = (tok, f * k - tok, internal * k, free * k * waiting, free * k * (not waiting))
    if not rows:
        return sums, None
    tok_j = c_sum + n * np.arange(1, k + 1)
    per = {
        "tokens": tok_j,
        "reserved": f - tok_j,
        "internal": np.full(k, internal),
        "external": np.full(k, free * waiting),
        "idle": np.full(k, free * (not waiting)),
    }
    return sums, {name: np.asarray(v, np.float64) for name, v in per.items()}


def simulate(
    trace: Trace,
    policy: Policy,
    pool_slots: int = PAPER_POOL_SLOTS,
    cost: StepCost | None = None,
    watermark: float = 0.01,
    record: bool = False,
) -> SimResult:
    """Run ``trace`` under ``policy`` until the trace's duration ends; see the module docstring.

    With ``record=True`` the result carries per-step arrays (``t``, ``batch`` and every
    category of ``CATEGORIES``) -- for tests and pictures of short traces.
    """
    cost = cost or StepCost()
    if not 0 <= watermark < 1:
        raise ValueError(f"watermark must be in [0, 1), got {watermark!r}")
    nblocks = _check_fits(trace, policy, pool_slots)
    B = policy.block_size
    wm_blocks = int(watermark * nblocks)
    tail = pool_slots - nblocks * B if policy.paged else 0
    final = trace.final_len.astype(np.int64)
    ctx = trace.prompt.astype(np.int64).copy()  # tokens held before the next step (if waiting)
    left = trace.output.astype(np.int64).copy()  # steps still to run (if waiting)
    res = policy.reservation(final) if not policy.paged else np.zeros_like(final)
    arrival = trace.arrival.tolist()
    space = FirstFit(pool_slots)
    offset: dict[int, int] = {}
    n_req, horizon = len(trace), trace.duration_s
    # The running batch, oldest first, as parallel arrays: id, length, steps left, final, reserved.
    ids = np.zeros(0, np.int64)
    rc, rl, rf, rr = ids.copy(), ids.copy(), ids.copy(), ids.copy()
    queue: deque[int] = deque()
    nxt = 0
    t = 0.0
    steps = finished = admitted = preempt = 0
    batch_sum = 0.0
    sums = dict.fromkeys(CATEGORIES, 0)
    used_next = 0  # paged: blocks held after the next step
    hist: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "batch", *CATEGORIES)}

    while t < horizon:
        while nxt < n_req and arrival[nxt] <= t:
            queue.append(nxt)
            nxt += 1
        new: list[int] = []
        if policy.paged:
            used_next = int((-(-(rc + 1) // B)).sum())
            while used_next > nblocks:  # preempt the newest by recompute
                victim, vc, vl = int(ids[-1]), int(rc[-1]), int(rl[-1])
                ids, rc, rl, rf, rr = ids[:-1], rc[:-1], rl[:-1], rf[:-1], rr[:-1]
                ctx[victim], left[victim] = vc, vl  # generated tokens become its prompt
                used_next -= -(-(vc + 1) // B)
                queue.appendleft(victim)
                preempt += 1
            while queue:
                h = queue[0]
                need = -(-(int(ctx[h]) + 1) // B)
                margin = wm_blocks if len(ids) or new else 0
                if used_next + need + margin > nblocks:
                    break
                used_next += need
                new.append(queue.popleft())
        else:
            while queue:
                h = queue[0]
                off = space.alloc(int(res[h]))
                if off is None:
                    break
                offset[h] = off
                new.append(queue.popleft())
        if new:
            admitted += len(new)
            nw = np.asarray(new, np.int64)
            ids = np.concatenate([ids, nw])
            rc, rl = np.concatenate([rc, ctx[nw]]), np.concatenate([rl, left[nw]])
            rf, rr = np.concatenate([rf, final[nw]]), np.concatenate([rr, res[nw]])
        n = len(ids)
        if n == 0:
            if nxt >= n_req:
                break
            t = max(t, arrival[nxt])
            continue
        dt = cost.seconds(n, int(ctx[nw].sum()) if new else 0)
        k = 1 if new else int(rl.min())
        if not queue and nxt < n_req:
            k = min(k, max(1, math.ceil((arrival[nxt] - t) / dt)))
        k = max(1, min(k, math.ceil((horizon - t) / dt)))
        if policy.paged:
            k, seg, per = _paged_segment(rc, k, B, nblocks, tail, bool(queue), used_next, record)
        else:
            seg, per = _contiguous_segment(rc, rf, rr, k, pool_slots, bool(queue), record)
        for name, v in zip(CATEGORIES, seg, strict=True):
            sums[name] += v
        if per is not None:
            hist["t"].append(t + dt * np.arange(1, k + 1))
            hist["batch"].append(np.full(k, n))
            for name in CATEGORIES:
                hist[name].append(per[name])
        steps += k
        batch_sum += n * k
        t += dt * k
        rc += k
        rl -= k
        done = rl == 0
        if done.any():
            finished += int(done.sum())
            if not policy.paged:
                for i in ids[done].tolist():
                    space.free(offset.pop(i))
            keep = ~done
            ids, rc, rl, rf, rr = ids[keep], rc[keep], rl[keep], rf[keep], rr[keep]

    mean = {name: (v / steps if steps else 0.0) for name, v in sums.items()}
    history = None
    if record:
        history = {name: (np.concatenate(v) if v else np.zeros(0)) for name, v in hist.items()}
    return SimResult(
        policy=policy,
        pool_slots=int(pool_slots),
        steps=steps,
        sim_time_s=t,
        finished=finished,
        admitted=admitted,
        preemptions=preempt,
        mean_batch=batch_sum / steps if steps else 0.0,
        mean_slots=mean,
        history=history,
    )
