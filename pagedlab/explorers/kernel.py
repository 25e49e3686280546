"""KernelExplorer: sliders for a batch in a shuffled pool -> does the kernel still agree?

Notebook 4 asks whether following block tables page by page computes exactly the attention
a contiguous layout would. This module holds what that notebook needs besides its teaching
cells: :func:`shuffled_batch` (random fp16 q/K/V for a few sequences, written page by page
into a pool whose free list is shuffled, so no sequence's pages are adjacent),
:func:`dense_attention` (the contiguous-layout checkpoint the notebook prints), and
:class:`KernelExplorer`, whose readout (:func:`kernel_report`) rebuilds a batch for every
slider setting and compares three results per sequence.

Invariant checked on every setting: the dense checkpoint (fp32), ``reference_attention``
and the Triton ``paged_attention`` agree within fp16 rounding (2e-3): the order of pages in
memory is not an input to attention, only the table is. Errors are printed as powers of ten
so the readout is the same text on every run. Nothing is displayed from a callback: the
readout's ``.value`` is assigned, so strict nbval stays exact.

Not handled: prefill, dtypes other than those ``PagedKVCache`` stores, more than one query
position per sequence.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import ipywidgets as widgets
import torch

from pagedlab.attention import backend
from pagedlab.attention.batch import Batch
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import paged_attention, reference_attention
from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable

TOLERANCE = 2e-3  # about two fp16 steps near 1: the outputs are rounded to fp16 at the end
HEAD_DIMS = (1, 8, 12, 16, 64)  # the explorer's head_dim choices (12: not a power of two)
MAX_SEQS = 5
MAX_BLOCK_SIZE = 16


def shuffled_batch(
    lengths: Sequence[int],
    block_size: int = 4,
    heads: int = 8,
    kv_heads: int = 2,
    head_dim: int = 16,
    seed: int = 0,
    dtype: torch.dtype = torch.float16,
) -> Batch:
    """Random q/K/V for sequences of ``lengths``; the pool hands out blocks in random order.

    The pool has two blocks more than the batch needs (they stay free). Each sequence's K/V
    goes to its slots through ``PagedKVCache.write`` (the reshape-and-cache kernel).
    """
    lengths = [check_int(n, "length", minimum=1) for n in lengths]
    if not lengths:
        raise ValueError("lengths must name at least one sequence, got []")
    block_size = check_int(block_size, "block_size", minimum=1)
    heads = check_int(heads, "heads", minimum=1)
    kv_heads = check_int(kv_heads, "kv_heads", minimum=1)
    head_dim = check_int(head_dim, "head_dim", minimum=1)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    device = backend.device()
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-n // block_size) for n in lengths) + 2
    shuffled = torch.randperm(num_blocks, generator=gen).tolist()
    pool = BlockAllocator(num_blocks, block_size, free_order=shuffled)
    cache = PagedKVCache(num_blocks, block_size, kv_heads, head_dim, dtype=dtype, device=device)
    tables = []
    for n in lengths:
        table = BlockTable(pool)
        table.append_tokens(n)
        k, v = torch.randn(2, n, kv_heads, head_dim, generator=gen).to(device, dtype)
        cache.write(table.slot_mapping(), k, v)  # token i -> slot_mapping()[i]
        tables.append(table)
    query = torch.randn(len(lengths), heads, head_dim, generator=gen).to(device, dtype)
    return Batch(pool, tables, cache, query)


def _check_dense_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    ranks_ok = q.dim() == 2 and k.dim() == 3 and k.shape == v.shape and k.shape[1] > 0
    if not ranks_ok or q.shape[0] % k.shape[1] or q.shape[1] != k.shape[2]:
        raise ValueError(
            f"dense_attention needs q [heads, dim], k and v [positions, kv_heads, dim] with "
            f"heads a multiple of kv_heads; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}"
        )


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q [heads, dim]; k, v [positions, kv_heads, dim] in logical order. fp32 math."""
    _check_dense_shapes(q, k, v)
    group = q.shape[0] // k.shape[1]  # query head h reads kv head h // group
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,thd->ht", q.float(), k) / math.sqrt(q.shape[-1])
    return torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), v)


def error_bound(err: float) -> str:
    """An error as a power-of-ten bound: stable text from run to run."""
    return "0 (exact)" if err == 0 else f"< 1e{math.ceil(math.log10(err))}"


def kernel_report(num_seqs: int, block_size: int, head_dim: int) -> str:
    """The readout: per sequence its pages and the two errors, then ✓ or ✗, as HTML.

    Sequences have 5, 12, 19, ... tokens; the pool is shuffled with ``seed=num_seqs``.
    """
    num_seqs = check_int(num_seqs, "num_seqs", minimum=1)
    batch = shuffled_batch(
        [5 + 7 * s for s in range(num_seqs)], block_size, head_dim=head_dim, seed=num_seqs
    )
    cache, tables = batch.cache, batch.tables
    args = (batch.query, cache.key, cache.value, batch.block_tables, batch.seq_lens)
    paged, reference = paged_attention(*args).float(), reference_attention(*args).float()
    rows = ["seq  tokens  pages  |paged-reference|  |reference-dense|"]
    worst = 0.0
    for s, t in enumerate(tables):
        dense = dense_attention(batch.query[s], *cache.gather(t.blocks, t.num_tokens))
        e_paged = (paged[s] - reference[s]).abs().max().item()
        e_dense = (reference[s] - dense).abs().max().item()
        worst = max(worst, e_paged, e_dense)
        rows.append(
            f"{s:3d}  {t.num_tokens:6d}  {len(t.blocks):5d}  "
            f"{error_bound(e_paged):>17}  {error_bound(e_dense):>17}"
        )
    rows.append(f"{'✓' if worst < TOLERANCE else '✗'} all within fp16 rounding (2e-3)")
    return f"<pre>{html.escape(chr(10).join(rows))}</pre>"


class KernelExplorer(widgets.VBox):
    """Sliders for sequences, block size and head_dim; the readout of :func:`kernel_report`."""

    def __init__(self, num_seqs: int = 3, block_size: int = 4, head_dim: int = 16) -> None:
        num_seqs = check_int(num_seqs, "num_seqs", minimum=1, maximum=MAX_SEQS)
        block_size = check_int(block_size, "block_size", minimum=1, maximum=MAX_BLOCK_SIZE)
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
        style = {"description_width": "90px"}
        self.seqs = widgets.IntSlider(num_seqs, 1, MAX_SEQS, description="sequences", style=style)
        self.block_size = widgets.IntSlider(
            block_size, 1, MAX_BLOCK_SIZE, description="block size", style=style
        )
        self.head_dim = widgets.SelectionSlider(
            options=HEAD_DIMS, value=head_dim, description="head_dim", style=style
        )
        self.readout = widgets.HTML()
        self.readout.add_class("pagedlab-readout")
        super().__init__([self.seqs, self.block_size, self.head_dim, self.readout])
        for slider in (self.seqs, self.block_size, self.head_dim):
            slider.observe(self._update, names="value")
        self._update()

    def _update(self, _change: object = None) -> None:
        with torch.no_grad():
            self.readout.value = kernel_report(
                self.seqs.value, self.block_size.value, self.head_dim.value
            )
