"""The step loop every scheduler shares: requests in, decide, execute, update, guards.

:class:`StepLoop` is the base of :class:`pagedlab.memory.scheduler.Scheduler`, which adds how
a step is decided (``policy``). As in vLLM 0.34.0 (``v1/core/sched/scheduler.py:716``
``schedule``, ``v1/worker/gpu/model_runner.py:1826`` ``execute_model``, ``scheduler.py:2301``
``update_from_output``) and nano-vllm (``schedule`` / ``run`` / ``postprocess``):
:meth:`~StepLoop.schedule` returns a plan, an executor returns what it computed (a
:class:`~pagedlab.memory.requests.StepOutput`), and :meth:`~StepLoop.update` is the only
writer of a group's tokens: it appends them, ends a request at EOS and frees the finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedlab.ground.checks import check_bool, check_choice, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Group, KVHooks, Request, StepOutput, StepPlan, Work, execute
from pagedlab.memory.scheduler_checks import (
    check_hooks,
    check_host_blocks,
    check_invariants,
    check_pool_unchanged,
    check_request,
    check_scheduler_args,
    check_tables,
    check_update,
    held_counts,
)

MODES = ("swap", "recompute")


@dataclass(frozen=True)
class SchedulerConfig:
    """How a scheduler decides, checked once, here (each refusal names the value): vLLM's
    ``SchedulerConfig`` (``vllm/config/scheduler.py:24``, read by its scheduler as
    ``self.scheduler_config``, ``v1/core/sched/scheduler.py:99``), cut to pagedlab's settings.

    - ``mode``: how a running group is preempted, ``"swap"`` (to the host pool) or
      ``"recompute"``; no vLLM field: V1 only recomputes (``_preempt_request``, ``:1853``).
    - ``token_budget``: tokens computed per step at most (None: no limit; one group's whole
      prefill always fits): ``max_num_batched_tokens`` (``config/scheduler.py:47``).
    - ``chunked_prefill``: decodes first, then prefill chunks within the budget (so it needs
      one): ``enable_chunked_prefill`` (``config/scheduler.py:146``, True by default there).
    Prefix caching is no scheduler setting (``CacheConfig``, ``vllm/config/cache.py:267``).
    """

    mode: str = "recompute"
    token_budget: int | None = None
    chunked_prefill: bool = False

    def __post_init__(self) -> None:
        check_choice(self.mode, "mode", MODES)
        check_bool(self.chunked_prefill, "chunked_prefill")
        if self.token_budget is not None:
            check_int(self.token_budget, "token_budget", 1)
        elif self.chunked_prefill:
            raise ValueError("chunked_prefill needs a token_budget (tokens per step), got None")


def check_config(config: object) -> SchedulerConfig:
    if not isinstance(config, SchedulerConfig):
        raise TypeError(f"config must be a SchedulerConfig, got {config!r}")
    return config


class StepLoop:
    """Queues, counters and the step loop over ``allocator`` (the device pool) and ``host`` (the
    swap space; a fresh one its size by default), set by ``config`` (checked again before each
    step: it may be replaced by another); a subclass decides each step in ``policy``."""

    def __init__(
        self,
        allocator: BlockAllocator,
        config: SchedulerConfig = SchedulerConfig(),
        host: BlockAllocator | None = None,
        kv: KVHooks | None = None,
    ) -> None:
        host = check_scheduler_args(allocator, host, kv)
        self.config, self.device, self.host, self.kv = check_config(config), allocator, host, kv
        self._pools, self._kv_checked = (allocator, host), kv
        self.block_size = allocator.block_size
        self.waiting: list[Group] = []  # FCFS order (preempted-by-recompute groups at the front)
        self.running: list[Group] = []  # arrival order: the last one is preempted first
        self.swapped: list[Group] = []  # arrival order: the first one comes back first
        self.finished: list[Group] = []  # in the order they finished
        self.groups: dict[str, Group] = {}
        self.steps = self.preemptions = self.tokens_recomputed = 0
        self.blocks_swapped_out = self.blocks_swapped_in = 0
        self._free_after_step = (allocator.num_free, host.num_free)
        self._plan: StepPlan | None = None  # scheduled, not updated yet
        self._finishing: list[Group] = []  # finish with the plan: blocks held until update
        self._before: dict[str, tuple[int, int, int]] = {}  # counters of groups given work

    def policy(self, out: StepPlan) -> None:
        """Decide one step into ``out`` (the subclass's)."""
        raise NotImplementedError

    @property
    def mode(self) -> str:
        """``config.mode``, "swap" or "recompute" (what notebook 09's policies read)."""
        return self.config.mode

    def add(self, request: Request) -> Group:
        """Queue ``request`` (FCFS: behind everything already added); returns its group.
        Refuses a request that could never run (:func:`.scheduler_checks.check_request`)."""
        check_request(request, self.groups, self.device, self.config.token_budget)
        group = Group(request, order=len(self.groups), work=request.prompt_len)
        self.groups[request.name] = group
        self.waiting.append(group)
        return group

    @property
    def done(self) -> bool:
        return not (self.waiting or self.running or self.swapped or self._finishing)

    def run(self, max_steps: int = 100_000) -> list[StepPlan]:
        """Step until every added request has finished; returns every step's plan."""
        max_steps = check_int(max_steps, "max_steps", 1)
        results: list[StepPlan] = []
        while not self.done:
            if len(results) == max_steps:
                raise RuntimeError(f"not done after max_steps = {max_steps} steps: {self.groups}")
            results.append(self.step())
        return results

    def _stop(self, group: Group) -> None:
        """``group`` ends: out of its queue (if still in one), its blocks freed, finished."""
        queue = {"running": self.running, "waiting": self.waiting, "swapped": self.swapped}
        if group in queue[group.status]:
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

    def step(self, eos_token_id: int | None = None) -> StepPlan:
        """One iteration: :meth:`schedule`, :func:`execute` the plan through ``kv`` (when the
        scheduler has one), :meth:`update`. Returns the plan."""
        self._check_step()
        plan = self._schedule()
        self._update(
            plan, execute(plan, self.kv, self.groups) if self.kv else StepOutput(), eos_token_id
        )
        return plan

    def schedule(self) -> StepPlan:
        """Decide one step and return its plan (:class:`~pagedlab.memory.requests.StepPlan`);
        touches no K/V and calls nobody: blocks are allocated, tables grown and forked and
        groups moved now. The caller executes it, then calls :meth:`update`. A refused call
        changed nothing."""
        self._check_step()
        return self._schedule()

    def update(self, plan: StepPlan, output: StepOutput, eos_token_id: int | None = None) -> None:
        """``plan`` was executed and computed ``output``: append each sample's new tokens; a
        request whose sample 0 drew ``eos_token_id`` ends (added to ``plan.finished``); the
        finished free their blocks now, not before (a block freed earlier could be handed
        out and written within the step)."""
        check_update(plan, self._plan, output, self.groups)
        self._update(plan, output, eos_token_id)

    def abort(self) -> None:
        """End every request now, wherever it is: every block of both pools it held is freed.
        A pending plan is dropped, its pieces never computed (:meth:`_dropped` for each)."""
        for w in self._plan.work if self._plan else []:
            self._dropped(self.groups[w.group], [w])
        for group in [*self._finishing, *self.running, *self.waiting, *self.swapped]:
            self._stop(group)
        self._finishing, self._plan, self._before = [], None, {}
        self._free_after_step = (self.device.num_free, self.host.num_free)

    def _schedule(self) -> StepPlan:
        self.steps += 1
        out = self._plan = StepPlan(self.steps)
        self._before = {}
        self.policy(out)
        return out

    def _update(self, plan: StepPlan, output: StepOutput, eos: int | None) -> None:
        for name, per_sample in output.tokens.items():
            for ids, new in zip(self.groups[name].token_ids, per_sample, strict=True):
                ids += new
        for group in self._finishing:
            self._stop(group)
        self._finishing = []
        for name, per_sample in output.tokens.items():
            group = self.groups[name]
            if eos is not None and eos in per_sample[0] and group.status == "running":
                self._stop(group)
                plan.finished.append(name)
        self._plan, self._before = None, {}
        self._free_after_step = (self.device.num_free, self.host.num_free)

    def _dropped(self, group: Group, work: list[Work]) -> None:
        """``work`` of ``group`` left the plan (its K/V will not be written): a subclass's hook."""

    def _finish(self, group: Group, out: StepPlan) -> None:
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
        """Everything the step will touch, checked first (:mod:`.scheduler_checks`): a refused
        step raises with queues, tables, pools, counters and K/V as they were."""
        if self._plan is not None:  # scheduled, not updated
            raise RuntimeError(
                f"step {self._plan.step} was scheduled and not completed: execute its plan "
                f"and call update(plan, output) first"
            )
        check_config(self.config)
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
            pools = (self.device.num_blocks, self.host.num_blocks)
            held_device, held_host = held_counts(self.running, self.swapped, *pools)
            check_pool_unchanged(self.device, "allocator (the device pool)", held_device)
            check_pool_unchanged(self.host, "host (the swap space)", held_host)
            self._free_after_step = (self.device.num_free, self.host.num_free)

    def check_invariants(self) -> None:
        """Raise AssertionError if a block leaked or a group is in an impossible state."""
        queues = (self.waiting, self.running, self.swapped, self.finished)
        check_invariants(queues, self._finishing, self.device, self.host)
