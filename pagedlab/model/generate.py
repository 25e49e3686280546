"""The oracle: greedy generation for one request over an ordinary contiguous KV cache.

``generate_contiguous(model, prompt, max_new_tokens)`` returns the ``max_new_tokens`` new
tokens only (not the prompt), as :meth:`pagedlab.engine.Engine.generate` does: one prefill
over the whole prompt, then one token per step, each the argmax of the last position's
logits (ties go to the lowest token id, ``torch.argmax``). No end-of-sequence token: it
always generates exactly ``max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pagedlab.checks import ArgumentTypeError, check_int
from pagedlab.model.kv import ContiguousCache
from pagedlab.model.llama import TinyLlama


def check_prompt(model: TinyLlama, prompt: object, name: str = "prompt") -> list[int]:
    """``prompt`` as a non-empty list of token ids in ``[0, vocab_size)``; errors name it."""
    if isinstance(prompt, (str, bytes, torch.Tensor)) or not isinstance(prompt, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of token ids, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError(f"{name} must hold at least one token id, got []")
    ids = [check_int(t, f"{name}[{i}]", 0, model.vocab_size - 1) for i, t in enumerate(prompt)]
    return ids


def check_length(model: TinyLlama, prompt: list[int], max_new_tokens: object, name: str) -> int:
    """``max_new_tokens`` >= 1 and room for it within ``max_position_embeddings``."""
    n = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    if len(prompt) + n > model.max_positions:
        raise ValueError(
            f"{name} has {len(prompt)} tokens + max_new_tokens {n} = {len(prompt) + n}, more "
            f"than max_position_embeddings = {model.max_positions}"
        )
    return n


@torch.no_grad()
def generate_contiguous(model: TinyLlama, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Greedy: the ``max_new_tokens`` tokens after ``prompt`` (new tokens only)."""
    if not isinstance(model, TinyLlama):
        raise ArgumentTypeError(f"model must be a TinyLlama, got {type(model).__name__}")
    ids = check_prompt(model, prompt)
    n = check_length(model, ids, max_new_tokens, "prompt")
    device = next(model.parameters()).device
    cache = ContiguousCache(model.num_layers)
    new: list[int] = []
    pending, first = ids, 0
    while len(new) < n:
        tokens = torch.tensor(pending, device=device)
        positions = torch.arange(first, first + len(pending), device=device)
        h = model.hidden(tokens, positions, cache)
        token = int(torch.argmax(model.lm_head(h[-1])))
        new.append(token)
        first += len(pending)
        pending = [token]
    return new
