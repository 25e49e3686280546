"""Why is my hit rate 0? Every prompt token that did not hit, classified, on a real PrefixCache.

A step's requests look the cache up as it was when the step started: the blocks a request
computes are registered (``PrefixCache.register``) after the step, once their K/V exists, so
two requests that share a prefix and arrive in the same step both compute it. Each prompt
token is then exactly one of (:data:`REASONS`):

- ``hit``: its block came from the cache;
- ``no shared prefix``: no earlier request computed this block (its chained hash is new);
- ``shorter than a block``: it lies in a partly filled block (the whole prompt, if the prompt
  is shorter than a block): only full blocks are cached;
- ``the last-token rule``: its block is full and cached, but it holds the last prompt token,
  which is always computed (its logits pick the first output token): at most
  ``(len - 1) // block_size`` blocks hit;
- ``evicted``: an earlier step computed the block, and the allocator has since handed it out
  again (the cache forgot it);
- ``computed in the same step``: an earlier request *of this step* computes the block.

A full block after the first miss misses too (hashes chain): when its own hash is still
cached it takes the first miss's reason. Invariant: per request, the counts add up to the
prompt's length; hits equal ``len(hit blocks) * block_size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, blocks_to_append
from pagedlab.memory.prefix_cache import PrefixCache

REASONS: tuple[str, ...] = (
    "hit",
    "no shared prefix",
    "shorter than a block",
    "the last-token rule",
    "evicted",
    "computed in the same step",
)


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
        self._seen: set[str] = set()  # every hash registered in an earlier step
        self.step = 0
        self.results: list[RequestMisses] = []

    def run_step(self, prompts: Sequence[tuple[str, Sequence[int]]]) -> list[RequestMisses]:
        """Admit ``prompts`` (name, token ids) as one step; each finishes after it (its blocks
        freed, their hashes kept until reuse). Atomic: OutOfBlocksError if the step's new
        blocks do not fit, with nothing changed."""
        items = [(str(name), [check_int(t, "token id") for t in ids]) for name, ids in prompts]
        if any(not ids for _, ids in items):
            raise ValueError("every prompt needs at least one token")
        size = self._alloc.block_size
        plans = []
        for _, ids in items:
            hits, _ = self.cache.lookup(ids)
            plans.append(hits)
        needed = sum(
            blocks_to_append(len(h) * size, len(ids) - len(h) * size, size)
            for (_, ids), h in zip(items, plans, strict=True)
        ) + len({b for h in plans for b in h if self._alloc.refcount(b) == 0})
        if needed > self._alloc.num_free:
            raise OutOfBlocksError(
                f"step {self.step} needs {needed} free block(s), {self._alloc.num_free} free"
            )
        cached = set(self.cache.cached_blocks().values())
        this_step: set[str] = set()
        tables, out = [], []
        for (name, ids), hits in zip(items, plans, strict=True):
            hashes = self.cache.hashes(ids)
            out.append(self._classify(name, ids, hashes, len(hits), cached, this_step))
            this_step.update(hashes)
            table = BlockTable(self._alloc)
            table.hold_prefix(hits)
            table.append_tokens(len(ids) - len(hits) * size)
            tables.append((table, ids))
        for table, ids in tables:  # the step ran: its K/V exists, its blocks are cached
            self.cache.register(table, ids)
        for table, _ in tables:
            table.free()
        self._seen |= this_step
        self.step += 1
        self.results += out
        return out

    def _classify(
        self, name: str, ids: list[int], hashes: list[str], hits: int, cached: set[str],
        this_step: set[str],
    ) -> RequestMisses:  # fmt: skip
        size, n = self._alloc.block_size, len(ids)
        counts = dict.fromkeys(REASONS, 0)
        counts["hit"] = hits * size
        full, limit = n // size, (n - 1) // size
        counts["shorter than a block"] = n - full * size
        first: str | None = None
        for i in range(hits, full):
            if i >= limit and first is None and hashes[i] in cached:
                reason = "the last-token rule"
            elif hashes[i] in this_step:
                reason = "computed in the same step"
            elif hashes[i] in cached and first is not None:
                reason = first
            elif hashes[i] in self._seen:
                reason = "evicted"
            else:
                reason = "no shared prefix"
            first = first or reason
            counts[reason] += size
        return RequestMisses(name, self.step, n, counts)

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
