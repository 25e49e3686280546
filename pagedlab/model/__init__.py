"""A real model for the pages: a small Llama decoder in plain torch (Hugging Face's names).

- :mod:`~pagedlab.model.config`   ``LlamaConfig`` fields as a dict, validated; ``TINY``
- :mod:`~pagedlab.model.layers`   RMSNorm, rotary, grouped-query attention, SwiGLU
- :mod:`~pagedlab.model.kv`       the attention seam: ``KVStore`` (dense, contiguous cache)
- :mod:`~pagedlab.model.paged`    the paged store: K/V by slot mapping, ``paged_attention``
- :mod:`~pagedlab.model.llama`    ``TinyLlama(config, seed)``
- :mod:`~pagedlab.model.generate` ``generate_contiguous``: the greedy oracle;
  ``sample_contiguous``: the sampling oracle
- :mod:`~pagedlab.model.sampling` the seeded RNG protocol (one generator per sample)

The model sits above :mod:`pagedlab.attention` (its paged path writes and reads
``PagedKVCache``) and below :mod:`pagedlab.engine`; memory and attention never import it.
"""

from pagedlab.attention import backend  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.model.config import TINY, llama_config
from pagedlab.model.generate import generate_contiguous, sample_contiguous
from pagedlab.model.llama import TinyLlama

__all__ = ["TINY", "TinyLlama", "generate_contiguous", "llama_config", "sample_contiguous"]
