"""The data plane: where K/V live and how the kernel reads them.

In vLLM this is the model runner's side (the attention backend and its KV-cache tensors):
it stores each token's K/V at the slot the control plane (:mod:`pagedlab.memory`) chose,
and the attention kernel reads them back through the block tables.

- :mod:`~pagedlab.attention.backend`      where Triton runs (compiled on CUDA, interpreter on CPU)
- :mod:`~pagedlab.attention.kv_cache`     ``PagedKVCache``: write by slot mapping, copy, gather
- :mod:`~pagedlab.attention.kernels`      the Triton kernels (paged attention: the one-page teaching
  kernel, then the tuned one; reshape-and-cache)
- :mod:`~pagedlab.attention.launch`       their launches, and the tuned loop's interpreter form
- :mod:`~pagedlab.attention.tuning`       a launch's tiles, pages per step, warps and splits
- :mod:`~pagedlab.attention.validate`     one named check per contract rule, for every entry point
- :mod:`~pagedlab.attention.ops`          ``paged_attention`` (tuned), ``paged_attention_one_page``
  (teaching), ``reference_attention`` and ``torch_paged_attention`` (batched torch, the
  engine's CPU path)
- :mod:`~pagedlab.attention.kernel_steps` the kernel's loop, block by block, in plain Python
- :mod:`~pagedlab.attention.batch`        one decode batch, packed as an engine sends it
- :mod:`~pagedlab.attention.mixed_step`   one vLLM V1 step: a prompt chunk and decodes, flattened
- :mod:`~pagedlab.attention.swap`         a host block pool; swap out and in onto new blocks
- :mod:`~pagedlab.attention.swap_cost`    what a swap costs (Fig. 19), measured and modelled
- :mod:`~pagedlab.attention.environment`  the first cell's report (versions, device, backend)

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
