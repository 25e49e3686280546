"""Three admission rules on one allocator (with a prefix cache) and one trace, and the
head-of-line deadlock. Each step every running request decodes one token, then waiting
requests are admitted in order while they fit. ``"vllm"``: admit on the *known* length (prompt,
plus what it generated before a preemption); a decode short of a block preempts the newest
running request by recompute. ``"no-evict"`` (TensorRT-LLM's ``GUARANTEED_NO_EVICT``): admit
only if prompt + ``max_output`` fits beside every running request's reservation; never preempt
(``idle``: reserved, unwritten). ``"cache-aware"``: vLLM's rule, the first ``window`` waiting
requests reordered deepest cached prefix first once the pool is ``threshold`` used (vLLM 0.34's
``cache_aware_admission_*``). A request no pool can hold blocks the queue head forever;
``refuse=True`` refuses it on arrival, naming the numbers (``refused``), and the rest run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pagedlab.frontier.fleet.routing import DECODE_S, Request
from pagedlab.ground.checks import ceil_div, check_choice
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache

RULES = ("vllm", "no-evict", "cache-aware")


@dataclass
class _Job:
    request: Request
    generated: list[int] = field(default_factory=list)
    table: BlockTable | None = None

    @property
    def known(self) -> list[int]:
        return list(self.request.tokens) + self.generated


@dataclass
class AdmissionStats:
    rule: str
    steps: int = 0
    output_tokens: int = 0
    prefill_tokens: int = 0  # computed, recomputation included
    preemptions: int = 0
    idle_block_steps: int = 0  # blocks reserved but not written, summed over steps
    refused: list[str] = field(default_factory=list)
    stuck: str = ""  # why the queue stopped moving, if it did

    @property
    def throughput(self) -> float:
        """Output tokens per step."""
        return self.output_tokens / max(self.steps, 1)

    @property
    def idle_blocks(self) -> float:
        """Blocks reserved but idle, on average per step."""
        return self.idle_block_steps / max(self.steps, 1)


def run_admission(
    trace: Sequence[Request],
    rule: str,
    num_blocks: int = 160,
    block_size: int = 16,
    max_output: int = 128,
    window: int = 8,
    threshold: float = 0.5,
    refuse: bool = False,
    max_steps: int = 5_000,
) -> AdmissionStats:
    """Run ``trace`` (arrivals at ``DECODE_S`` per step) under ``rule`` (module doc)."""
    check_choice(rule, "rule", RULES)
    pool = BlockAllocator(num_blocks, block_size, free_rule="vllm-v1")
    cache = PrefixCache(pool)
    stats = AdmissionStats(rule)
    pending = sorted(trace, key=lambda r: r.arrival)
    waiting: list[_Job] = []
    running: list[_Job] = []

    def reserve(job: _Job) -> int:  # blocks no-evict keeps for the job's whole life
        return ceil_div(len(job.request.tokens) + max_output, block_size)

    def idle() -> int:  # blocks running jobs reserved but have not written yet
        return sum(reserve(j) - len(j.table.blocks) for j in running if j.table)

    def preempt(job: _Job) -> None:
        assert job.table is not None
        job.table.free()
        job.table = None
        running.remove(job)
        waiting.insert(0, job)
        stats.preemptions += 1

    while (pending or waiting or running) and stats.steps < max_steps:
        now = stats.steps * DECODE_S
        while pending and pending[0].arrival <= now:
            request = pending.pop(0)
            need = ceil_div(len(request.tokens) + 1, block_size)
            if refuse and need > num_blocks:
                stats.refused.append(
                    f"{request.name}: prompt {len(request.tokens)} tokens + 1 needs {need} "
                    f"blocks of {block_size}, the pool has {num_blocks}: refused"
                )
                continue
            waiting.append(_Job(request))
        for job in list(running):  # decode: one token each, oldest first
            if job not in running:
                continue
            assert job.table is not None
            while job.table.blocks_needed(1) > pool.num_free and rule != "no-evict":
                preempt(running[-1])
                if job not in running:
                    break
            if job in running:
                job.table.append_tokens(1)
                job.generated.append(len(job.generated) + 7)
                stats.output_tokens += 1
        for job in [j for j in running if len(j.generated) >= j.request.output_len]:
            assert job.table is not None
            job.table.free()
            running.remove(job)
        if rule == "cache-aware" and (num_blocks - pool.num_free) >= threshold * num_blocks:
            head = waiting[:window]
            cached = {id(j): len(cache.lookup(j.known)[0]) for j in head}
            waiting[: len(head)] = sorted(head, key=lambda j: -cached[id(j)])
        while waiting:  # admit in order while the head fits
            job = waiting[0]
            need = cache.blocks_to_admit(job.known)
            if rule == "no-evict":
                need = max(need, reserve(job)) + idle()
            if need > pool.num_free:
                break
            admission = cache.admit(job.known)
            job.table = admission.table
            stats.prefill_tokens += admission.computed_tokens
            running.append(waiting.pop(0))
        if rule == "no-evict":
            stats.idle_block_steps += idle()
        stats.steps += 1
        if waiting and not running and not pending:
            first = waiting[0]
            need = ceil_div(len(first.known) + 1, block_size)
            stats.stuck = (
                f"{first.request.name} needs {need} blocks of {block_size}, the pool has "
                f"{num_blocks}: it can never be admitted, and {len(waiting) - 1} request(s) "
                "wait behind it"
            )
            break
    return stats
