"""A decode batch as a serving engine hands it to the GPU.

An engine such as vLLM keeps block tables on the CPU and, before each step, packs them into
tensors: a padded ``int32 [num_seqs, max_blocks]`` table (``-1`` past each sequence's last
block), ``seq_lens``, and a *slot mapping* that tells the cache-write kernel where each new
token's K/V goes. This module builds such a batch from the real allocator and tables and
computes the slot mapping the way a GPU worker does, vectorised over the whole batch.

Invariants: ``batch_slot_mapping`` equals the concatenation of every table's
``slot_mapping()``; sequences grow in lockstep (one token each per step, as in decode), so
their blocks interleave in the pool the way they do in a running engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor
from pagedlab.attention.validate import (
    INT32_MAX,
    check_index_shapes,
    check_same_device,
    check_seq_lens_and_tables,
    require_tensor,
)
from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable


@dataclass
class Batch:
    """Sequences in one pool with their K/V written, and one query each."""

    allocator: BlockAllocator
    tables: list[BlockTable]
    cache: PagedKVCache
    query: torch.Tensor  # [num_seqs, num_heads, head_dim]

    @property
    def block_tables(self) -> torch.Tensor:
        return block_tables_tensor([t.blocks for t in self.tables], device=self.cache.device)

    @property
    def seq_lens(self) -> torch.Tensor:
        lens = [t.num_tokens for t in self.tables]
        return torch.tensor(lens, dtype=torch.int32, device=self.cache.device)


def grow_batch(
    lengths: Sequence[int],
    block_size: int,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 8,
    seed: int = 0,
) -> Batch:
    """Grow ``len(lengths)`` sequences one token per step, then write random K/V for them.

    The pool holds exactly the blocks the batch needs, so nothing is left over.
    """
    block_size = check_int(block_size, "block_size", minimum=1)
    lengths = [check_int(n, "length", minimum=1) for n in lengths]
    if not lengths:
        raise ValueError("lengths must name at least one sequence, got []")
    num_blocks = sum(-(-n // block_size) for n in lengths)
    allocator = BlockAllocator(num_blocks, block_size)
    cache = PagedKVCache(num_blocks, block_size, num_kv_heads, head_dim)
    generator = torch.Generator().manual_seed(seed)
    tables = [BlockTable(allocator) for _ in lengths]
    for step in range(max(lengths)):
        for table, length in zip(tables, lengths, strict=True):
            if length > step:
                table.append_tokens()
    slots = [slot for table in tables for slot in table.slot_mapping()]
    k, v = torch.randn(2, len(slots), num_kv_heads, head_dim, generator=generator)
    cache.write(slots, k.to(cache.device), v.to(cache.device))  # one reshape-and-cache launch
    query = torch.randn(len(lengths), num_heads, head_dim, generator=generator)
    return Batch(allocator, tables, cache, query.to(cache.device))


def batch_slot_mapping(
    block_tables: torch.Tensor, seq_lens: torch.Tensor, block_size: int
) -> torch.Tensor:
    """Flat slot of every position of every sequence, sequence after sequence.

    ``slot = block_tables[s, p // block_size] * block_size + p % block_size`` for
    ``0 <= p < seq_lens[s]``: one gather over the whole batch, no Python loop. The inputs
    follow the attention contract (int32, ``seq_len >= 1``, used entries are block ids >= 0;
    checked by :mod:`pagedlab.attention.validate`, errors name the value).
    """
    bt = require_tensor("block_tables", block_tables)
    sl = require_tensor("seq_lens", seq_lens)
    check_index_shapes(bt, sl, int(bt.shape[0]) if bt.dim() else -1)
    check_same_device("block_tables", bt, seq_lens=sl)
    block_size = check_int(block_size, "block_size", minimum=1)
    if check_seq_lens_and_tables(bt, sl, INT32_MAX, block_size) == 0:
        return torch.empty(0, dtype=torch.int64, device=bt.device)
    positions = torch.arange(int(seq_lens.max()), device=block_tables.device)
    used = positions[None, :] < seq_lens[:, None]  # [num_seqs, longest]
    blocks = block_tables.long().gather(1, (positions // block_size).expand_as(used).clone())
    slots = blocks * block_size + positions % block_size
    return slots[used]
