"""The engine's guards: its arguments (:func:`check_engine_settings` for ``Engine()``,
:func:`check_start` for a run; each refusal names the value) and the weights.

Cached K/V are a function of the weights that computed them. :func:`weights_content`, once
per call when prefix caching is on (no other K/V outlive a call): per tensor, its bytes
summed as int64 words; any edit of an element changes it, ``p.data.copy_``, ``p.data.mul_``
and numpy writes included (torch's version counter misses those). Edits that cancel out
exactly (elements swapped) escape: call ``Engine.reset_prefix_cache()``.
:func:`weights_identity` (every step): each tensor's storage and version counter (-1 for
inference tensors, which have none).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from pagedlab.ground.checks import ArgumentTypeError, check_bool, check_choice, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Request
from pagedlab.memory.scheduler_checks import check_request
from pagedlab.memory.step_loop import MODES
from pagedlab.model.checks import check_length, check_token_ids
from pagedlab.model.llama import TinyLlama
from pagedlab.model.sampling import check_temperature


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
    prefix_caching: object,
    batch_invariant: object,
    host_blocks: object,
) -> int | None:
    """``Engine``'s settings but the scheduler's (its ``SchedulerConfig`` checks those), checked
    before anything is built; returns the host blocks."""
    if not isinstance(model, TinyLlama):
        raise ArgumentTypeError(f"model must be a TinyLlama, got {type(model).__name__}")
    check_bool(batch_invariant, "batch_invariant")
    check_choice(preemption, "preemption", MODES)
    check_bool(prefix_caching, "prefix_caching")
    return None if host_blocks is None else check_int(host_blocks, "host_blocks", 1)


def check_start(
    model: TinyLlama,
    pool: BlockAllocator,
    token_budget: int | None,
    prompts: object,
    max_new_tokens: object,
    n: object,
    temperature: object,
    seed: object,
) -> tuple[list[list[int]], int, int, float, int]:
    """``Engine.start``'s arguments, checked (every prompt fits the pool, the model and the
    budget); returns them converted."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError(f"prompts must be a non-empty list of token-id lists, got {prompts!r}")
    vocab = model.vocab_size
    checked = [check_token_ids(p, f"prompts[{i}]", vocab) for i, p in enumerate(prompts)]
    new = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    samples = check_int(n, "n", minimum=1)
    temp, seed = check_temperature(temperature), check_int(seed, "seed", minimum=0)
    for i, ids in enumerate(checked):  # the last new token's K/V is never stored: new - 1
        check_length(model.max_positions, ids, new, f"prompts[{i}]")
        check_request(Request(f"prompts[{i}]", len(ids), new - 1, samples), {}, pool, token_budget)
    return checked, new, samples, temp, seed
