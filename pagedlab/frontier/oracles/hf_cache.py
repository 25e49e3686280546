"""transformers 5.24.0's own ``PagedAttentionCache`` on a pagedlab trace.

The cache is built as ``ContinuousBatchingConfig(page_size=block_size, num_blocks=...,
allow_block_sharing=False)`` makes it for a one-layer Llama: one full-attention cache allocator,
no prefix sharing; transformers chooses the sectors' number and size (:func:`hf_geometry`: one
block a sector for even block sizes here, two for odd ones). Each step starts with
``cache.pool.try_to_free_sectors()``, as ``Scheduler._try_to_meet_safety_margin`` does before
every batch (``generation/continuous_batching/scheduler.py:184``); an admit or grow is
``can_store_request_tokens`` (it allocates when the sectors suffice, else changes nothing:
refused; ``cache.py:251``), a free ``free_blocks``. transformers' scheduler itself is not driven
(its batches need a model's outputs); torch and transformers are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.frontier.oracles import EngineMissing
from pagedlab.frontier.oracles.trace import Op, Recorder, Run, applies, check_trace
from pagedlab.ground.checks import check_int


def paged_cache(num_sectors: int, block_size: int) -> Any:
    """A real transformers ``PagedAttentionCache`` of ``num_sectors`` one-block sectors."""
    try:
        import torch
        import transformers
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
        from transformers.generation.continuous_batching.cache import PagedAttentionCache
        from transformers.generation.continuous_batching.distributed import DistributedHelper
    except ImportError as exc:  # pragma: no cover - the lab installs both
        raise EngineMissing(f"the Hugging Face oracle needs torch and transformers: {exc}") from exc
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    cb = ContinuousBatchingConfig(
        page_size=check_int(block_size, "block_size", minimum=1),
        num_blocks=check_int(num_sectors, "num_sectors", minimum=1),
        max_batch_tokens=16, allow_block_sharing=False, max_memory_percent=0.5,
    )  # fmt: skip
    return PagedAttentionCache(
        config, cb, "cpu", DistributedHelper(None, None), dtype=torch.float32
    )


def hf_geometry(num_blocks: int, block_size: int) -> tuple[int, int]:
    """(data sectors, blocks per sector) transformers gives the cache :func:`paged_cache` makes."""
    cache = paged_cache(num_blocks, block_size)
    return cache.num_sectors, cache.pool.blocks_per_sector[0]


class _Length:
    """What ``can_store_request_tokens`` reads of a request: its id and tokens so far."""

    def __init__(self, request_id: str) -> None:
        self.request_id, self.length = request_id, 0

    def current_len(self) -> int:
        return self.length


def run_hf(trace: Sequence[Sequence[Op]], num_sectors: int, block_size: int) -> Run:
    """The trace (admit / grow / free) on transformers' real cache; the same record as
    :func:`~pagedlab.frontier.oracles.trace.run_pagedlab_hf_rule`."""
    steps = check_trace(trace)
    cache = paged_cache(num_sectors, block_size)
    table = cache.cache_allocators["full_attention"].block_table
    live: dict[str, _Length] = {}
    rec = Recorder("transformers 5.24.0 PagedAttentionCache")
    for step in steps:
        cache.pool.try_to_free_sectors()
        for op in step:
            kind, rid = op[0], op[1]
            if not applies(kind, rid, live, set()):
                continue
            if kind == "free":
                cache.free_blocks(rid)
                del live[rid]
                continue
            if kind not in ("admit", "grow"):
                raise ValueError(f"the Hugging Face rule has no {kind!r}")
            state = live.get(rid, _Length(rid))
            if not cache.can_store_request_tokens(state, len(op[2])):  # type: ignore[misc]
                rec.refused.append(rid)
                continue
            state.length += len(op[2])  # type: ignore[misc]
            live[rid] = state
            if kind == "admit":
                rec.hits[rid] = 0
        rec.end_step({r: tuple(table.get(r, ())) for r in live}, 0)
    return rec.run()
