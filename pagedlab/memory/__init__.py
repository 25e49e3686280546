"""The control plane: who holds which block.

In vLLM this is the scheduler's side (the KV-cache manager and its block pool): it decides
which physical block each sequence's logical blocks live in and when blocks are shared,
copied or freed. It never touches K/V data; :mod:`pagedlab.attention` does that.

- :mod:`~pagedlab.memory.allocator`    ``BlockAllocator``: free list, ref counts, who holds what
- :mod:`~pagedlab.memory.block_table`  ``BlockTable``: one sequence's logical -> physical map;
  ``blocks_to_append``: how many free blocks an append needs (the one formula)
- :mod:`~pagedlab.memory.owner`        ``Owner``: a holder of references, as a table shows itself
  to its allocator; the checks of the values an allocator is given
- :mod:`~pagedlab.memory.events`       what happened (allocate, share, copy, free, ...)
- :mod:`~pagedlab.memory.sharing`      parallel sampling and beam search (§4.4)
- :mod:`~pagedlab.memory.prefix_cache` chained block hashes, hits, LRU eviction
- :mod:`~pagedlab.memory.savings`      memory saved by sharing (Fig. 15)
- :mod:`~pagedlab.memory.scheduler`    ``Scheduler``: FCFS, preemption by swap or recompute,
  chunked prefill (§4.5); with :mod:`~pagedlab.memory.step_loop` (its base: the step loop),
  :mod:`~pagedlab.memory.requests` (a request's sequence group, the plan and its executor),
  :mod:`~pagedlab.memory.swap_space` (the host pool), :mod:`~pagedlab.memory.capacity` (every
  "how many blocks" it asks) and :mod:`~pagedlab.memory.scheduler_checks` (what a step checks
  before it touches anything)

Notebook 11 (what engines do in 2026, on the allocator above):

- :mod:`~pagedlab.memory.peers`          vLLM 0.34's and transformers 5.24's free-block rules
- :mod:`~pagedlab.memory.partial_prefix` hits inside a block: ``prefix_match_unit``, the copy
- :mod:`~pagedlab.memory.hybrid`         cache groups, sliding windows into the null block,
  model-set block sizes
- :mod:`~pagedlab.memory.miss_reasons`   every missed prompt token, classified
- :mod:`~pagedlab.memory.async_steps`    async scheduling one step ahead
- :mod:`~pagedlab.memory.kv_bytes`       bytes per token, blocks per GiB, for three models
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
