"""The engines as oracles: vLLM 0.34.0's and transformers 5.24.0's own code run on a pagedlab
trace, beside pagedlab's replica of each rule, returning the same record.

- :mod:`~pagedlab.oracles.trace`    a trace (steps of admit / grow / preempt / resume / free),
  what a run returns (:class:`Run`), and pagedlab's replicas run on it: the ``"vllm-v1"``
  allocator with its null block and a :class:`PrefixCache`; :class:`HFCachePool`
- :mod:`~pagedlab.oracles.vllm_kv`  vLLM's real ``KVCacheManager`` / ``BlockPool`` on a trace
- :mod:`~pagedlab.oracles.hf_cache` transformers' real ``PagedAttentionCache`` on a trace, and its
  ``FIFOScheduler`` choosing a batch

Neither engine is imported by ``import pagedlab`` or by this package: the two engine modules
import them inside their functions and raise :class:`EngineMissing` (naming the install line)
where they are absent. vLLM's ``Scheduler`` is not run: it needs a ``VllmConfig`` whose
``ModelConfig`` inspects the model class, which imports ``vllm.model_executor`` and its GPU-side
dependencies (``einops``, ...), outside the CPU install; its preemption is replayed instead
(``_preempt_request``: free the blocks, ``num_computed_tokens = 0``, resume with a lookup).
"""

from __future__ import annotations

import importlib.util


class EngineMissing(ImportError):
    """The engine an oracle drives is not installed (the message says how to install it)."""


VLLM_INSTALL = (
    "pip install --no-deps vllm==0.34.0, then msgspec aiohttp pybase64 cachetools cbor2 "
    "uvloop llguidance xgrammar==0.2.8 cloudpickle py-cpuinfo (the Makefile's install does both)"
)


def vllm_available() -> bool:
    """Whether vLLM can be imported here (finds it; does not import it)."""
    return importlib.util.find_spec("vllm") is not None


def require_vllm() -> None:
    """Raise :class:`EngineMissing` naming the install line if vLLM is absent or not 0.34.0."""
    if not vllm_available():
        raise EngineMissing(f"vLLM is not installed; the oracle needs 0.34.0: {VLLM_INSTALL}")
    from importlib.metadata import version

    if version("vllm") != "0.34.0":
        raise EngineMissing(f"vLLM {version('vllm')} is installed, the oracle reads 0.34.0")
