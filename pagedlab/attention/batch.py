"""A decode batch as a serving engine hands it to the GPU (a mixed step: ``mixed_step``).

An engine packs its block tables into a padded ``int32 [num_seqs, max_blocks]`` table,
``seq_lens`` and a *slot mapping* (where each new token's K/V goes). This module builds such a
batch from the real allocator and tables, sequences growing in lockstep so their blocks
interleave. Invariant: ``batch_slot_mapping`` equals the concatenation of every table's
``slot_mapping()``. ``dense_attention`` is the contiguous checkpoint paging must agree with.
"""

from __future__ import annotations

import math
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
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable


@dataclass
class Batch:
    """Sequences in one pool with their K/V written, and one query each; ``keys[s]`` and
    ``values[s]`` are K and V as produced, in logical order (a dense checkpoint needs no table)."""

    allocator: BlockAllocator
    tables: list[BlockTable]
    cache: PagedKVCache
    query: torch.Tensor  # [num_seqs, num_heads, head_dim]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @property
    def block_tables(self) -> torch.Tensor:
        return block_tables_tensor([t.blocks for t in self.tables], device=self.cache.device)

    @property
    def seq_lens(self) -> torch.Tensor:
        lens = [t.num_tokens for t in self.tables]
        return torch.tensor(lens, dtype=torch.int32, device=self.cache.device)


def grow_in_turn(pool: BlockAllocator, lengths: Sequence[int]) -> list[BlockTable]:
    """A table of ``pool`` per length, grown one token a round in turn, as a running batch
    grows: their blocks interleave."""
    tables = [BlockTable(pool) for _ in lengths]
    for step in range(max(lengths)):
        for table, length in zip(tables, lengths, strict=True):
            if length > step:
                table.append_tokens()
    return tables


def grow_batch(
    lengths: Sequence[int],
    block_size: int,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 8,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    shuffled: bool = False,
    spare_blocks: int = 0,
) -> Batch:
    """Grow ``len(lengths)`` sequences one token per step, then write random K/V for them, in a
    pool of the blocks needed plus ``spare_blocks``, ascending or ``shuffled`` by ``seed``."""
    block_size = check_int(block_size, "block_size", minimum=1)
    lengths = [check_int(n, "length", minimum=1) for n in lengths]
    if not lengths:
        raise ValueError("lengths must name at least one sequence, got []")
    num_heads = check_int(num_heads, "num_heads", minimum=1)
    num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1)
    head_dim = check_int(head_dim, "head_dim", minimum=1)
    spare_blocks = check_int(spare_blocks, "spare_blocks", minimum=0)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
        )
    num_blocks = sum(ceil_div(n, block_size) for n in lengths) + spare_blocks
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(num_blocks, generator=generator).tolist() if shuffled else None
    allocator = BlockAllocator(num_blocks, block_size, free_order=order)
    cache = PagedKVCache(num_blocks, block_size, num_kv_heads, head_dim, dtype=dtype)
    tables = grow_in_turn(allocator, lengths)
    slots = [slot for table in tables for slot in table.slot_mapping()]
    k, v = torch.randn(2, len(slots), num_kv_heads, head_dim, generator=generator)
    k, v = k.to(cache.device, dtype), v.to(cache.device, dtype)
    cache.write(slots, k, v)
    query = torch.randn(len(lengths), num_heads, head_dim, generator=generator)
    query = query.to(cache.device, dtype)
    return Batch(allocator, tables, cache, query, list(k.split(lengths)), list(v.split(lengths)))


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One sequence's attention on a contiguous layout: the checkpoint paging must equal.

    q [heads, dim]; k, v [positions, kv_heads, dim] in logical order (e.g. a ``Batch``'s
    ``keys[s]`` and ``values[s]``, which never went through a block table); query head h
    reads kv head ``h // (heads // kv_heads)``.
    fp32 math; returns [heads, dim] in fp32.
    """
    ranks_ok = q.dim() == 2 and k.dim() == 3 and k.shape == v.shape and k.shape[1] > 0
    if not ranks_ok or q.shape[0] % k.shape[1] or q.shape[1] != k.shape[2]:
        raise ValueError(
            f"dense_attention needs q [heads, dim], k and v [positions, kv_heads, dim] with "
            f"heads a multiple of kv_heads; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}"
        )
    group = q.shape[0] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,thd->ht", q.float(), k) / math.sqrt(q.shape[-1])
    return torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), v)


def batch_slot_mapping(
    block_tables: torch.Tensor, seq_lens: torch.Tensor, block_size: int
) -> torch.Tensor:
    """Flat slot of every position of every sequence, sequence after sequence: one gather,
    ``block_tables[s, p // block_size] * block_size + p % block_size``; inputs validated."""
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
