"""Prefix caching across requests, on top of the §4.5 Scheduler.

:class:`PrefixCachingScheduler` changes one moment, admission (``_start``): it looks the
group's tokens (prompt + generated for a one-sample recompute; the prompt only for a group of
samples, forked after it) up in a :class:`pagedlab.PrefixCache`, starts the table on the hit
blocks (``BlockTable.hold_prefix``) and counts those tokens as prefilled. FCFS, preemption,
chunking and the budget are the scheduler's own; the admission checks still count the whole
prefill's blocks, so a hit never changes who is admitted when.

Blocks become hittable when they are **scheduled**, as vLLM's ``allocate_slots`` caches full
blocks at allocation: a request admitted later in the same step hits them, and reads what the
writer's piece computes (the forward stores every piece's K/V before any piece reads). A piece
taken back out of the plan forgets the blocks it was to fill. The cache's rules hold: full
blocks only, the last token always computed, freed blocks findable until handed out again.
"""

from __future__ import annotations

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, StepPlan, Work
from pagedlab.memory.scheduler import KVHooks, Scheduler, SchedulerConfig


class PrefixCachingScheduler(Scheduler):
    """A Scheduler whose admitted groups start on their cached prefix blocks.

    Its requests carry their prompt's token ids (``Request.prompt``): the cache is keyed by them.
    """

    def __init__(
        self,
        allocator: BlockAllocator,
        cache: PrefixCache,
        config: SchedulerConfig = SchedulerConfig(),
        host: BlockAllocator | None = None,
        kv: KVHooks | None = None,
    ) -> None:
        if not isinstance(cache, PrefixCache) or cache.allocator is not allocator:
            raise ValueError("cache must be a PrefixCache watching the scheduler's allocator")
        super().__init__(allocator, config, host, kv)
        self.cache = cache
        self.hit_tokens = 0  # tokens whose K/V came from the cache, over every admission

    def _start(self, group: Group, out: StepPlan) -> None:
        super()._start(group, out)
        r = group.request  # samples fork after the prompt: a hit stays inside it
        known = group.token_ids[0][: group.work if r.num_samples == 1 else r.prompt_len]
        hits, _ = self.cache.lookup(known)
        if hits:
            group.tables[0].hold_prefix(hits)
            group.prefilled = len(hits) * self.block_size
            group.recompute_left = max(0, group.recompute_left - group.prefilled)
            self.hit_tokens += group.prefilled

    def _scheduled(self, group: Group, sample: int, table: BlockTable, count: int) -> None:
        """Register ``table``'s full blocks if the plan just filled one (module doc)."""
        size, n = self.block_size, table.num_tokens
        if n // size > (n - count) // size:
            known = group.token_ids[sample][:n]
            if len(known) == n:
                self.cache.register(table, known)

    def _dropped(self, group: Group, work: list[Work]) -> None:
        for block in {b for w in work for b in w.written_blocks(self.block_size)}:
            self.cache.forget(block)
