"""A step-by-step scheduler over the real allocator and block tables (the paper's §4.5).

:meth:`Scheduler.policy` decides a step (the seam a subclass overrides: FCFS, the most recent
running group preempted first, chunked prefill) with the building blocks below it; the loop
around it (schedule, execute, update, the queues, the checks) is
:class:`~pagedlab.memory.step_loop.StepLoop`'s. Preemption is all or nothing per group, by
swapping to a host pool or by recomputation (:meth:`~Scheduler._preempt`).

Rules: only the public API of ``BlockAllocator`` and ``BlockTable`` is used, and how many
blocks a move needs is always :func:`~pagedlab.memory.block_table.blocks_to_append` (through
:mod:`pagedlab.memory.capacity`); a step first checks everything it will touch, and a refused
step changes nothing; the pools are the scheduler's alone.

Invariants (:meth:`Scheduler.check_invariants`; the tests run it after every step): every
device block's ref count equals the number of running tables holding it, every host block's
the number of swapped samples holding it (no leaks); a swapped group holds no device block.
"""

from __future__ import annotations

from bisect import insort
from operator import attrgetter

from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import prefill_need, samples_need, tokens_that_fit
from pagedlab.memory.requests import BlockCopy, Group, StepPlan, Work
from pagedlab.memory.requests import KVHooks as KVHooks  # the executor, re-exported
from pagedlab.memory.requests import execute as execute
from pagedlab.memory.step_loop import MODES as MODES  # the modes: "swap", "recompute"
from pagedlab.memory.step_loop import SchedulerConfig as SchedulerConfig
from pagedlab.memory.step_loop import StepLoop
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

by_arrival = attrgetter("order")  # the sort key of every queue: FCFS


class Scheduler(StepLoop):
    """Waiting queue, running and swapped sets over ``allocator`` (the device pool): the
    loop, the queues and ``__init__`` are :class:`StepLoop`'s; here is how a step is decided."""

    def policy(self, out: StepPlan) -> None:
        """Decide one step into ``out``: THE seam a subclass overrides (notebook 09's capstone).

        :meth:`schedule` calls it on a fresh plan after its checks; everything around it
        (the checks, the plan, :meth:`update` freeing finished groups, the invariants) is
        the class's. It decides with the building blocks below (:meth:`admit`,
        :meth:`decode`, :meth:`swap_out`, :meth:`recompute`, :meth:`swap_in`), by the rules:

        - **FCFS.** Groups are served in arrival order; the *most recent* running group is
          preempted first when a running group needs a block and none is free (§4.5).
        - Without chunked prefill a step that admits runs prefills only (decodes stall, as in
          vLLM V0's default scheduler), up to ``token_budget`` prefill tokens (one group
          always fits); groups are admitted only while nothing is swapped out.
        - Else decode the running groups oldest first (preempting as needed), continue
          partial prefills, then, if nobody was preempted this step, swap groups back in
          (oldest first) and, with chunked prefill (``token_budget`` tokens a step, decodes
          first: Sarathi-Serve, vLLM V1's default) and nothing swapped out, admit chunks of
          the waiting prompts. (The paper stops admitting "until all preempted sequences are
          completed"; pagedlab, like vLLM V0, admits again once nothing is swapped out.)
        """
        chunked, budget = self.config.chunked_prefill, self.config.token_budget or 1 << 62
        if not chunked and not self.swapped and self._admit_whole(out, budget):
            return  # a prefill step: decodes wait (no chunked prefill)
        budget = self._decode(out, budget)
        for group in [g for g in self.running if g.prefilling]:
            if group.status == "running":
                budget -= self._prefill(group, out, budget, may_preempt=True)
        if not out.preempted:
            while self.swapped and self.swap_in(self.swapped[0], out):
                pass  # the oldest first, while their blocks and next token fit
            if chunked and not self.swapped:
                self._admit_chunks(out, budget)

    # --- the building blocks a policy decides with ------------------------------------------------
    def admit(self, group: Group, out: StepPlan) -> bool:
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

    def decode(self, group: Group, out: StepPlan) -> bool:
        """One token for every sample of running ``group`` if the blocks fit now (copy-on-write
        included); False changes nothing. Its last token: it finishes (freed by
        :meth:`update`)."""
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

    def swap_out(self, group: Group, out: StepPlan) -> bool:
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

    def recompute(self, group: Group, out: StepPlan) -> None:
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

    def swap_in(self, group: Group, out: StepPlan) -> bool:
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

    def _decode(self, out: StepPlan, budget: int) -> int:
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
        out: StepPlan,
        decode: bool = False,
    ) -> None:
        """Append ``count`` tokens at ``first`` to ``sample``'s table; plan the copy and work.

        Every token the scheduler appends goes through here. A copy-on-write whose source
        block is itself written by this step's plan (a recompute's prompt tail, computed
        before the samples fork) cannot be a copy made before the forward: no copy; the piece
        starts at the block's first position instead, and the forward computes those
        positions into the new block.
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

    # --- prefill ----------------------------------------------------------------------------------
    def _admit_whole(self, out: StepPlan, budget: int) -> bool:
        """Admit waiting groups FCFS, whole prefills, while memory and the budget allow."""
        while self.waiting:
            group = self.waiting[0]
            if out.admitted and group.work > budget or not self.admit(group, out):
                break
            budget -= group.prefilled
        return bool(out.admitted)

    def _admit_chunks(self, out: StepPlan, budget: int) -> None:
        while self.waiting and budget > 0:
            group = self.waiting[0]
            if self._fit(None, min(budget, group.work)) == 0:
                break
            self._start(group, out)
            budget -= self._prefill(group, out, budget, may_preempt=False)

    def _start(self, group: Group, out: StepPlan) -> None:
        self.waiting.remove(group)  # the head in FCFS; any waiting group a policy admits
        group.status = "running"
        group.tables = [BlockTable(self.device)]
        insort(self.running, group, key=by_arrival)
        out.admitted.append(group.name)

    def _prefill(self, group: Group, out: StepPlan, budget: int, may_preempt: bool) -> int:
        """Prefill up to ``budget`` tokens of ``group`` into its tables; returns the budget it
        used: tokens done, less the tokens this step had given the groups it preempted (taken
        back out of the plan, they return to the budget, as in vLLM V1's scheduler)."""
        done = refunded = 0
        while budget + refunded > done and group.prefilling:
            sample, first, left = group.next_piece()
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

    # --- preemption (§4.5) ------------------------------------------------------------------------
    def _preempt(self, group: Group, out: StepPlan) -> None:
        """Evict all of running ``group`` (§4.5's all-or-nothing; vLLM's
        ``Scheduler._preempt_request``): :meth:`swap_out` in ``mode="swap"`` if it can, else
        :meth:`recompute`. The host-pool-full fallback is pagedlab's choice; vLLM V0 raised
        "Aborted due to the lack of CPU swap space"."""
        if not (self.mode == "swap" and self.swap_out(group, out)):
            self.recompute(group, out)

    def _preempted(self, group: Group, out: StepPlan) -> None:
        self.running.remove(group)
        group.preemptions += 1
        self.preemptions += 1
        out.preempted.append(group.name)

    def _unschedule(self, group: Group, out: StepPlan) -> None:
        """Take ``group``'s work, copies and counters of this step back out of the plan: it
        was given work, then preempted later in the same step (chunked prefill preempting
        ``running[-1]``, which already decoded). It is recomputed: its tables hold positions
        no forward will compute, so swapping them out would save K/V never written."""
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

    # --- how many blocks --------------------------------------------------------------------------
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
