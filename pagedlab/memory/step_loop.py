"""The step loop every scheduler shares: requests in, decide, execute, update, guards.

:class:`StepLoop` is the base of :class:`pagedlab.memory.scheduler.Scheduler`, which adds how
a step is decided (its ``policy`` and the building blocks it decides with). Here: ``add`` a
request, ``step`` (``schedule`` a plan, ``execute`` it through ``kv``, ``complete`` it), ``run``
until done, ``stop`` a request, and the checks every step starts with.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Group, KVHooks, Request, StepResult, execute
from pagedlab.memory.scheduler_checks import (
    check_complete,
    check_hooks,
    check_host_blocks,
    check_invariants,
    check_no_pending,
    check_pools_unchanged,
    check_request,
    check_settings,
    check_stop,
    check_tables,
)


class StepLoop:
    """Queues, counters and the step loop; a subclass decides each step in ``policy``."""

    device: BlockAllocator
    host: BlockAllocator
    kv: KVHooks | None
    mode: str
    token_budget: int | None
    chunked_prefill: bool
    waiting: list[Group]
    running: list[Group]
    swapped: list[Group]
    finished: list[Group]
    groups: dict[str, Group]
    steps: int
    _pools: tuple[BlockAllocator, BlockAllocator]
    _kv_checked: object
    _free_after_step: tuple[int, int]
    _plan: StepResult | None
    _finishing: list[Group]
    _before: dict[str, tuple[int, int, int]]

    def policy(self, out: StepResult) -> None:
        """Decide one step into ``out`` (the subclass's)."""
        raise NotImplementedError

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
        """Decide one step and return its plan; touches no K/V and calls nobody.

        Decide, execute, update (vLLM's ``schedule`` / model run / ``update_from_output``,
        nano-vllm's ``schedule`` / ``run`` / ``postprocess``): blocks are allocated, tables
        grown and forked and groups moved now; the plan (:class:`StepResult`) lists each
        piece of :class:`Work` (a prefill chunk or a decode, with its block list), the
        copy-on-writes and the swap pairs. The caller executes it (:func:`execute`: swaps
        out, swaps in, copies, **one** forward over ``plan.work``) and then calls
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

    def _complete(self, plan: StepResult, stopped: list[Group]) -> None:
        """Update after the forward: finished groups free their blocks now, not before (a
        block freed earlier could be handed out and written within the step)."""
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

    def _finish(self, group: Group, out: StepResult) -> None:
        """``group``'s last piece is in the plan: it leaves ``running`` now (nobody preempts
        it), and frees its blocks when the step is complete (its piece writes into them)."""
        self.running.remove(group)
        self._finishing.append(group)
        out.finished.append(group.name)

    def _check_in(self, group: Group, queue: list[Group], name: str) -> None:
        if not any(g is group for g in queue):
            raise ValueError(
                f"{getattr(group, 'name', group)!r} is not {name} (it is "
                f"{getattr(group, 'status', 'no group')})"
            )

    def _check_step(self) -> None:
        """Everything the step will touch, checked first (:mod:`.scheduler_checks`): the hooks,
        every running table, the swapped groups' host blocks, and that nobody else took or
        freed blocks of either pool since the last step (the pools must be the scheduler's
        alone). A refused step raises with queues, tables, pools, counters and K/V as they
        were."""
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
            check_pools_unchanged(self.device, self.host, self.running, self.swapped)
            self._free_after_step = (self.device.num_free, self.host.num_free)

    def check_invariants(self) -> None:
        """Raise AssertionError if a block leaked or a group is in an impossible state."""
        queues = (self.waiting, self.running, self.swapped, self.finished)
        check_invariants(queues, self._finishing, self.device, self.host)
