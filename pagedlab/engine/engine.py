"""The engine: prompts in, tokens out, through the scheduler, the pages and the model.

``Engine(model, num_blocks, block_size, ...)`` owns a device pool (a
:class:`pagedlab.BlockAllocator`, one :class:`pagedlab.PagedKVCache` per layer), a host pool
for swapping and a :class:`pagedlab.PrefixCache`, all persisting across calls. A step is
vLLM's: plan, execute (:class:`~pagedlab.engine.runner.ModelRunner`, **one** forward), update.

Promises: ``generate`` returns each prompt's new tokens, ``max_new_tokens`` of them (fewer when
``eos_token_id`` came first: it ends with it), what :func:`pagedlab.model.generate_contiguous`
returns alone; bit for bit with ``batch_invariant=True``, else up to a near-tie (logits within
about 1e-5: batching changes float rounding). ``sample(...)[i]`` equals
:func:`pagedlab.model.sample_contiguous` with ``request=i`` (one generator per request and
sample). A request no pool could hold is a ValueError before anything runs. Any error or
interrupt in ``generate``, ``sample``, ``start`` or ``step`` aborts the live run and rebuilds
the pools and prefix cache empty (the run held every block). Threads are served one at a time;
a run keeps its own ``max_new_tokens``. No stale K/V: each call compares the weights' content
(:mod:`pagedlab.engine.guard`, in-place edits included) with what the prefix cache was filled
with, and a step refuses a tracked edit made mid-run. Tokens: the last new token's K/V is
never stored (as in vLLM): capacity counts ``prompt + max_new_tokens - 1``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import host_cache
from pagedlab.engine import guard
from pagedlab.engine.prefix import PrefixCachingScheduler
from pagedlab.engine.runner import ForwardStats, ModelRunner
from pagedlab.ground.checks import ArgumentTypeError, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, Request, StepPlan, execute
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig
from pagedlab.model.llama import TinyLlama
from pagedlab.model.paged import DecodeAttention
from pagedlab.model.sampling import sample_generator

T = TypeVar("T")


@dataclass(frozen=True)
class StepRecord:
    """One engine step: what the scheduler did, the tokens it produced, the memory held."""

    result: StepPlan
    new_sample_tokens: dict[str, list[list[int]]]  # request -> per sample, this step's tokens
    blocks_held: int  # device blocks with a reference (free blocks kept by the cache: no)
    running_blocks: int  # distinct blocks in running tables (shared blocks counted once)
    slots_used: int  # positions with K/V summed over running tables
    reserved_slots: int  # Orca-style: prompt + max_new_tokens per running sample

    @property
    def new_tokens(self) -> dict[str, list[int]]:
        """request -> sample 0's tokens of this step (requests that sampled one)."""
        return {n: t[0] for n, t in self.new_sample_tokens.items() if t[0]}


@dataclass
class EngineRun:
    """The record of one ``generate`` call: every step, and the scheduler that ran it (each
    request's tokens live in its group, ``Group.token_ids``: ``Engine.tokens`` reads them)."""

    scheduler: Scheduler
    names: list[str]  # "A", "B", ... in prompt order
    max_new_tokens: int  # this run's own: ``tokens`` slices by it
    steps: list[StepRecord] = field(default_factory=list)
    aborted: bool = False  # an error ended it: its blocks were freed, it cannot step

    @property
    def preemptions(self) -> int:
        return self.scheduler.preemptions


