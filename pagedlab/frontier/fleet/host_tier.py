"""A host tier under the device prefix cache: where an evicted block's K/V goes, and what a
hit from it costs.

:class:`TieredCache`: a device :class:`PrefixCache` over a real :class:`BlockAllocator`
(``"vllm-v1"``) and a host pool (a second allocator, LRU) keyed by the same chained hashes.
Small K/V tensors ride along (``PagedKVCache`` both sides, ``copy_blocks`` between), each
position's K/V a fixed function of token and position, so every request checks that what it
reads is what was computed. ``write="through"`` copies a block to the host when it is computed
(vLLM 0.34's eager CPU offload); ``"back"`` when the device cache evicts it (the prefix cache's
``listen``). ``evict_first=True``: a freed block the host holds joins the *front* of the
device's free queue (``BlockTable.free(evict_first)``, vLLM 0.34's
``BlockPool.free_blocks(evict_first=True)``); the cache still finds it until it is reused.
A prompt's hittable blocks come from the device first, then the host, the rest are computed:
``sources`` counts the tokens of each.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from itertools import takewhile

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import copy_blocks
from pagedlab.ground.checks import check_choice
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache

WRITES = ("through", "back")


def kv_of(tokens: Sequence[int], first: int, heads: int, dim: int) -> torch.Tensor:
    """The K (and V) this model stores for ``tokens`` at positions ``first ..``."""
    ids = torch.tensor(list(tokens), dtype=torch.float32)
    pos = torch.arange(first, first + len(ids), dtype=torch.float32)
    base = ids[:, None, None] + pos[:, None, None] / 1024
    return base + torch.arange(heads * dim, dtype=torch.float32).view(1, heads, dim) / 64


class TieredCache:
    """Device blocks over host blocks (module doc); :meth:`serve` one prompt at a time."""

    def __init__(
        self,
        device_blocks: int,
        host_blocks: int,
        block_size: int,
        write: str = "back",
        evict_first: bool = False,
        heads: int = 1,
        dim: int = 4,
    ) -> None:
        check_choice(write, "write", WRITES)
        self.write, self.evict_first, self.heads, self.dim = write, evict_first, heads, dim
        self.device = BlockAllocator(device_blocks, block_size, free_rule="vllm-v1")
        self.cache = PrefixCache(self.device)
        self.host = BlockAllocator(host_blocks, block_size)
        self.on_host: OrderedDict[str, int] = OrderedDict()  # hash -> host block, LRU first
        self.kv = PagedKVCache(device_blocks, block_size, heads, dim, torch.float32, device="cpu")
        self.host_kv = PagedKVCache(host_blocks, block_size, heads, dim, torch.float32, "cpu")
        self.sources: Counter[str] = Counter()  # prompt tokens by where their K/V came from
        self.offloads = self.loads = self.checked = 0
        self._stored: list[tuple[int, str]] = []  # (device block, hash) cached this request
        self.cache.listen(self._changed)

    def _changed(self, kind: str, block: int, block_hash: str) -> None:
        """A block cached: remembered for write-through. A block evicted as the device hands
        it out (held again): its K/V, still in it, written back if the host lacks it; the
        free blocks forgotten with it (computed after it) are dropped, as on the device."""
        if kind == "stored":
            self._stored.append((block, block_hash))
        elif self.write == "back" and self.device.refcount(block):
            self._offload(block, block_hash)

    def _offload(self, block: int, block_hash: str) -> None:
        if block_hash in self.on_host:
            return
        if self.host.num_free == 0:  # the host's least recently used block goes
            self.host.free(self.on_host.popitem(last=False)[1])
        target = self.host.allocate()
        copy_blocks(self.kv, self.host_kv, [(block, target)])
        self.on_host[block_hash] = target
        self.offloads += 1

    def serve(self, tokens: Sequence[int]) -> tuple[int, int, int]:
        """Admit ``tokens``, load host hits, compute the rest, check the K/V, free the table.
        Returns the prompt's (device, host, computed) tokens."""
        size = self.device.block_size
        chain = self.cache.hashes(tokens)[: (len(tokens) - 1) // size]
        hits, _ = self.cache.lookup(tokens)
        on_host = list(takewhile(self.on_host.__contains__, chain[len(hits) :]))  # a run
        for block_hash in on_host:  # most recently used: write-backs below evict others
            self.on_host.move_to_end(block_hash)
        self._stored.clear()
        table = self.cache.admit(tokens).table  # evictions write back here (_changed)
        loaded = table.blocks[len(hits) : len(hits) + len(on_host)]
        pairs = [(self.on_host[h], b) for h, b in zip(on_host, loaded, strict=True)]
        copy_blocks(self.host_kv, self.kv, pairs)
        start = (len(hits) + len(on_host)) * size
        slots = table.slot_mapping()[start:]
        new = kv_of(tokens[start:], start, self.heads, self.dim)
        self.kv.write(slots, new, -new)
        k, v = self.kv.gather(table.blocks, len(tokens))
        expected = kv_of(tokens, 0, self.heads, self.dim)
        if not (torch.equal(k, expected) and torch.equal(v, -expected)):
            raise AssertionError("the K/V read back is not what was computed")
        self.checked += len(loaded)
        self.loads += len(loaded)
        if self.write == "through":  # every block computed now goes to the host too
            for b, block_hash in self._stored:
                if block_hash in chain and block_hash not in on_host:
                    self._offload(b, block_hash)
        cached = self.cache.cached_blocks()
        table.free([b for b in table.blocks if cached.get(b) in self.on_host and self.evict_first])
        counts = (len(hits) * size, len(on_host) * size, len(tokens) - start)
        self.sources.update(dict(zip(("device", "host", "miss"), counts, strict=True)))
        return counts
