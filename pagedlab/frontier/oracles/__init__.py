"""The engines as oracles: vLLM 0.34.0's and transformers 5.24.0's own code run on a pagedlab
trace, beside pagedlab's replica of each rule (``trace``), returning the same record.

Neither engine is imported by ``import pagedlab`` or this package: the engine modules import
them inside their functions and raise :class:`EngineMissing` (naming the install line) where
absent. vLLM's ``Scheduler`` is not run (its ``VllmConfig`` imports GPU-side dependencies);
its preemption is replayed (``_preempt_request``: free, ``num_computed_tokens = 0``, resume).
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
