"""The engine: prompts in, tokens out, through the scheduler, the pages and the model.

``Engine(model, num_blocks, block_size, ...)`` owns one device pool (a
:class:`pagedlab.BlockAllocator` and one :class:`pagedlab.PagedKVCache` per layer), a host
pool for swapping, and a :class:`pagedlab.PrefixCache`; all persist across ``generate``
calls (so a later call can hit an earlier call's prefix). ``generate(prompts,
max_new_tokens)`` queues one :class:`~pagedlab.memory.requests.Request` per prompt on a new
§4.5 :class:`~pagedlab.memory.scheduler.Scheduler` and steps it; each step's prefill chunks
and decodes run through the model in one forward (:mod:`pagedlab.engine.model_kv`).

Returns **the new tokens only**, ``max_new_tokens`` per prompt, in prompt order, exactly
what :func:`pagedlab.model.generate_contiguous` returns for each prompt alone: the check that
paging, batching, chunking, preemption (swap or recompute) and prefix caching change no
token (tests/engine/test_serving_engine.py asserts it over pools small enough to preempt).

``sample(prompts, max_new_tokens, n, temperature, seed)``: ``n`` seeded samples per prompt
(§4.4 parallel sampling), one request of ``num_samples = n`` each: the prompt is prefilled
once and forked, the samples share its blocks, a shared partly filled last block is copied on
write. ``sample(...)[i]`` equals :func:`pagedlab.model.sample_contiguous` for ``prompts[i]``
with ``request=i``: one generator per (request, sample), one draw per token
(:mod:`pagedlab.model.sampling`), so batching, preemption and block layout change no sample.

Token accounting: the prefill's last logits give the first new token; each of the
scheduler's decode steps stores one more token's K/V and yields the next, so a request is
scheduled with ``output_len = max_new_tokens - 1`` decodes (at least 1: with
``max_new_tokens = 1`` one extra decode runs and its token is dropped). The last new token's
K/V is never stored, as in vLLM.

Budget: ``token_budget=None`` means no per-step limit and whole prefills (vLLM V0's
default); an int is the step's token budget with chunked prefill (Sarathi-Serve, vLLM V1's
default) unless ``chunked_prefill=False`` (then a prefill step takes whole prompts up to
the budget, one always fits). Errors (a prompt that could never fit the pool, a token id
outside the vocabulary, too long for ``max_position_embeddings``) are ValueErrors raised
before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import host_cache
from pagedlab.checks import ArgumentTypeError, check_int
from pagedlab.engine.model_kv import ForwardStats, ModelKV
from pagedlab.engine.prefix import PrefixCachingScheduler
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.capacity import prefill_need
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Request, StepResult
from pagedlab.memory.scheduler import MODES, Scheduler
from pagedlab.model.generate import check_length, check_prompt
from pagedlab.model.llama import TinyLlama
from pagedlab.model.paged import DecodeAttention
from pagedlab.model.sampling import check_temperature, sample_generator


@dataclass(frozen=True)
class StepRecord:
    """One engine step: what the scheduler did, the tokens it produced, the memory held."""

    result: StepResult
    new_tokens: dict[str, list[int]]  # request -> tokens generated in this step (sample 0)
    blocks_held: int  # device blocks with a reference (free blocks kept by the cache: no)
    running_blocks: int  # distinct blocks in running tables (shared blocks counted once)
    slots_used: int  # positions with K/V summed over running tables
    reserved_slots: int  # Orca-style: prompt + max_new_tokens per running sample
    new_sample_tokens: dict[str, list[list[int]]] = field(default_factory=dict)  # per sample


@dataclass
class EngineRun:
    """The record of one ``generate`` call: every step, and the scheduler that ran it."""

    scheduler: Scheduler
    names: list[str]  # "A", "B", ... in prompt order
    tokens: dict[str, list[int]]  # name -> prompt + generated so far (sample 0)
    samples: dict[str, list[list[int]]] = field(default_factory=dict)  # name -> per sample
    steps: list[StepRecord] = field(default_factory=list)

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
        chunked_prefill: bool | None = None,
        decode_attention: DecodeAttention | None = None,
        host_blocks: int | None = None,
    ) -> None:
        """``decode_attention``: the decode read, default :func:`pagedlab.paged_attention`
        (pass :func:`pagedlab.reference_attention` for the plain-torch path); ``host_blocks``:
        the swap space, default as many blocks as the device pool (§4.5's bound)."""
        if not isinstance(model, TinyLlama):
            raise ArgumentTypeError(f"model must be a TinyLlama, got {type(model).__name__}")
        if preemption not in MODES:
            raise ValueError(f"preemption must be one of {MODES}, got {preemption!r}")
        if not isinstance(prefix_caching, bool):
            raise ArgumentTypeError(f"prefix_caching must be True or False, got {prefix_caching!r}")
        budget = None if token_budget is None else check_int(token_budget, "token_budget", 1)
        if chunked_prefill is None:
            chunked_prefill = budget is not None
        if not isinstance(chunked_prefill, bool):
            raise ArgumentTypeError(f"chunked_prefill must be a bool, got {chunked_prefill!r}")
        if chunked_prefill and budget is None:
            raise ValueError("chunked_prefill needs a token_budget (tokens per step), got None")
        self.model = model
        self.allocator = BlockAllocator(num_blocks, block_size)  # validates both
        self.preemption, self.token_budget = preemption, budget
        self.chunked_prefill, self.prefix_caching = chunked_prefill, prefix_caching
        host = num_blocks if host_blocks is None else check_int(host_blocks, "host_blocks", 1)
        self.host = BlockAllocator(host, block_size)
        param = next(model.parameters())
        shape = (block_size, model.num_kv_heads, model.head_dim)
        self.caches = [
            PagedKVCache(num_blocks, *shape, dtype=param.dtype, device=param.device)
            for _ in range(model.num_layers)
        ]
        host_caches = (
            [host_cache(host, *shape, dtype=param.dtype) for _ in range(model.num_layers)]
            if preemption == "swap"
            else []
        )
        self.kv = ModelKV(model, self.caches, host_caches, decode_attention)
        self.prefix_cache = PrefixCache(self.allocator) if prefix_caching else None
        self.last_run: EngineRun | None = None

    @property
    def block_size(self) -> int:
        return self.allocator.block_size

    @property
    def stats(self) -> ForwardStats:
        """Forwards, tokens, paged-kernel calls and block copies, over the engine's life."""
        return self.kv.stats

    def _scheduler(self) -> Scheduler:
        args = (self.preemption, self.token_budget, self.chunked_prefill, self.host, self.kv)
        if self.prefix_cache is not None:

            def tokens(name: str, sample: int) -> list[int]:
                return self.kv.samples[name][sample]

            return PrefixCachingScheduler(self.allocator, self.prefix_cache, tokens, *args)
        return Scheduler(self.allocator, *args)

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
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence) or not prompts:
            raise ValueError(f"prompts must be a non-empty list of token-id lists, got {prompts!r}")
        checked = [check_prompt(self.model, p, f"prompts[{i}]") for i, p in enumerate(prompts)]
        new = check_int(max_new_tokens, "max_new_tokens", minimum=1)
        samples = check_int(n, "n", minimum=1)
        temp, seed = check_temperature(temperature), check_int(seed, "seed", minimum=0)
        if self.token_budget is not None and samples > self.token_budget:
            raise ValueError(
                f"n = {samples} samples decode {samples} tokens a step, more than "
                f"token_budget = {self.token_budget}"
            )
        for i, ids in enumerate(checked):
            check_length(self.model, ids, new, f"prompts[{i}]")
            need = prefill_need(len(ids), new, samples, self.block_size)
            if need > self.allocator.num_blocks:
                what = f" x {samples} samples" if samples > 1 else ""
                raise ValueError(
                    f"prompts[{i}] ({len(ids)} tokens) + max_new_tokens {new}{what} needs "
                    f"{need} blocks of {self.block_size}, more than the pool's "
                    f"{self.allocator.num_blocks}"
                )
        if self.allocator.num_free < self.allocator.num_blocks:
            raise RuntimeError("the engine is still running an earlier generate call")
        scheduler = self._scheduler()
        self.kv.reset(temp)  # this call's requests only
        names = []
        for i, ids in enumerate(checked):
            name = chr(ord("A") + i) if len(checked) <= 26 else f"r{i}"
            generators = [sample_generator(seed, i, s) if temp else None for s in range(samples)]
            self.kv.track(name, ids, new, generators)
            scheduler.add(Request(name, len(ids), max(1, new - 1), samples))
            names.append(name)
        self._max_new = new
        self.last_run = EngineRun(scheduler, names, self.kv.tokens, samples=self.kv.samples)
        return self.last_run

    def step(self, run: EngineRun) -> StepRecord:
        """One scheduler step, its forward, and the prefix blocks it made cacheable."""
        scheduler = run.scheduler
        known = run.samples
        before = {name: [len(seq) for seq in known[name]] for name in run.names}
        result = scheduler.step()
        self.kv.flush()
        if isinstance(scheduler, PrefixCachingScheduler):
            scheduler.register()
        grown = [n for n in run.names if [len(q) for q in known[n]] != before[n]]
        per_sample = {n: [q[b:] for q, b in zip(known[n], before[n], strict=True)] for n in grown}
        new = {n: per_sample[n][0] for n in grown if per_sample[n][0]}
        tables = [t for g in scheduler.running for t in g.tables]
        used = len({b for t in tables for b in t.blocks})
        slots_used = sum(t.num_tokens for t in tables)
        reserved = sum(
            g.request.num_samples * (g.request.prompt_len + self._max_new)
            for g in scheduler.running
        )
        held = self.allocator.num_blocks - self.allocator.num_free
        record = StepRecord(result, new, held, used, slots_used, reserved, per_sample)
        run.steps.append(record)
        return record

    def generate(self, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Greedy: each prompt's ``max_new_tokens`` new tokens (prompt excluded), in order."""
        run = self._run(self.start(prompts, max_new_tokens))
        return [self.tokens(run, name) for name in run.names]

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
        run = self._run(self.start(prompts, max_new_tokens, n, temperature, seed))
        groups = run.scheduler.groups
        return [
            [self.tokens(run, name, s) for s in range(groups[name].request.num_samples)]
            for name in run.names
        ]

    def _run(self, run: EngineRun, limit: int = 100_000) -> EngineRun:
        while not run.scheduler.done:
            if len(run.steps) == limit:
                raise RuntimeError(f"not done after {limit} steps")
            self.step(run)
        return run

    def tokens(self, run: EngineRun, name: str, sample: int = 0) -> list[int]:
        """The new tokens of ``sample`` of request ``name`` so far (at most max_new_tokens)."""
        known = run.samples[name][sample]
        prompt = run.scheduler.groups[name].request.prompt_len
        return known[prompt : prompt + self._max_new]
