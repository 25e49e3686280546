"""The engine's guards: its settings, and what it watches to keep its promise (the weights).

:func:`check_engine_settings` is ``Engine.__init__``'s guard (each refusal names the value).

Cached K/V are a function of the weights that computed them. Two fingerprints say whether
the weights a model holds now are those:

- :func:`weights_content`, checked once per ``generate`` / ``sample`` / ``start``: per tensor,
  the sum of its bytes read as 64-bit integers. An edit of any element changes it, however
  it was made: ``load_state_dict``, ``p.data.copy_``, ``p.data.mul_``, a write through a
  numpy view (none of the last three bumps torch's version counter). Only edits that cancel
  out exactly (elements moved within a tensor, + d here and - d there) escape: after such,
  call ``Engine.reset_prefix_cache()``. It reads every weight once (SmolLM2-135M: see
  ``benchmarks/bench_engine.py``), a small share of a call;
- :func:`weights_identity`, checked at every step of a run: each tensor's storage and
  version counter (a new tensor, an in-place op that torch tracks). A few hundred ints.
  Inference tensors have no version counter: -1.
"""

from __future__ import annotations

import torch
from torch import nn

from pagedlab.checks import ArgumentTypeError, check_bool, check_int
from pagedlab.memory.scheduler import MODES
from pagedlab.model.llama import TinyLlama


def weights_identity(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """``(id, data_ptr, version)`` of every parameter and buffer of ``model``, in order."""
    tensors = [*model.parameters(), *model.buffers()]
    return tuple((id(t), t.data_ptr(), -1 if t.is_inference() else t._version) for t in tensors)


def weights_content(model: nn.Module) -> list[int]:
    """Per parameter and buffer, in order: the sum of its bytes as int64 words (wrapping),
    plus its last ``size % 8`` bytes (torch sums int64 fastest)."""
    sums = []
    for t in (*model.parameters(), *model.buffers()):
        raw = t.detach().reshape(-1).view(torch.uint8)
        end = raw.numel() // 8 * 8
        sums.append(raw[:end].view(torch.int64).sum() + raw[end:].sum(dtype=torch.int64))
    return torch.stack(sums).tolist() if sums else []


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
