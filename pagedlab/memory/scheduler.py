"""A step-by-step scheduler over the real allocator and block tables (the paper's §4.5).

Each :meth:`Scheduler.step` is one iteration of the model over a batch. The rules:

- **FCFS.** Groups are served in arrival order; the *most recent* running group is preempted
  first when a running group needs a block and none is free.
- **All or nothing, per group.** A group's samples are preempted, swapped and resumed together.
- **Swap** (``mode="swap"``): the group's blocks are copied to a host pool with its own
  :class:`BlockAllocator`; while any group is swapped out no new request is admitted; swapped
  groups come back, oldest first, when their blocks (and room for their next token) are free.
  If the host pool is full, that group is recomputed instead. (The paper stops admitting "until
  all preempted sequences are completed"; pagedlab, like vLLM V0's default scheduler, admits
  again as soon as nothing is swapped out.)
- **Recompute** (``mode="recompute"``): the blocks are dropped and the group goes back to the
  front of the waiting queue; when admitted again one prefill rebuilds prompt + generated.
- **Chunked prefill** (``chunked_prefill=True``, Sarathi-Serve, vLLM V1's default): each step
  has ``token_budget`` tokens; decodes take theirs first (one per sample), then prefills take
  chunks of what is left. Without it a step that admits runs prefills only (decodes stall, as
  in vLLM V0's default scheduler), with up to ``token_budget`` prefill tokens (one group always
  fits, even if longer).

A step: decode the running groups (oldest first, preempting as needed), continue partial
prefills, swap groups back in if nothing was preempted this step, then admit waiting groups
if nothing is swapped out and nothing was preempted (vLLM V1 admits only then, too).
Preemption is the scheduler's own (``_preempt``, as vLLM's ``Scheduler._preempt_request``):
the victim is the most recent running group, ``running[-1]`` (FCFS: "the latest requests
are preempted first", §4.5; vLLM V1 takes ``self.running.pop()``), and *all* of its blocks go
(§4.5's all-or-nothing): swapped to the host pool if it has a free block for each distinct
device block, else (or in ``mode="recompute"``) dropped, the group queued again by arrival
order, its next prefill computing prompt + every sample's generated tokens. The
host-pool-full fallback is pagedlab's choice; vLLM V0 raised "Aborted due to the lack of CPU
swap space".

How many blocks a move needs is always :func:`~pagedlab.memory.block_table.blocks_to_append`
(through :mod:`pagedlab.memory.capacity`); every token appended goes through ``_append``,
which appends, copies on write and writes K/V.

Data: the scheduler never touches K/V. It tells ``kv`` (a :class:`KVHooks`, optional) what to
write, copy (copy-on-write) and swap; :class:`pagedlab.attention.swap.SwappingKV` does it with
real tensors. It uses only the public API of ``BlockAllocator`` and ``BlockTable``.

Atomic steps: a step first checks everything it will touch (:mod:`.scheduler_checks`: the
hooks, every running table, the swapped groups' host blocks, that nobody else took or freed
blocks of either pool since the last step). A refused step raises with queues, tables,
pools, counters and K/V as they were. The pools must be the scheduler's alone: fresh when it
is built, and used by nobody else.

Invariants (:meth:`Scheduler.check_invariants`; the tests run it after every step): every
device block's ref count equals the number of running tables holding it, every host block's
the number of swapped samples holding it (no leaks); a swapped group holds no device block.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence
from operator import attrgetter
from typing import Protocol

from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.capacity import prefill_need, samples_need, tokens_that_fit
from pagedlab.memory.requests import STATUSES, Group, Request, StepResult
from pagedlab.memory.scheduler_checks import MODES as MODES  # the modes: "swap", "recompute"
from pagedlab.memory.scheduler_checks import (
    check_fresh_pool,
    check_hooks,
    check_host_blocks,
    check_pool_unchanged,
    check_settings,
    check_tables,
)
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

by_arrival = attrgetter("order")  # the sort key of every queue: FCFS


class KVHooks(Protocol):
    """The data plane's side: what the scheduler asks K/V storage to do.

    A store may also define ``check_pools(device, host)``: the scheduler calls it when built
    (and whenever ``kv`` is replaced), so a store that does not fit its pools is refused
    before any step (:class:`pagedlab.attention.swap.SwappingKV` defines it).
    """

    def write(self, group: Group, sample: int, table: BlockTable, first: int, count: int) -> None:
        """Positions ``first .. first + count - 1`` of ``sample`` now have K/V to store."""

    def copy(self, cow: CopyOnWrite) -> None:
        """Copy device block ``cow.src`` into ``cow.dst`` (copy-on-write)."""

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy each device block into its host block: ``(device, host)`` pairs."""

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy each host block into its (new) device block: ``(host, device)`` pairs."""


class Scheduler:
    """Waiting queue, running and swapped sets over ``allocator`` (the device pool)."""

    def __init__(
        self,
        allocator: BlockAllocator,
        mode: str = "recompute",
        token_budget: int | None = None,
        chunked_prefill: bool = False,
        host: BlockAllocator | None = None,
        kv: KVHooks | None = None,
    ) -> None:
        if not isinstance(allocator, BlockAllocator):
            raise TypeError(f"allocator must be a BlockAllocator, got {type(allocator).__name__}")
        budget = check_settings(mode, token_budget, chunked_prefill)
        if host is None:  # §4.5: the swap space never needs more blocks than the device pool
            host = BlockAllocator(allocator.num_blocks, allocator.block_size)
        if not isinstance(host, BlockAllocator):
            raise TypeError(f"host must be a BlockAllocator, got {type(host).__name__}")
        if host is allocator:
            raise ValueError("host must be a pool of its own, not the device allocator itself")
        if host.block_size != allocator.block_size:
            raise ValueError(
                f"host block_size {host.block_size} != device block_size {allocator.block_size}"
            )
        check_fresh_pool(allocator, "allocator")
        check_fresh_pool(host, "host")
        check_hooks(kv, allocator, host)
        self.device, self.host, self.kv = allocator, host, kv
        self._pools = (allocator, host)
        self._kv_checked: object = kv
        self.mode, self.token_budget, self.chunked_prefill = mode, budget, chunked_prefill
        self.block_size = allocator.block_size
        self.waiting: list[Group] = []  # FCFS order (preempted-by-recompute groups at the front)
        self.running: list[Group] = []  # arrival order: the last one is preempted first
        self.swapped: list[Group] = []  # arrival order: the first one comes back first
        self.finished: list[Group] = []  # in the order they finished
        self.groups: dict[str, Group] = {}
        self.steps = self.preemptions = self.tokens_recomputed = 0
        self.blocks_swapped_out = self.blocks_swapped_in = 0
        self._free_after_step = (allocator.num_free, host.num_free)

    # --- requests ----------------------------------------------------------------------------
    def add(self, request: Request) -> Group:
        """Queue ``request`` (FCFS: behind everything already added); returns its group.

        Refuses a request that could never run: one whose group at its longest (prompt
        blocks shared by its samples, §4.4) needs more blocks than the pool has, or whose
        samples decode more tokens a step than ``token_budget``.
        """
        if not isinstance(request, Request):
            raise TypeError(f"request must be a Request, got {type(request).__name__}")
        if request.name in self.groups:
            raise ValueError(f"a request named {request.name!r} was already added")
        r = request
        need = prefill_need(r.prompt_len, r.output_len, r.num_samples, self.block_size)
        if need > self.device.num_blocks:
            raise ValueError(
                f"request {r.name!r} can grow to {need} blocks of {self.block_size} "
                f"({r.num_samples} sample(s) x {r.prompt_len + r.output_len} tokens, the "
                f"prompt's full blocks shared), more than the pool's {self.device.num_blocks}: "
                f"it could never run"
            )
        if self.token_budget is not None and r.num_samples > self.token_budget:
            raise ValueError(
                f"request {r.name!r} decodes {r.num_samples} tokens a step, more "
                f"than token_budget = {self.token_budget}: it could never decode"
            )
        group = Group(request, order=len(self.groups), work=request.prompt_len)
        self.groups[request.name] = group
        self.waiting.append(group)
        return group

    @property
    def done(self) -> bool:
        return not (self.waiting or self.running or self.swapped)

    def run(self, max_steps: int = 100_000) -> list[StepResult]:
        """Step until every added request has finished; returns every step's result."""
        max_steps = check_int(max_steps, "max_steps", 1)
        results: list[StepResult] = []
        while not self.done:
            if len(results) == max_steps:
                raise RuntimeError(f"not done after max_steps = {max_steps} steps: {self.groups}")
            results.append(self.step())
        return results

    def stop(self, name: str) -> None:
        """End request ``name`` now, wherever it is (its output ended early: an EOS token).

        Running: its tables are freed; swapped: its host blocks; waiting: it leaves the
        queue. It joins ``finished`` with the tokens it has. Between steps only.
        """
        group = self.groups.get(name) if isinstance(name, str) else None
        if group is None:
            raise ValueError(f"no request named {name!r} was added")
        if group.status == "finished":
            raise ValueError(f"request {name!r} has already finished")
        queue = {"running": self.running, "waiting": self.waiting, "swapped": self.swapped}
        queue[group.status].remove(group)
        for table in group.tables:
            table.free()
        for blocks in group.host:
            for block in blocks:
                self.host.free(block)
        group.tables, group.host, group.host_tokens = [], [], []
        group.status, group.finished_at = "finished", self.steps
        group.work = group.prefilled = group.recompute_left = 0
        self.finished.append(group)
        self._free_after_step = (self.device.num_free, self.host.num_free)

    # --- one step ----------------------------------------------------------------------------
    def step(self) -> StepResult:
        """One iteration: decode, continue prefills, swap in, admit (see the module docstring).

        Checks everything it will touch first; a refused step changed nothing.
        """
        self._check_before_step()
        self.steps += 1
        out = StepResult(self.steps)
        budget = self.token_budget if self.token_budget is not None else 1 << 62
        if not self.chunked_prefill and not self.swapped and self._admit_whole(out, budget):
            self._free_after_step = (self.device.num_free, self.host.num_free)
            return out  # a prefill step: decodes wait (no chunked prefill)
        budget = self._decode(out, budget)
        for group in [g for g in self.running if g.prefilling]:
            if group.status == "running":
                budget -= self._prefill(group, out, budget, may_preempt=True)
        if not out.preempted:
            self._swap_in_ready(out)
            if self.chunked_prefill and not self.swapped:
                self._admit_chunks(out, budget)
        self._free_after_step = (self.device.num_free, self.host.num_free)
        return out

    def _decode(self, out: StepResult, budget: int) -> int:
        i = 0
        while i < len(self.running):
            group = self.running[i]
            n = len(group.tables)
            if group.prefilling:
                i += 1
                continue
            if budget < n:
                break
            while self.device.num_free < self._append_need(group):
                victim = self.running[-1]
                self._preempt(victim, out)
                if victim is group:
                    return budget
            position = group.num_tokens
            for sample, table in enumerate(group.tables):
                self._append(group, sample, table, position, 1)
            group.generated += 1
            budget -= n
            out.decode_tokens += n
            out.decoded.append(group.name)
            if group.generated == group.request.output_len:
                self._finish(group, out)
            else:
                i += 1
        return budget

    def _append(self, group: Group, sample: int, table: BlockTable, first: int, count: int) -> None:
        """Append ``count`` tokens at ``first`` to ``sample``'s table; copy on write, write K/V."""
        cow = table.append_tokens(count)
        if self.kv is not None:
            if cow is not None:
                self.kv.copy(cow)
            self.kv.write(group, sample, table, first, count)

    def _finish(self, group: Group, out: StepResult) -> None:
        for table in group.tables:
            table.free()
        group.tables, group.status, group.finished_at = [], "finished", self.steps
        self.running.remove(group)
        self.finished.append(group)
        out.finished.append(group.name)

    # --- prefill -----------------------------------------------------------------------------
    def _admit_whole(self, out: StepResult, budget: int) -> bool:
        """Admit waiting groups FCFS, whole prefills, while memory and the budget allow."""
        while self.waiting:
            group = self.waiting[0]
            if out.admitted and group.work > budget:
                break
            r = group.request
            need = prefill_need(r.prompt_len, group.generated, r.num_samples, self.block_size)
            if need > self.device.num_free:
                break
            self._start(group, out)
            budget -= self._prefill(group, out, group.work, may_preempt=False)
        return bool(out.admitted)

    def _admit_chunks(self, out: StepResult, budget: int) -> None:
        while self.waiting and budget > 0:
            group = self.waiting[0]
            first = min(budget, group.work)
            if self._fit(None, first) == 0:
                break
            self._start(group, out)
            budget -= self._prefill(group, out, budget, may_preempt=False)

    def _start(self, group: Group, out: StepResult) -> None:
        self.waiting.pop(0)
        group.status = "running"
        group.tables = [BlockTable(self.device)]
        insort(self.running, group, key=by_arrival)
        out.admitted.append(group.name)

    def _piece(self, group: Group) -> tuple[int, int, int]:
        """Where the next prefill tokens go: (sample, first position, tokens left in it)."""
        prompt, done = group.request.prompt_len, group.prefilled
        if done < prompt:
            return 0, done, prompt - done
        sample, offset = divmod(done - prompt, group.generated)
        return sample, prompt + offset, group.generated - offset

    def _prefill(self, group: Group, out: StepResult, budget: int, may_preempt: bool) -> int:
        """Prefill up to ``budget`` tokens of ``group`` into its tables; returns tokens done."""
        done = 0
        while budget > done and group.prefilling:
            sample, first, left = self._piece(group)
            table = group.tables[sample]
            count = min(budget - done, left, self._fit(table, left))
            if count == 0:
                victim = self.running[-1]
                if not may_preempt or victim is group:
                    break
                self._preempt(victim, out)
                continue
            self._append(group, sample, table, first, count)
            group.prefilled += count
            done += count
            redone = min(count, group.recompute_left)
            if redone:
                group.recompute_left -= redone
                self.tokens_recomputed += redone
                out.recomputed[group.name] = out.recomputed.get(group.name, 0) + redone
            if group.prefilled == group.request.prompt_len:  # the samples share the prompt
                forks = range(group.request.num_samples - 1)
                group.tables += [group.tables[0].fork() for _ in forks]
        if done:
            out.prefill_tokens[group.name] = out.prefill_tokens.get(group.name, 0) + done
        if not group.prefilling and group.generated == group.request.output_len:
            self._finish(group, out)  # output_len = 0: the prefill was all of it
        return done

    # --- preemption (§4.5) -------------------------------------------------------------------
    def _preempt(self, group: Group, out: StepResult) -> None:
        """Evict all of running ``group``: swap it out, or drop its K/V for recompute."""
        self.running.remove(group)
        group.preemptions += 1
        self.preemptions += 1
        out.preempted.append(group.name)
        if self.mode == "swap" and len(group.device_blocks()) <= self.host.num_free:
            self._swap_out(group, out)
            return
        work = group.request.prompt_len + group.request.num_samples * group.generated
        # K/V dropped now: everything computed, plus what an earlier drop left to redo.
        dropped = group.prefilled + group.recompute_left if group.prefilling else work
        for table in group.tables:
            table.free()
        group.tables, group.status = [], "waiting"
        group.work, group.prefilled, group.recompute_left = work, 0, min(dropped, work)
        insort(self.waiting, group, key=by_arrival)

    def _swap_out(self, group: Group, out: StepResult) -> None:
        pairs = swap_out(group, self.host)
        if self.kv is not None:
            self.kv.swap_out(pairs)
        group.status = "swapped"
        insort(self.swapped, group, key=by_arrival)
        self.blocks_swapped_out += len(pairs)
        out.swapped_out[group.name] = len(pairs)

    def _swap_in_ready(self, out: StepResult) -> None:
        """Bring swapped groups back, oldest first, while their blocks and next token fit."""
        while self.swapped:
            group = self.swapped[0]
            if swap_in_need(group, self.host) > self.device.num_free:
                return
            pairs = swap_in(group, self.device, self.host)
            if self.kv is not None:
                self.kv.swap_in(pairs)
            group.status = "running"
            self.swapped.remove(group)
            insort(self.running, group, key=by_arrival)
            self.blocks_swapped_in += len(pairs)
            out.swapped_in[group.name] = len(pairs)

    # --- how many blocks -----------------------------------------------------------------------
    def _fit(self, table: BlockTable | None, want: int) -> int:
        """How many of ``want`` tokens can be appended to ``table`` (None: a new one) now."""
        free = self.device.num_free
        if table is None:
            return tokens_that_fit(0, want, self.block_size, False, free)
        shared = bool(table.num_tokens) and self.device.refcount(table.blocks[-1]) > 1
        return tokens_that_fit(table.num_tokens, want, self.block_size, shared, free)

    def _append_need(self, group: Group) -> int:
        """Device blocks one more token for every sample of ``group`` takes (COW included)."""
        lasts = [(t.num_tokens, t.blocks[-1]) for t in group.tables]
        return samples_need(lasts, 1, self.block_size, self.device.refcount)

    # --- guards and invariants -----------------------------------------------------------------
    def _check_before_step(self) -> None:
        """Everything the step will touch, checked first (:mod:`.scheduler_checks`)."""
        check_settings(self.mode, self.token_budget, self.chunked_prefill)
        if self.device is not self._pools[0] or self.host is not self._pools[1]:
            raise ValueError(
                "device and host cannot be replaced after the scheduler is built: its groups "
                "hold blocks of the pools it was built with"
            )
        if self.kv is not self._kv_checked:  # replaced since it was checked
            check_hooks(self.kv, self.device, self.host)
            self._kv_checked = self.kv
        check_tables(self.running)
        check_host_blocks(self.swapped, self.host)
        if (self.device.num_free, self.host.num_free) != self._free_after_step:
            device, host = self._held()
            check_pool_unchanged(self.device, "allocator (the device pool)", device)
            check_pool_unchanged(self.host, "host (the swap space)", host)
            self._free_after_step = (self.device.num_free, self.host.num_free)

    def _held(self) -> tuple[list[int], list[int]]:
        """How many running tables (device) and swapped samples (host) hold each block."""
        device = [0] * self.device.num_blocks
        host = [0] * self.host.num_blocks
        for group in self.running:
            for table in group.tables:
                for block in table.blocks:
                    device[block] += 1
        for group in self.swapped:
            for held in group.host:
                for block in held:
                    host[block] += 1
        return device, host

    def check_invariants(self) -> None:
        """Raise AssertionError if a block leaked or a group is in an impossible state."""
        for group in (*self.waiting, *self.running, *self.swapped, *self.finished):
            if group.status not in STATUSES:
                raise AssertionError(f"{group} has status {group.status!r}, not one of {STATUSES}")
        for group in self.running:
            if not group.prefilling:
                tokens = {t.num_tokens for t in group.tables}
                if len(group.tables) != group.request.num_samples or tokens != {group.num_tokens}:
                    raise AssertionError(f"{group} holds tokens {tokens}")
        for group in self.swapped:
            if group.tables:
                raise AssertionError(f"swapped {group} still holds device blocks")
        for group in self.waiting + self.finished:
            if group.tables or group.host:
                raise AssertionError(f"{group} holds blocks")
        device, host = self._held()
        if device != self.device.refcounts():
            raise AssertionError(f"device ref counts {self.device.refcounts()} != held {device}")
        if host != self.host.refcounts():
            raise AssertionError(f"host ref counts {self.host.refcounts()} != held {host}")