class Engine:
    """Greedy serving of a :class:`~pagedlab.model.TinyLlama` on paged K/V (see module doc)."""

    def __init__(
        self,
        model: TinyLlama,
        num_blocks: int,
        block_size: int,
        preemption: str = "recompute",
        token_budget: int | None = None,
        prefix_caching: bool = True,
        batch_invariant: bool = False,
        chunked_prefill: bool | None = None,
        decode_attention: DecodeAttention | None = None,
        host_blocks: int | None = None,
    ) -> None:
        """``decode_attention``: the decode read, default the Triton kernel on a GPU and
        batched torch on a CPU (:func:`pagedlab.model.paged.default_decode_attention`; pass
        :func:`pagedlab.paged_attention` to run the kernel here, in Triton's interpreter);
        ``host_blocks``: the swap space, default as many blocks as the device pool (§4.5's
        bound); ``batch_invariant``: every token bit-identical to the oracle's (module doc);
        ``chunked_prefill``: on with a budget by default. Each run's scheduler: ``self.config``."""
        settings = (preemption, prefix_caching, batch_invariant, host_blocks)
        host_blocks = guard.check_engine_settings(model, *settings)
        chunked = token_budget is not None if chunked_prefill is None else chunked_prefill
        self.config = SchedulerConfig(preemption, token_budget, chunked)
        self.model, self.batch_invariant = model, batch_invariant
        self.allocator = BlockAllocator(num_blocks, block_size)  # validates both
        self.prefix_caching = prefix_caching
        self.host = BlockAllocator(num_blocks if host_blocks is None else host_blocks, block_size)
        param, shape = next(model.parameters()), (block_size, model.num_kv_heads, model.head_dim)
        with torch.inference_mode(False):  # the pages are written outside inference mode too
            self.caches = [
                PagedKVCache(num_blocks, *shape, dtype=param.dtype, device=param.device)
                for _ in range(model.num_layers)
            ]
            swap = preemption == "swap"
            host_caches = [
                host_cache(self.host.num_blocks, *shape, dtype=param.dtype)
                for _ in range(model.num_layers if swap else 0)
            ]
        self.runner = ModelRunner(
            model, self.caches, host_caches, decode_attention, batch_invariant
        )
        self.prefix_cache = PrefixCache(self.allocator) if prefix_caching else None
        self.last_run: EngineRun | None = None
        self._active: EngineRun | None = None  # the run holding blocks now, if any
        self._lock = threading.RLock()  # one call at a time: generate, sample, start, step
        self._content: list[int] = []  # the weights the cached K/V were computed with
        self._identity = guard.weights_identity(model)  # the weights the live run started with

    @property
    def block_size(self) -> int:
        return self.allocator.block_size

    @property
    def stats(self) -> ForwardStats:
        """Forwards, tokens, paged-kernel calls and block copies, over the engine's life."""
        return self.runner.stats

    def _scheduler(self) -> Scheduler:
        """A scheduler without K/V hooks: the engine executes its plans (``ModelRunner``)."""
        if self.prefix_cache is not None:
            return PrefixCachingScheduler(self.allocator, self.prefix_cache, self.config, self.host)
        return Scheduler(self.allocator, self.config, self.host)

    def start(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        n: int = 1,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> EngineRun:
        """Queue ``prompts`` on a new scheduler (validated first); step it with :meth:`step`.

        ``n`` samples per prompt at ``temperature`` (0: greedy), seeded by ``seed``."""
        checked = self._check_start(prompts, max_new_tokens, n, temperature, seed)
        return self._call(self._start, *checked)

    def _call(self, fn: Callable[..., T], *args: Any, live: object = None) -> T:
        """``fn(*args)`` under the lock, when no run is unfinished (or ``live`` is the one);
        on any error or interrupt the live run is aborted and the pools rebuilt, then it
        re-raises (:meth:`_recover`)."""
        with self._lock:
            if live is None:
                self._check_idle()
            elif not isinstance(live, EngineRun) or live.aborted or live is not self._active:
                raise RuntimeError("this run has ended (finished or aborted): start a new one")
            try:
                return fn(*args)
            except BaseException:
                self._recover()
                raise

    def _check_start(self, *args: object) -> tuple[list[list[int]], int, int, float, int]:
        return guard.check_start(self.model, self.allocator, self.config.token_budget, *args)

    def _check_idle(self) -> None:
        if self._active is not None:
            raise RuntimeError(
                "the engine is still running an earlier run (started with start()): step it "
                "until run.scheduler.done, or call engine.abort(run), before starting another"
            )

    def _start(
        self, checked: list[list[int]], new: int, samples: int, temp: float, seed: int
    ) -> EngineRun:
        """A new run on a new scheduler; its callers hold the lock and recover on an error."""
        if self.prefix_cache is not None:  # the only K/V that outlive a call: check once
            content = guard.weights_content(self.model)  # every in-place edit shows
            if content != self._content:
                self._reset_prefix_cache()  # none of its blocks was computed with these
                self._content = content
        self._identity = guard.weights_identity(self.model)
        scheduler = self._scheduler()
        self.runner.reset(temp)  # this call's requests only
        names = []
        for i, ids in enumerate(checked):
            name = chr(ord("A") + i) if len(checked) <= 26 else f"r{i}"
            generators = [sample_generator(seed, i, s) if temp else None for s in range(samples)]
            self.runner.track(name, generators)
            scheduler.add(Request(name, len(ids), new - 1, samples, prompt=tuple(ids)))
            names.append(name)
        self.last_run = self._active = EngineRun(scheduler, names, new)
        return self.last_run

    def reset_prefix_cache(self) -> None:
        """Forget every cached prefix block (the next calls compute their K/V again).

        The engine does it itself when the weights' content changes (module doc); call it
        after an edit its fingerprint cannot see. RuntimeError while a run is unfinished."""
        with self._lock:
            self._check_idle()
            self._reset_prefix_cache()

    def _reset_prefix_cache(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.close()
            self.prefix_cache = PrefixCache(self.allocator)

    def abort(self, run: EngineRun) -> None:
        """End ``run`` now and free every block it holds (device and host); idempotent. The
        pools and the prefix cache are rebuilt empty; the engine is ready for the next call."""
        if not isinstance(run, EngineRun):
            raise ArgumentTypeError(
                f"run must be an EngineRun (what start() returns, or engine.last_run after a "
                f"call), got {run!r}"
            )
        with self._lock:
            if run is self._active:
                self._recover()

    def _recover(self) -> None:
        """End the live run, if any; rebuild both pools and the prefix cache empty. Only that
        run held blocks, and what an interrupt left half-done goes with the old pools."""
        if self._active is not None:
            self._active.aborted = True
        self._active = None
        self.allocator = BlockAllocator(self.allocator.num_blocks, self.block_size)
        self.host = BlockAllocator(self.host.num_blocks, self.block_size)
        self.prefix_cache = PrefixCache(self.allocator) if self.prefix_caching else None

    def step(self, run: EngineRun, eos_token_id: int | None = None) -> StepRecord:
        """One step of ``run``: the scheduler's plan, executed in one forward, then updated.

        A request whose new token is ``eos_token_id`` ends there (its blocks are freed). An
        error or an interrupt inside it aborts the run (module doc)."""
        return self._call(self._advance, run, self._check_eos(eos_token_id), live=run)

    def _advance(self, run: EngineRun, eos_token_id: int | None) -> StepRecord:
        """One step, if the weights are still those the run started with."""
        if guard.weights_identity(self.model) != self._identity:
            raise RuntimeError(
                "the model's weights changed during this run: its K/V were computed with "
                "the old ones (the run is aborted; start a new one)"
            )
        record = self._step(run, eos_token_id)
        if run.scheduler.done:
            self._active = None
        return record

    def _step(self, run: EngineRun, eos_token_id: int | None) -> StepRecord:
        """Plan, execute (swaps, copies, one forward), update (tokens, EOS, frees)."""
        scheduler = run.scheduler
        plan = scheduler.schedule()
        output = execute(plan, self.runner, scheduler.groups)
        scheduler.update(plan, output, eos_token_id)
        record = StepRecord(plan, output.tokens, *self._memory(run))
        run.steps.append(record)
        return record

    def _memory(self, run: EngineRun) -> tuple[int, int, int, int]:
        """Blocks held, distinct running blocks, slots used, Orca's reserved slots."""
        running = run.scheduler.running
        tables = [t for g in running for t in g.tables]
        reserved = sum(
            g.request.num_samples * (g.request.prompt_len + run.max_new_tokens) for g in running
        )
        return (
            self.allocator.num_blocks - self.allocator.num_free,
            len({b for t in tables for b in t.blocks}),
            sum(t.num_tokens for t in tables),
            reserved,
        )

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, eos_token_id: int | None = None
    ) -> list[list[int]]:
        """Greedy: each prompt's new tokens (prompt excluded), in order: ``max_new_tokens``
        of them, or up to and including the first ``eos_token_id`` when one is given."""
        eos = self._check_eos(eos_token_id)
        return [samples[0] for samples in self._serve(prompts, max_new_tokens, 1, 0.0, 0, eos=eos)]

    def sample(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        n: int = 1,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> list[list[list[int]]]:
        """``n`` seeded samples of each prompt: ``[prompt][sample]`` -> its new tokens.

        Prompt ``i`` is one request of ``n`` samples (forked after its prefill, copy-on-write);
        ``result[i] == sample_contiguous(model, prompts[i], max_new_tokens, n, temperature,
        seed, request=i)``. ``temperature = 0``: every sample is the greedy tokens.
        """
        return self._serve(prompts, max_new_tokens, n, temperature, seed)

    def _serve(self, *args: object, eos: int | None = None) -> list[list[list[int]]]:
        """A run from start to end, and its answer read, all in one :meth:`_call`."""
        return self._call(self._whole_run, self._check_start(*args), eos)

    def _whole_run(self, args: tuple, eos: int | None) -> list[list[list[int]]]:
        run = self._start(*args)
        while not run.scheduler.done:
            self._advance(run, eos)
        groups, new = run.scheduler.groups, run.max_new_tokens
        return [[self._tokens(groups[n], s, new, eos) for s in range(args[2])] for n in run.names]

    def _check_eos(self, eos_token_id: object) -> int | None:
        if eos_token_id is None:
            return None
        return check_int(eos_token_id, "eos_token_id", 0, self.model.vocab_size - 1)

    def tokens(
        self, run: EngineRun, name: str, sample: int = 0, eos_token_id: int | None = None
    ) -> list[int]:
        """The new tokens of ``sample`` of request ``name`` so far (at most the run's
        ``max_new_tokens``, and none after the first ``eos_token_id`` if one is given)."""
        group = self._check_tokens(run, name, sample)
        eos = self._check_eos(eos_token_id)
        with self._lock:
            return self._tokens(group, sample, run.max_new_tokens, eos)

    @staticmethod
    def _tokens(group: Group, sample: int, max_new: int, eos: int | None) -> list[int]:
        prompt = group.request.prompt_len
        new = group.token_ids[sample][prompt : prompt + max_new]
        return new[: new.index(eos) + 1] if eos is not None and eos in new else new

    def _check_tokens(self, run: object, name: object, sample: object) -> Group:
        if not isinstance(run, EngineRun):
            raise ArgumentTypeError(f"run must be an EngineRun, got {type(run).__name__}")
        group = run.scheduler.groups.get(name) if isinstance(name, str) else None
        if group is None:
            raise ValueError(f"run has no request named {name!r} (it has {run.names})")
        check_int(sample, "sample", 0, group.request.num_samples - 1)
        return group
