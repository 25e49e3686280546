"""Two engines' free-block rules, reproduced small: vLLM 0.34's ``BlockPool`` and Hugging Face
transformers 5.24's ``PagedAttentionCache``, beside pagedlab's FIFO, on one trace.

Each rule is labelled with the version read (:data:`VLLM_READ`, :data:`HF_READ`);
``pagedlab.frontier.oracles`` runs both engines' own code on random traces against these replicas:

- **vLLM 0.34.0** (``vllm/v1/core/block_pool.py``): ``BlockPool`` takes block 0 off its free
  queue as the *null block* (lines 162-163); ``free_blocks`` puts a block without a hash at the
  *front*, a hashed one at the back (lines 824-837); a request frees its last block first.
  :func:`vllm_block_pool` is pagedlab's real allocator (``free_rule="vllm-v1"``) with block 0
  held as the null block: nothing is re-implemented.
- **transformers 5.24.0** (``generation/continuous_batching/cache_allocators/cache_pool.py``):
  *sectors* after two *trash sectors* (ids 0 and 1, never allocated; padding tokens go there).
  ``allocate_sector`` pops the *last* free sector (the top id first) and makes it a tree of
  blocks; a request takes blocks from the trees in insertion order; freed blocks rejoin their
  trees, and ``try_to_free_sectors`` (called before every batch, ``scheduler.py:184``, so
  :func:`run_trace` does too) returns wholly free sectors to the end of the sector list.
  :class:`HFCachePool` is that bookkeeping for one cache allocator (no K/V, no sharing).

Invariants of :class:`HFCachePool`: every block id is free in a tree, held by one request, or
in a sector not yet allocated; a refused call changes nothing (``tests/frontier/oracles/
test_hf_oracle.py`` checks the rule against the installed transformers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable

VLLM_READ = "vLLM 0.34.0, vllm/v1/core/block_pool.py:162-163, 824-837"
HF_READ = "transformers 5.24.0, generation/continuous_batching/cache_allocators/cache_pool.py"
NULL_BLOCK = 0
"""vLLM's null block: block 0, taken off the free queue when the pool is made."""
HF_TRASH_SECTORS = 2
"""transformers' two trash sectors (ids 0 and 1), before the data sectors; never allocated."""


def vllm_block_pool(num_blocks: int, block_size: int) -> BlockAllocator:
    """pagedlab's allocator under vLLM 0.34's rule: ``free_rule="vllm-v1"``, block 0 held
    (anonymously, for good) as the null block. At least two blocks (one besides the null)."""
    num_blocks = check_int(num_blocks, "num_blocks", minimum=2)
    pool = BlockAllocator(num_blocks, block_size, free_rule="vllm-v1")
    pool.allocate()  # block 0: the null block, as BlockPool.__init__ pops it
    return pool


