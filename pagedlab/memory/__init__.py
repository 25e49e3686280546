"""The control plane: who holds which block (vLLM's KV-cache manager and block pool). It
never touches K/V data; :mod:`pagedlab.attention` does that.

``allocator`` (``BlockAllocator``: free queue, holders, the free rule), ``block_table``
(``BlockTable``; ``blocks_to_append``, the one "how many free blocks" formula), ``owner``
(``Owner`` and the allocator's argument checks), ``events``, ``sharing`` (§4.4),
``prefix_cache`` (chained hashes, hits, eviction), ``savings`` (Fig. 15). The §4.5
``scheduler`` (FCFS, swap or recompute, chunked prefill) on ``step_loop``, with ``requests``
(groups, the plan, its executor), ``swap_space``, ``capacity`` and ``scheduler_checks``.
Notebook 11: ``peers`` (vLLM's and transformers' free-block rules), ``partial_prefix`` (hits
inside a block), ``hybrid`` (cache groups, sliding windows), ``miss_reasons``,
``async_steps`` (scheduling one step ahead), ``kv_bytes`` (bytes per token, three models).
"""

from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError, Owner
from pagedlab.memory.block_table import BlockTable, CopyOnWrite, blocks_to_append
from pagedlab.memory.events import Event
from pagedlab.memory.prefix_cache import CacheStats, PrefixCache
from pagedlab.memory.sharing import BeamStepResult, beam_step, can_beam_step, fork_samples

__all__ = [
    "BeamStepResult",
    "BlockAllocator",
    "BlockTable",
    "CacheStats",
    "CopyOnWrite",
    "Event",
    "OutOfBlocksError",
    "Owner",
    "PrefixCache",
    "beam_step",
    "blocks_to_append",
    "can_beam_step",
    "fork_samples",
]
