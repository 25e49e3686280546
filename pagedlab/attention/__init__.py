"""The data plane: where K/V live and how the kernel reads them (vLLM's model runner side:
it stores each token's K/V at the slot :mod:`pagedlab.memory` chose, and the kernel reads them
back through the block tables).

Invariant: :mod:`~pagedlab.attention.backend` is imported here first, so ``TRITON_INTERPRET``
is decided before anything imports triton.
"""

from pagedlab.attention import backend  # first: sets TRITON_INTERPRET before triton loads
from pagedlab.attention.kernel_steps import LoopStep, paged_attention_steps
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import (
    block_tables_tensor,
    paged_attention,
    paged_attention_one_page,
    reference_attention,
    torch_paged_attention,
)

__all__ = [
    "LoopStep",
    "PagedKVCache",
    "backend",
    "block_tables_tensor",
    "paged_attention",
    "paged_attention_one_page",
    "paged_attention_steps",
    "reference_attention",
    "torch_paged_attention",
]
