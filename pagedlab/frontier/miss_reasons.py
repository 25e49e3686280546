"""Why is my hit rate 0? Every prompt token that did not hit, classified, on a real PrefixCache.

Requests are admitted one after another, each one's full blocks cached when it is *scheduled*
(``KVCacheManager.allocate_slots``, ``vllm/v1/core/kv_cache_manager.py:641-647`` in 0.34.0), so
a later request of the same step hits them; at the end of a step every request finishes (its
blocks freed, their hashes kept until reuse). Each prompt token is one of :data:`REASONS`:
``hit``; ``no shared prefix`` (its chained hash is new); ``shorter than a block`` (in a partly
filled block: only full blocks are cached); ``the last-token rule`` (its full, cached block
holds the last prompt token, always computed: at most ``(len - 1) // block_size`` blocks hit);
``evicted`` (computed before, but the allocator has since handed the block out again). A full
block after the first miss misses too (hashes chain) and, if its own hash is still cached,
takes the first miss's reason. Invariant: per request the counts add up to the prompt's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.ground.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache

REASONS: tuple[str, ...] = (
    "hit", "no shared prefix", "shorter than a block", "the last-token rule", "evicted"
)  # fmt: skip


@dataclass(frozen=True)
class RequestMisses:
    """One request's prompt tokens, by reason (every reason present, 0 when none)."""

    name: str
    step: int
    tokens: int
    counts: dict[str, int]


class MissClassifier:
    """A real :class:`PrefixCache` over ``allocator``, fed step by step; see the module."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self.cache = PrefixCache(allocator)
        self._alloc = allocator
        self._seen: set[str] = set()  # every hash an earlier request computed or hit
        self.step = 0
        self.results: list[RequestMisses] = []

    def run_step(self, prompts: Sequence[tuple[str, Sequence[int]]]) -> list[RequestMisses]:
        """Admit ``prompts`` (name, token ids) in order as one step, then free them all.
        OutOfBlocksError if a prompt does not fit: the prompts before it were admitted (and
        are freed), that one and the rest were not; ValueError for an empty prompt first."""
        items = [(str(name), [check_int(t, "token id") for t in ids]) for name, ids in prompts]
        if any(not ids for _, ids in items):
            raise ValueError("every prompt needs at least one token")
        tables, out = [], []
        try:
            for name, ids in items:
                hashes, cached = self.cache.hashes(ids), set(self.cache.cached_blocks().values())
                admission = self.cache.admit(ids)  # cached now: a later prompt may hit it
                tables.append(admission.table)
                out.append(self._classify(name, ids, hashes, len(admission.hit_blocks), cached))
                self._seen.update(hashes)
        finally:
            for table in tables:
                table.free()
            self.step += 1
            self.results += out
        return out

    def _classify(
        self, name: str, ids: list[int], hashes: list[str], hits: int, cached: set[str]
    ) -> RequestMisses:
        size, n = self._alloc.block_size, len(ids)
        counts = dict.fromkeys(REASONS, 0)
        counts["hit"] = hits * size
        full, limit = n // size, (n - 1) // size
        counts["shorter than a block"] = n - full * size
        first: str | None = None
        for i in range(hits, full):
            if i >= limit and first is None and hashes[i] in cached:
                reason = "the last-token rule"
            elif hashes[i] in cached and first is not None:
                reason = first
            elif hashes[i] in self._seen:
                reason = "evicted"
            else:
                reason = "no shared prefix"
            first = first or reason
            counts[reason] += size
        return RequestMisses(name, self.step, n, counts)

    @property
    def seen(self) -> frozenset[str]:
        """Every block hash an earlier request computed or hit (what ``evicted`` asks)."""
        return frozenset(self._seen)

    def totals(self) -> dict[str, int]:
        """Tokens by reason over every request so far."""
        total = dict.fromkeys(REASONS, 0)
        for r in self.results:
            for k, v in r.counts.items():
                total[k] += v
        return total

    @property
    def hit_rate(self) -> float:
        t = self.totals()
        return t["hit"] / max(1, sum(t.values()))
