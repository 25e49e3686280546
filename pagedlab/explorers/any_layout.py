"""Notebook 03's plumbing: one sequence in a pool of junk, the kernel on it, the moved max.

``place(pool, keys)`` gives a new :class:`BlockTable` of ``pool`` one token per key, written
into a fresh :func:`junk_cache` whose every slot holds junk (``JUNK_KEY`` would win any
softmax, ``JUNK_VALUE`` pull the output far off), so a single stray read shows; position
``p`` has value ``p + 1``. ``moved_max_widget`` moves key ``BIG`` and checks the replayed
steps end on one softmax. Nothing here changes a cache it is given.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets
import torch

from pagedlab.attention import backend
from pagedlab.attention.kernel_steps import LoopStep, paged_attention_steps, steps_table
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures.online_softmax import online_softmax_figure
from pagedlab.pictures.png import to_png

JUNK_KEY, JUNK_VALUE, BIG = 50.0, -100.0, 4.0


def junk_cache(pool: BlockAllocator) -> PagedKVCache:
    """A scalar-head cache for ``pool`` on the kernel's device, every slot junk."""
    cache = PagedKVCache(pool.num_blocks, pool.block_size, 1, 1, device=backend.device())
    cache.key.fill_(JUNK_KEY)
    cache.value.fill_(JUNK_VALUE)
    return cache


def place(pool: BlockAllocator, keys: Sequence[float]) -> tuple[BlockTable, PagedKVCache]:
    """A new sequence of ``pool`` with these keys (values 1, 2, ...), junk everywhere else."""
    if not keys:
        raise ValueError(f"keys must hold at least one key, got {keys!r}")
    n = len(keys)
    cache = junk_cache(pool)
    seq = BlockTable(pool)
    seq.append_tokens(n)
    k = torch.tensor([float(x) for x in keys], device=cache.key.device).reshape(n, 1, 1)
    cache.write(seq.slot_mapping(), k, torch.arange(1.0, n + 1, device=k.device).reshape(n, 1, 1))
    return seq, cache


def moved_max(
    seq: BlockTable, cache: PagedKVCache, keys: Sequence[float], position: int
) -> tuple[list[LoopStep], float]:
    """The replay with key ``BIG`` at ``position``, and the softmax over all scores it must
    end on (keys and values as :func:`place` wrote them)."""
    if not 0 <= position < len(keys):
        raise ValueError(f"position must be in [0, {len(keys) - 1}], got {position!r}")
    key = cache.key.clone()
    block, offset = seq.slot(position)
    key[block, offset] = BIG
    query = torch.ones(1, 1, device=key.device)
    steps = paged_attention_steps(query, key, cache.value, seq.blocks, len(keys))
    scores = torch.tensor([BIG if p == position else float(k) for p, k in enumerate(keys)])
    return steps, float(torch.softmax(scores, 0) @ torch.arange(1.0, len(keys) + 1))


def moved_max_widget(
    seq: BlockTable, cache: PagedKVCache, keys: Sequence[float], position: int
) -> widgets.VBox:
    """A slider for where key ``BIG`` sits; the picture, the steps and the check follow it."""
    where = widgets.IntSlider(value=position, min=0, max=len(keys) - 1, description="key 4 at")
    picture, readout = widgets.Image(format="png"), widgets.HTML()

    def show(_change: object = None) -> None:
        steps, dense = moved_max(seq, cache, keys, where.value)
        title = f"key {BIG:g} at position {where.value}: table {seq.blocks}"
        picture.value = to_png(online_softmax_figure(steps, title))
        last = steps[-1].output[0]
        mark = "✓" if abs(last - dense) < 1e-5 else "✗"
        readout.value = (f"<pre>{html.escape(steps_table(steps))}</pre>acc / l = {last:.4f}, "
                         f"softmax over all scores = {dense:.4f} {mark}")  # fmt: skip

    where.observe(show, names="value")
    show()
    return widgets.VBox([where, picture, readout])
