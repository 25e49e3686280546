"""Preemption (the paper's §4.5): evict all of a group, by swap or by recompute, and bring it back.

:class:`~pagedlab.memory.scheduler.Scheduler`'s step loop calls these; they are its preemption
policy, kept apart from the loop. They change only the scheduler's queues and counters and the
evicted group's state (the scheduler owns both), through the public API of
:class:`~pagedlab.memory.allocator.BlockAllocator` and :class:`BlockTable`.

- **Victim** (chosen by the loop): the most recent running group, ``running[-1]`` (FCFS: "the
  latest requests are preempted first", §4.5; vLLM V1 takes ``self.running.pop()``).
- :func:`preempt` evicts *all* of the group's blocks, all samples together (all-or-nothing per
  sequence group, §4.5). ``mode="swap"``: copy them to the host pool (:func:`swap_out`) if it
  has a free block for each distinct device block. Otherwise, or in ``mode="recompute"``, drop
  them and queue the group again by arrival order (so ahead of every request never admitted):
  its next prefill computes prompt + every sample's generated tokens. The host-pool-full
  fallback is pagedlab's choice; vLLM V0 raised "Aborted due to the lack of CPU swap space".
- :func:`swap_in_all` brings swapped groups back, oldest first, while the device has room for
  their blocks and their next token; the loop calls it only in a step that preempted nothing
  (as vLLM V0's scheduler does).
"""

from __future__ import annotations

from bisect import insort
from operator import attrgetter
from typing import TYPE_CHECKING

from pagedlab.memory.requests import Group, StepResult
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

if TYPE_CHECKING:
    from pagedlab.memory.scheduler import Scheduler

by_arrival = attrgetter("order")  # the sort key of every queue: FCFS


def preempt(s: Scheduler, group: Group, out: StepResult) -> None:
    """Evict all of running ``group``: swap it out, or drop its K/V for recompute."""
    s.running.remove(group)
    group.preemptions += 1
    s.preemptions += 1
    out.preempted.append(group.name)
    if s.mode == "swap" and len(group.device_blocks()) <= s.host.num_free:
        _swap_out(s, group, out)
        return
    work = group.request.prompt_len + group.request.num_samples * group.generated
    # K/V dropped now: everything computed, plus what an earlier drop left to redo.
    dropped = group.prefilled + group.recompute_left if group.prefilling else work
    for table in group.tables:
        table.free()
    group.tables, group.status = [], "waiting"
    group.work, group.prefilled, group.recompute_left = work, 0, min(dropped, work)
    insort(s.waiting, group, key=by_arrival)


def _swap_out(s: Scheduler, group: Group, out: StepResult) -> None:
    pairs = swap_out(group, s.host)
    if s.kv is not None:
        s.kv.swap_out(pairs)
    group.status = "swapped"
    insort(s.swapped, group, key=by_arrival)
    s.blocks_swapped_out += len(pairs)
    out.swapped_out[group.name] = len(pairs)


def swap_in_all(s: Scheduler, out: StepResult) -> None:
    """Bring swapped groups back, oldest first, while their blocks and next token fit."""
    while s.swapped:
        group = s.swapped[0]
        if swap_in_need(group, s.host) > s.device.num_free:
            return
        pairs = swap_in(group, s.device, s.host)
        if s.kv is not None:
            s.kv.swap_in(pairs)
        group.status = "running"
        s.swapped.remove(group)
        insort(s.running, group, key=by_arrival)
        s.blocks_swapped_in += len(pairs)
        out.swapped_in[group.name] = len(pairs)
