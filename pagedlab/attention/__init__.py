"""The data plane: where K/V live and how the kernel reads them (vLLM's model runner side:
it stores each token's K/V at the slot :mod:`pagedlab.memory` chose, and the kernel reads them
back through the block tables).

- ``backend``: where Triton runs (compiled on CUDA, the interpreter on a CPU)
- ``kv_cache``: ``PagedKVCache`` (write by slot mapping, copy, gather)
- ``kernels``: the teaching kernel, the tuned kernel and its loop, reshape-and-cache
- ``launch``: their launches and the tuned loop's interpreter form; ``tuning``: their plans
- ``validate``: one named check per contract rule, for every entry point
- ``ops``: ``paged_attention``, ``paged_attention_one_page``, ``reference_attention``,
  ``torch_paged_attention`` (batched torch, the engine's CPU path)
- ``kernel_steps``: the kernel's loop in plain torch, step by step; ``batch``: a decode batch
  as an engine sends it; ``mixed_step``: one vLLM V1 step, flattened
- ``swap``, ``swap_cost``: a host block pool, swapping and its cost; ``environment``: the
  first cell's report

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
