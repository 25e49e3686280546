"""The engine's guards: its settings, and what it watches to keep its promise (the weights).

:func:`check_engine_settings` is ``Engine.__init__``'s guard (each refusal names the value).

Cached K/V are a function of the weights that computed them. :func:`weights_fingerprint`
identifies the weights a model holds now: each parameter's storage (a new tensor:
``param.data = ...``, ``.to(...)``) and its version counter, which torch bumps on every
in-place change (``load_state_dict``'s ``copy_``, ``mul_`` under ``no_grad``, an optimiser
step). Equal fingerprints: the same tensors, unchanged since. Cheap (one tuple of a few
hundred ints), so the engine checks it at every step.
"""

from __future__ import annotations

from torch import nn

from pagedlab.checks import ArgumentTypeError, check_bool, check_int
from pagedlab.memory.scheduler import MODES
from pagedlab.model.llama import TinyLlama


def weights_fingerprint(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """``(id, data_ptr, version)`` of every parameter and buffer of ``model``, in order."""
    tensors = [*model.parameters(), *model.buffers()]
    return tuple((id(t), t.data_ptr(), t._version) for t in tensors)


def check_engine_settings(
    model: object,
    preemption: object,
    token_budget: object,
    prefix_caching: object,
    batch_invariant: object,
    chunked_prefill: object,
    host_blocks: object,
) -> tuple[int | None, bool, int | None]:
    """``Engine``'s settings, checked before anything is built; returns the token budget,
    whether prefills are chunked (default: when there is a budget) and the host blocks."""
    if not isinstance(model, TinyLlama):
        raise ArgumentTypeError(f"model must be a TinyLlama, got {type(model).__name__}")
    check_bool(batch_invariant, "batch_invariant")
    if preemption not in MODES:
        raise ValueError(f"preemption must be one of {MODES}, got {preemption!r}")
    check_bool(prefix_caching, "prefix_caching")
    budget = None if token_budget is None else check_int(token_budget, "token_budget", 1)
    if chunked_prefill is None:
        chunked_prefill = budget is not None
    if not isinstance(chunked_prefill, bool):
        raise ArgumentTypeError(f"chunked_prefill must be a bool, got {chunked_prefill!r}")
    if chunked_prefill and budget is None:
        raise ValueError("chunked_prefill needs a token_budget (tokens per step), got None")
    host = None if host_blocks is None else check_int(host_blocks, "host_blocks", 1)
    return budget, chunked_prefill, host
