"""Prefix caching across requests, on top of the §4.5 Scheduler.

The :class:`~pagedlab.memory.scheduler.Scheduler` starts every admitted group on an empty
table and prefills all of its ``work`` tokens; it has no notion of K/V found again by
content. :class:`PrefixCachingScheduler` adds exactly that, at the one moment it matters,
admission (it overrides the scheduler's ``_start``): it looks the group's tokens (prompt +
generated, for a recompute of one sample; the prompt only for a group of samples, whose
samples are forked after the prompt) up in a :class:`pagedlab.PrefixCache`, starts the table on the
hit blocks (``BlockTable.hold_prefix``: shared if held, taken back off the free list if
not), and counts those tokens as already prefilled. Everything else, FCFS, preemption,
chunking and the budget, is the scheduler's own. The admission checks still count the whole
prefill's blocks, so a hit never makes a group fit that would not fit without it (the
cache saves compute and memory after admission, never changes who is admitted when).

The engine registers each running table's full blocks after every step (their K/V are in
the pages then), so later requests, and a recompute of the same request, can hit them. The
cache's rules hold: full blocks only, the last token always computed (at most
``(len - 1) // block_size`` blocks hit), freed blocks stay findable until handed out again.
"""

from __future__ import annotations

from collections.abc import Callable

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, StepResult
from pagedlab.memory.scheduler import KVHooks, Scheduler


class PrefixCachingScheduler(Scheduler):
    """A Scheduler whose admitted groups start on their cached prefix blocks."""

    def __init__(
        self,
        allocator: BlockAllocator,
        cache: PrefixCache,
        tokens: Callable[[str, int], list[int]],
        mode: str = "recompute",
        token_budget: int | None = None,
        chunked_prefill: bool = False,
        host: BlockAllocator | None = None,
        kv: KVHooks | None = None,
    ) -> None:
        super().__init__(allocator, mode, token_budget, chunked_prefill, host, kv)
        if cache.allocator is not allocator:
            raise ValueError("the prefix cache must watch the scheduler's device allocator")
        self.cache, self._tokens = cache, tokens
        self.hit_tokens = 0  # tokens whose K/V came from the cache, over every admission

    def _start(self, group: Group, out: StepResult) -> None:
        super()._start(group, out)
        r = group.request  # samples fork after the prompt: a hit stays inside it
        known = self._tokens(group.name, 0)[: group.work if r.num_samples == 1 else r.prompt_len]
        hits, _ = self.cache.lookup(known)
        if hits:
            group.tables[0].hold_prefix(hits)
            group.prefilled = len(hits) * self.block_size
            group.recompute_left = max(0, group.recompute_left - group.prefilled)
            self.hit_tokens += group.prefilled

    def register(self) -> int:
        """Cache the full blocks of every running table (K/V written); returns blocks added."""
        added = 0
        for group in self.running:
            for sample, table in enumerate(group.tables):
                known = self._tokens(group.name, sample)[: table.num_tokens]
                added += self.cache.register(table, known)
        return added
