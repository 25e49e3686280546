"""A real model for the pages: a small Llama decoder in plain torch (Hugging Face's names).

The model sits above :mod:`pagedlab.attention` (its paged path writes and reads
``PagedKVCache``) and below :mod:`pagedlab.engine`; memory and attention never import it.
"""

from pagedlab.attention import backend  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.model.config import TINY, LlamaConfig
from pagedlab.model.generate import generate_contiguous, sample_contiguous
from pagedlab.model.llama import TinyLlama
from pagedlab.model.smollm2 import pretrained

__all__ = [
    "TINY",
    "LlamaConfig",
    "TinyLlama",
    "generate_contiguous",
    "pretrained",
    "sample_contiguous",
]
