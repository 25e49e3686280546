"""The control plane: who holds which block (vLLM's KV-cache manager and block pool). It
never touches K/V data; :mod:`pagedlab.attention` does that.
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
