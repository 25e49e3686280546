"""pagedlab: learn PagedAttention with a real allocator, real block tables and a Triton kernel.

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

__all__ = [
    "BlockAllocator",
    "BlockTable",
    "CopyOnWrite",
    "Event",
    "OutOfBlocksError",
    "PagedKVCache",
    "block_tables_tensor",
    "environment_report",
    "paged_attention",
    "reference_attention",
]
__version__ = "0.1.0"