class HFCachePool:
    """transformers 5.24's sector pool with one full-attention cache allocator.

    ``num_sectors`` data sectors get ids ``2 .. num_sectors + 1`` (after the trash sectors);
    each holds ``blocks_per_sector`` blocks, whose ids are ``sector * blocks_per_sector +
    i``. ``allocate(request, n)`` gives a request ``n`` more blocks, as
    ``can_store_request_tokens`` then ``allocate_cache_to_request`` do.
    """

    def __init__(self, num_sectors: int, blocks_per_sector: int = 1) -> None:
        self.num_sectors = check_int(num_sectors, "num_sectors", minimum=1)
        self.blocks_per_sector = check_int(blocks_per_sector, "blocks_per_sector", minimum=1)
        first = HF_TRASH_SECTORS
        self.free_sectors: list[int] = list(range(first, first + self.num_sectors))
        self.trees: dict[int, list[int]] = {}  # sector -> its free blocks (popped from the end)
        self.tables: dict[str, list[int]] = {}

    @property
    def num_free_blocks(self) -> int:
        """Free blocks already in the allocator's trees (not counting free sectors)."""
        return sum(len(leaves) for leaves in self.trees.values())

    def sectors_needed(self, n: int) -> int:
        """New sectors ``allocate(_, n)`` would pop (``needs_new_sectors``); changes nothing."""
        n = check_int(n, "n", minimum=1)
        return max(0, ceil_div(n - self.num_free_blocks, self.blocks_per_sector))

    def allocate(self, request: str, n: int) -> list[int]:
        """``n`` more blocks for ``request``: pop whole sectors from the top if the trees hold
        too few, then take leaves tree by tree. OutOfBlocksError (nothing changed) if the free
        sectors cannot cover it. Returns the new blocks, in the order taken."""
        if not isinstance(request, str) or not request:
            raise TypeError(f"request must be a non-empty string id, got {request!r}")
        sectors = self.sectors_needed(n)
        if sectors > len(self.free_sectors):
            raise OutOfBlocksError(
                f"{n} block(s) for {request!r} need {sectors} new sector(s), "
                f"{len(self.free_sectors)} free"
            )
        for _ in range(sectors):
            sector = self.free_sectors.pop()
            base = sector * self.blocks_per_sector  # leaves popped from the end: lowest first
            self.trees[sector] = list(range(base + self.blocks_per_sector - 1, base - 1, -1))
        taken: list[int] = []
        for sector in list(self.trees):
            leaves = self.trees[sector]
            k = min(len(leaves), n - len(taken))
            taken += leaves[len(leaves) - k :]
            del leaves[len(leaves) - k :]
            if not leaves:
                del self.trees[sector]
            if len(taken) == n:
                break
        self.tables.setdefault(request, []).extend(taken)
        return taken

    def free(self, request: str) -> list[int]:
        """Give back every block of ``request`` to its sector's tree, in table order."""
        if request not in self.tables:
            raise ValueError(f"request {request!r} holds no blocks (known: {sorted(self.tables)})")
        blocks = self.tables.pop(request)
        for block in blocks:
            self.trees.setdefault(block // self.blocks_per_sector, []).append(block)
        return blocks

    def try_to_free_sectors(self) -> list[int]:
        """Return every sector whose blocks are all free to the end of the sector list."""
        full = [s for s, leaves in self.trees.items() if len(leaves) == self.blocks_per_sector]
        for sector in full:
            del self.trees[sector]
            self.free_sectors.append(sector)
        return full


@dataclass(frozen=True)
class TraceResult:
    """Each request's blocks after one trace under one rule, and what the rule is."""

    rule: str
    read: str
    blocks: dict[str, list[int]]


Op = tuple[str, str, int]
THE_TRACE: tuple[Op, ...] = (("take", "A", 5), ("take", "B", 9), ("free", "A", 0), ("take", "C", 7))
"""Block size 4, no prefix caching: A takes 5 tokens, B 9, A is freed, C takes 7."""


def run_trace(
    rule: str,
    trace: Sequence[Op] = THE_TRACE,
    num_blocks: int = 8,
    block_size: int = 4,
) -> TraceResult:
    """Replay ``trace`` under ``rule`` (``"pagedlab"``: FIFO, ``"vllm"`` or ``"hf"``), each
    ``take`` a batch of its own; ``num_blocks`` includes vLLM's null block, or counts Hugging
    Face's one-block data sectors. A request's list is its blocks when it last held any."""
    if rule not in ("pagedlab", "vllm", "hf"):
        raise ValueError(f"rule must be 'pagedlab', 'vllm' or 'hf', got {rule!r}")
    block_size = check_int(block_size, "block_size", minimum=1)
    seen: dict[str, list[int]] = {}
    if rule == "hf":
        pool = HFCachePool(num_blocks)
        for op, name, tokens in trace:
            if op == "free":
                pool.free(name)
                continue
            pool.try_to_free_sectors()
            seen[name] = pool.allocate(
                name, ceil_div(check_int(tokens, "tokens", minimum=1), block_size)
            )
        return TraceResult("Hugging Face", HF_READ, seen)
    alloc = (
        vllm_block_pool(num_blocks, block_size) if rule == "vllm"
        else BlockAllocator(num_blocks, block_size)
    )  # fmt: skip
    tables: dict[str, BlockTable] = {}
    for op, name, tokens in trace:
        if op == "free":
            tables.pop(name).free()
            continue
        table = tables.setdefault(name, BlockTable(alloc))
        table.append_tokens(tokens)
        seen[name] = table.blocks
    if rule == "vllm":
        return TraceResult("vLLM", VLLM_READ, seen)
    return TraceResult("pagedlab FIFO", "pagedlab.memory.allocator", seen)
