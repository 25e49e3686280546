"""pagedlab: learn PagedAttention with a real allocator, real block tables and a Triton kernel.

The top level holds the state and the kernels; pictures and widgets live in ``pagedlab.viz*``
and ``pagedlab.widgets*`` (they import matplotlib and ipywidgets, so they load on demand).

Import order matters: ``pagedlab.backend`` decides whether Triton compiles for a GPU or runs
in its interpreter, and must do so before anything imports triton.
"""

import pagedlab.backend  # noqa: F401  (first: sets TRITON_INTERPRET before triton loads)
from pagedlab.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.attention import block_tables_tensor, paged_attention, reference_attention
from pagedlab.block_table import BlockTable, CopyOnWrite
from pagedlab.environment import environment_report
from pagedlab.events import Event
from pagedlab.kv_cache import PagedKVCache
from pagedlab.prefix_cache import CacheStats, PrefixCache
from pagedlab.sharing import BeamStepResult, beam_step, fork_samples
from pagedlab.trace import TraceStep, trace_paged_attention

__all__ = [
    "BeamStepResult",
    "BlockAllocator",
    "BlockTable",
    "CacheStats",
    "CopyOnWrite",
    "Event",
    "OutOfBlocksError",
    "PagedKVCache",
    "PrefixCache",
    "TraceStep",
    "beam_step",
    "block_tables_tensor",
    "environment_report",
    "fork_samples",
    "paged_attention",
    "reference_attention",
    "trace_paged_attention",
]
__version__ = "0.1.0"
