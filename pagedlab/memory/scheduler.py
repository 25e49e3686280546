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

A step decides (:meth:`Scheduler.policy`, the seam a subclass overrides, built of the
blocks :meth:`~Scheduler.admit`, :meth:`~Scheduler.decode`, :meth:`~Scheduler.swap_out`,
:meth:`~Scheduler.recompute`, :meth:`~Scheduler.swap_in`): decode the running groups (oldest
first, preempting as needed), continue partial prefills, swap groups back in if nothing was
preempted this step, then admit waiting groups if nothing is swapped out and nothing was
preempted (vLLM V1 admits only then, too).
Preemption is the scheduler's own (``_preempt``, as vLLM's ``Scheduler._preempt_request``):
the victim is the most recent running group, ``running[-1]`` (FCFS: "the latest requests
are preempted first", §4.5; vLLM V1 takes ``self.running.pop()``), and *all* of its blocks go
(§4.5's all-or-nothing): swapped to the host pool if it has a free block for each distinct
device block, else (or in ``mode="recompute"``) dropped, the group queued again by arrival
order, its next prefill computing prompt + every sample's generated tokens. The
host-pool-full fallback is pagedlab's choice; vLLM V0 raised "Aborted due to the lack of CPU
swap space".

How many blocks a move needs is always :func:`~pagedlab.memory.block_table.blocks_to_append`
(through :mod:`pagedlab.memory.capacity`); every token appended goes through ``_append``.

**Decide, execute, update** (as vLLM's ``schedule`` / model run / ``update_from_output``,
and nano-vllm's ``schedule`` / ``run`` / ``postprocess``). :meth:`Scheduler.schedule`
*decides*: it allocates blocks, grows and forks tables, moves groups between queues and
returns the plan (:class:`~pagedlab.memory.requests.StepResult`): each piece of
:class:`~pagedlab.memory.requests.Work` (a prefill chunk or a decode, with its block list),
the copy-on-writes, the swap pairs. It touches no K/V and calls nobody. An executor then
runs the plan: swaps out, swaps in, copies, and **one** forward over every piece
(:func:`execute` through ``kv``; the engine's :class:`~pagedlab.engine.model_kv.ModelKV`
with the model). :meth:`Scheduler.complete` *updates*: the groups that finished (their last
piece was in the plan) or were stopped free their blocks only now, after the forward that
wrote into them. :meth:`Scheduler.step` is the three in a row, with ``kv`` (optional: a
:class:`KVHooks`, e.g. :class:`pagedlab.attention.swap.SwappingKV`) as the executor.

Hazards the decision handles, so that one forward is enough:

- a group preempted later in the same step after it was given work (chunked prefill
  preempting ``running[-1]``, which already decoded): its work, copies and counters are
  taken back out of the plan and it is recomputed (its tables hold positions no forward
  will compute, so swapping them out would save K/V that was never written);
- a copy-on-write whose source block this plan itself writes (a recompute's prompt tail,
  then the samples' forked tables): no copy; the piece starts at the block's first
  position and the forward computes those positions into the new block;
- a block freed in the step (a swap-out, a preemption) and handed out again: the
  executor's order reads it (swap-out) before anything writes it; a finished group's
  blocks are not freed until :meth:`Scheduler.complete`.

The scheduler uses only the public API of ``BlockAllocator`` and ``BlockTable``.

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
from pagedlab.memory.requests import STATUSES, BlockCopy, Group, Request, StepResult, Work
from pagedlab.memory.scheduler_checks import MODES as MODES  # the modes: "swap", "recompute"
from pagedlab.memory.scheduler_checks import (
    check_complete,
    check_hooks,
    check_host_blocks,
    check_no_pending,
    check_pool_unchanged,
    check_request,
    check_scheduler_args,
    check_settings,
    check_stop,
    check_tables,
)
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

by_arrival = attrgetter("order")  # the sort key of every queue: FCFS


class KVHooks(Protocol):
    """The data plane's side: what :func:`execute` asks K/V storage to do with a plan.

    A store may also define ``check_pools(device, host)``: the scheduler calls it when built
    (and whenever ``kv`` is replaced), so a store that does not fit its pools is refused
    before any step (:class:`pagedlab.attention.swap.SwappingKV` defines it).
    """

    def write(self, group: Group, work: Work) -> None:
        """Store the K/V of ``work``'s positions (of sample ``work.sample`` of ``group``),
        through ``work.blocks``: the table as the plan made it (``work.slots(block_size)``)."""

    def copy(self, cow: CopyOnWrite) -> None:
        """Copy device block ``cow.src`` into ``cow.dst`` (copy-on-write)."""

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy each device block into its host block: ``(device, host)`` pairs."""

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy each host block into its (new) device block: ``(host, device)`` pairs."""


def execute(plan: StepResult, kv: KVHooks, groups: dict[str, Group]) -> None:
    """Carry out ``plan`` through ``kv``: swaps out, swaps in, copies, then every piece.

    The order is what makes one forward enough: a swap-out reads its blocks before anything
    this step writes (a block it frees may be handed to a piece or a swap-in of the same
    step), swaps in and copies land before the pieces that read them, and the pieces write
    disjoint slots (each slot is held by one table that grows this step).
    """
    if plan.swap_out_pairs:
        kv.swap_out(plan.swap_out_pairs)
    if plan.swap_in_pairs:
        kv.swap_in(plan.swap_in_pairs)
    for copy in plan.copies:
        kv.copy(CopyOnWrite(copy.src, copy.dst))
    for work in plan.work:
        kv.write(groups[work.group], work)


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
        host, budget = check_scheduler_args(
            allocator, mode, token_budget, chunked_prefill, host, kv
        )
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
        self._plan: StepResult | None = None  # scheduled, not complete yet
        self._finishing: list[Group] = []  # finish with the plan: blocks held until complete
        self._before: dict[str, tuple[int, int, int]] = {}  # counters of groups given work

    # --- requests ----------------------------------------------------------------------------
    def add(self, request: Request) -> Group:
        """Queue ``request`` (FCFS: behind everything already added); returns its group.

        Refuses a request that could never run: one whose group at its longest (prompt
        blocks shared by its samples, §4.4) needs more blocks than the pool has, or whose
        samples decode more tokens a step than ``token_budget``.
        """
        check_request(request, self.groups, self.device, self.token_budget)
        group = Group(request, order=len(self.groups), work=request.prompt_len)
        self.groups[request.name] = group
        self.waiting.append(group)
        return group

    @property
    def done(self) -> bool:
        return not (self.waiting or self.running or self.swapped or self._finishing)

    def run(self, max_steps: int = 100_000) -> list[StepResult]:
        """Step until every added request has finished; returns every step's plan."""
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
        self._stop(check_stop(name, self.groups, self._plan))
        self._free_after_step = (self.device.num_free, self.host.num_free)

    def _stop(self, group: Group) -> None:
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

    # --- one step: decide, execute, update -----------------------------------------------------
    def step(self) -> StepResult:
        """One iteration: :meth:`schedule`, run the plan through ``kv``, :meth:`complete`.

        The hooks are called only once the plan is decided, in the executor's order (swaps
        out, swaps in, copies, then each piece's write). Returns the plan.
        """
        self._check_step()
        plan = self._schedule()
        if self.kv is not None:
            execute(plan, self.kv, self.groups)
        self._complete(plan, [])
        return plan

    def schedule(self) -> StepResult:
        """Decide one step (see the module docstring) and return its plan; touches no K/V.

        Blocks are allocated, tables grown and groups moved now; the caller executes the
        plan (swaps out, swaps in, copies, one forward over ``plan.work``) and then calls
        :meth:`complete`. Checks everything it will touch first: a refused call changed nothing.
        """
        self._check_step()
        return self._schedule()

    def complete(self, plan: StepResult, stopped: Sequence[str] = ()) -> None:
        """The plan was executed: free the groups it finished and those in ``stopped``
        (ended early, an EOS token: their names are added to ``plan.finished``)."""
        self._complete(
            plan, check_complete(plan, self._plan, stopped, self.groups, self._finishing)
        )

    def _schedule(self) -> StepResult:
        self.steps += 1
        out = self._plan = StepResult(self.steps)
        self._before = {}
        self.policy(out)
        return out

    # --- the policy: the seam a subclass overrides -------------------------------------------
    def policy(self, out: StepResult) -> None:
        """Decide one step into ``out`` (the module docstring's rules): THE seam.

        :meth:`schedule` calls it on a fresh plan after its checks; everything around it
        (the checks, the plan, :meth:`complete` freeing finished groups, the invariants) is
        the class's. A subclass may override it (notebook 09's capstone does) and decide with
        the building blocks this one uses: :meth:`admit`, :meth:`decode`, :meth:`swap_out`,
        :meth:`recompute`, :meth:`swap_in`. With whole prefills and no token budget (the
        defaults) it is §4.5's policy: admit FCFS while nothing is swapped out (a step that
        admits runs prefills only), else decode the running groups oldest first, preempting
        the most recent (``running[-1]``) while a token does not fit, then, if nobody was
        preempted, swap groups back in, oldest first.
        """
        budget = self.token_budget if self.token_budget is not None else 1 << 62
        if not self.chunked_prefill and not self.swapped and self._admit_whole(out, budget):
            return  # a prefill step: decodes wait (no chunked prefill)
        budget = self._decode(out, budget)
        for group in [g for g in self.running if g.prefilling]:
            if group.status == "running":
                budget -= self._prefill(group, out, budget, may_preempt=True)
        if not out.preempted:
            while self.swapped and self.swap_in(self.swapped[0], out):
                pass  # the oldest first, while their blocks and next token fit
            if self.chunked_prefill and not self.swapped:
                self._admit_chunks(out, budget)

    def admit(self, group: Group, out: StepResult) -> bool:
        """Start waiting ``group`` with its whole (re)prefill (prompt, then every sample's
        generated tokens after a recompute) if its blocks fit now; False changes nothing."""
        self._check_in(group, self.waiting, "waiting")
        r = group.request
        if prefill_need(r.prompt_len, group.generated, r.num_samples, self.block_size) > (
            self.device.num_free
        ):
            return False
        self._start(group, out)
        self._prefill(group, out, group.work, may_preempt=False)
        return True

    def decode(self, group: Group, out: StepResult) -> bool:
        """One token for every sample of running ``group`` if the blocks fit now (copy-on-write
        included); False changes nothing. Its last token: it finishes (freed by
        :meth:`complete`)."""
        self._check_in(group, self.running, "running")
        if group.prefilling:
            raise ValueError(f"{group.name} is still prefilling: it has no token to decode")
        if self.device.num_free < self._append_need(group):
            return False
        position = group.num_tokens
        for sample, table in enumerate(group.tables):
            self._append(group, sample, table, position, 1, out, decode=True)
        group.generated += 1
        out.decode_tokens += len(group.tables)
        out.decoded.append(group.name)
        if group.generated == group.request.output_len:
            self._finish(group, out)
        return True

    def swap_out(self, group: Group, out: StepResult) -> bool:
        """Preempt running ``group`` by swapping all its blocks to the host pool, if the
        host has a free block for each and the group got no work this step; False changes
        nothing. It joins ``swapped`` (arrival order)."""
        self._check_in(group, self.running, "running")
        if group.name in self._before or len(group.device_blocks()) > self.host.num_free:
            return False
        self._preempted(group, out)
        pairs = swap_out(group, self.host)
        out.swap_out_pairs += pairs
        group.status = "swapped"
        insort(self.swapped, group, key=by_arrival)
        self.blocks_swapped_out += len(pairs)
        out.swapped_out[group.name] = len(pairs)
        return True

    def recompute(self, group: Group, out: StepResult) -> None:
        """Preempt running ``group`` by dropping all its blocks: it joins ``waiting`` by
        arrival order (ahead of every group that never ran), its next prefill computing
        prompt + every sample's generated tokens. A group already given work this step
        (chunked prefill) first takes it back (:meth:`_unschedule`)."""
        self._check_in(group, self.running, "running")
        self._preempted(group, out)
        if group.name in self._before:
            self._unschedule(group, out)
        work = group.request.prompt_len + group.request.num_samples * group.generated
        # K/V dropped now: everything computed, plus what an earlier drop left to redo.
        dropped = group.prefilled + group.recompute_left if group.prefilling else work
        for table in group.tables:
            table.free()
        group.tables, group.status = [], "waiting"
        group.work, group.prefilled, group.recompute_left = work, 0, min(dropped, work)
        insort(self.waiting, group, key=by_arrival)

    def swap_in(self, group: Group, out: StepResult) -> bool:
        """Bring swapped ``group`` back to ``running`` if its blocks and every sample's next
        token fit now; False changes nothing."""
        self._check_in(group, self.swapped, "swapped")
        if swap_in_need(group, self.host) > self.device.num_free:
            return False
        pairs = swap_in(group, self.device, self.host)
        out.swap_in_pairs += pairs
        group.status = "running"
        self.swapped.remove(group)
        insort(self.running, group, key=by_arrival)
        self.blocks_swapped_in += len(pairs)
        out.swapped_in[group.name] = len(pairs)
        for sample, table in enumerate(group.tables):
            self._scheduled(group, sample, table, table.num_tokens)
        return True

    def _check_in(self, group: Group, queue: list[Group], name: str) -> None:
        if not any(g is group for g in queue):
            raise ValueError(
                f"{getattr(group, 'name', group)!r} is not {name} (it is "
                f"{getattr(group, 'status', 'no group')})"
            )

    def _complete(self, plan: StepResult, stopped: list[Group]) -> None:
        """Update after the forward: finished groups free their blocks now, not before."""
        for group in self._finishing:
            for table in group.tables:
                table.free()
            group.tables, group.status, group.finished_at = [], "finished", self.steps
            self.finished.append(group)
        self._finishing = []
        for group in stopped:
            self._stop(group)
            plan.finished.append(group.name)
        self._plan, self._before = None, {}
        self._free_after_step = (self.device.num_free, self.host.num_free)

    def _decode(self, out: StepResult, budget: int) -> int:
        """Decode the running groups oldest first within ``budget``, preempting the most
        recent while a token does not fit; returns the budget left."""
        for group in [g for g in self.running if not g.prefilling]:
            if group.status != "running":
                continue  # preempted for an older group's token
            n = len(group.tables)
            if budget < n:
                break
            while not self.decode(group, out):
                victim = self.running[-1]
                self._preempt(victim, out)
                if victim is group:
                    return budget
            budget -= n
        return budget

    def _append(
        self,
        group: Group,
        sample: int,
        table: BlockTable,
        first: int,
        count: int,
        out: StepResult,
        decode: bool = False,
    ) -> None:
        """Append ``count`` tokens at ``first`` to ``sample``'s table; plan the copy and work.

        A copy-on-write whose source block is itself written by this step's plan (a
        recompute's prompt tail, computed before the samples fork) cannot be a copy made
        before the forward: the piece starts at the block's first position instead, and the
        forward computes those positions into the new block.
        """
        counters = (group.generated, group.prefilled, group.recompute_left)
        self._before.setdefault(group.name, counters)  # as they were before this step
        cow = table.append_tokens(count)
        if cow is not None:
            size = self.block_size
            if any(cow.src in w.written_blocks(size) for w in out.work):
                back = first % size
                first, count = first - back, count + back
            else:
                out.copies.append(BlockCopy(group.name, cow.src, cow.dst))
        out.work.append(Work(group.name, sample, first, count, tuple(table.blocks), decode))
        self._scheduled(group, sample, table, count)

    def _scheduled(self, group: Group, sample: int, table: BlockTable, count: int) -> None:
        """The plan grew ``sample``'s ``table`` by its last ``count`` positions (all of them:
        swapped in): a subclass's hook (the prefix cache registers full blocks here)."""

    def _finish(self, group: Group, out: StepResult) -> None:
        """``group``'s last piece is in the plan: it leaves ``running`` now (nobody preempts
        it), and frees its blocks when the step is complete (its piece writes into them)."""
        self.running.remove(group)
        self._finishing.append(group)
        out.finished.append(group.name)

    # --- prefill -----------------------------------------------------------------------------
    def _admit_whole(self, out: StepResult, budget: int) -> bool:
        """Admit waiting groups FCFS, whole prefills, while memory and the budget allow."""
        while self.waiting:
            group = self.waiting[0]
            if out.admitted and group.work > budget:
                break
            if not self.admit(group, out):
                break
            budget -= group.prefilled
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
        """Prefill up to ``budget`` tokens of ``group`` into its tables; returns the budget it
        used: tokens done, less the tokens this step had given the groups it preempted (taken
        back out of the plan, they return to the budget, as in vLLM V1's scheduler)."""
        done = refunded = 0
        while budget + refunded > done and group.prefilling:
            sample, first, left = self._piece(group)
            table = group.tables[sample]
            count = min(budget + refunded - done, left, self._fit(table, left))
            if count == 0:
                victim = self.running[-1]
                if not may_preempt or victim is group:
                    break
                refunded += out.prefill_tokens.get(victim.name, 0)
                refunded += len(victim.tables) if victim.name in out.decoded else 0
                self._preempt(victim, out)
                continue
            self._append(group, sample, table, first, count, out)
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
        return done - refunded

    # --- preemption (§4.5) -------------------------------------------------------------------
    def _preempt(self, group: Group, out: StepResult) -> None:
        """Evict all of running ``group``: swapped out in ``mode="swap"`` if it can be (the
        host has room, and it got no work this step: its tables would hold positions no
        forward computes), else recomputed."""
        if not (self.mode == "swap" and self.swap_out(group, out)):
            self.recompute(group, out)

    def _preempted(self, group: Group, out: StepResult) -> None:
        self.running.remove(group)
        group.preemptions += 1
        self.preemptions += 1
        out.preempted.append(group.name)

    def _unschedule(self, group: Group, out: StepResult) -> None:
        """Take ``group``'s work, copies and counters of this step back out of the plan."""
        name = group.name
        self._dropped(group, [w for w in out.work if w.group == name])
        out.work = [w for w in out.work if w.group != name]
        out.copies = [c for c in out.copies if c.group != name]
        if name in out.decoded:
            out.decoded.remove(name)
            out.decode_tokens -= len(group.tables)
        out.prefill_tokens.pop(name, None)
        self.tokens_recomputed -= out.recomputed.pop(name, 0)
        group.generated, group.prefilled, group.recompute_left = self._before.pop(name)

    def _dropped(self, group: Group, work: list[Work]) -> None:
        """``work`` of ``group`` left the plan (its K/V will not be written): a subclass's hook."""

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
    def _check_step(self) -> None:
        """Everything the step will touch, checked first (:mod:`.scheduler_checks`)."""
        check_no_pending(self._plan)
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
        for group in (*self.running, *self._finishing):
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
