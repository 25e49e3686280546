"""The oracle: greedy generation for one request over an ordinary contiguous KV cache.

``generate_contiguous(model, prompt, max_new_tokens)`` returns the ``max_new_tokens`` new
tokens only (not the prompt), as :meth:`pagedlab.engine.Engine.generate` does: one prefill
over the whole prompt, then one token per step, each the argmax of the last position's
logits (ties go to the lowest token id, ``torch.argmax``). No end-of-sequence token: it
always generates exactly ``max_new_tokens``.

Every token is computed as if alone (``batch_invariant``: projections on fixed row tiles,
attention one query at a time, :mod:`pagedlab.model.kv`), so its bits depend on the token and
its prefix only: :class:`pagedlab.engine.Engine` with ``batch_invariant=True`` reproduces
them exactly in any batch, chunking or preemption.

``sample_contiguous(model, prompt, max_new_tokens, n, temperature, seed)`` is the sampling
oracle: each of ``n`` samples alone, drawing by :mod:`pagedlab.model.sampling`'s protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from pagedlab.checks import ArgumentTypeError, check_int
from pagedlab.model.kv import ContiguousCache
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama
from pagedlab.model.sampling import check_temperature, draw, sample_generator


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
    return _run_contiguous(model, ids, n, lambda logits: int(torch.argmax(logits)))


@torch.no_grad()
def sample_contiguous(
    model: TinyLlama,
    prompt: list[int],
    max_new_tokens: int,
    n: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    request: int = 0,
) -> list[list[int]]:
    """The sampling oracle: ``n`` samples of ``prompt``, each run alone on its own cache.

    Sample ``s`` draws its tokens from ``sample_generator(seed, request, s)``, one draw per
    token (:mod:`pagedlab.model.sampling`); ``request`` is the prompt's index in an
    ``Engine.sample`` call, so ``Engine.sample(prompts, ...)[i] == sample_contiguous(model,
    prompts[i], ..., request=i)``. ``temperature = 0`` is greedy: every sample is
    :func:`generate_contiguous`'s tokens.
    """
    if not isinstance(model, TinyLlama):
        raise ArgumentTypeError(f"model must be a TinyLlama, got {type(model).__name__}")
    ids = check_prompt(model, prompt)
    new = check_length(model, ids, max_new_tokens, "prompt")
    samples = check_int(n, "n", minimum=1)
    temp = check_temperature(temperature)
    seed = check_int(seed, "seed", minimum=0)
    request = check_int(request, "request", minimum=0)
    out = []
    for s in range(samples):
        generator = sample_generator(seed, request, s)

        def pick(logits: torch.Tensor, g: torch.Generator = generator) -> int:
            return draw(logits, g, temp)

        out.append(_run_contiguous(model, ids, new, pick))
    return out


def _run_contiguous(
    model: TinyLlama, ids: list[int], n: int, pick: Callable[[torch.Tensor], int]
) -> list[int]:
    """One prefill, then one token per step on a ContiguousCache; ``pick`` chooses each."""
    device = next(model.parameters()).device
    cache = ContiguousCache(model.num_layers, batch_invariant=True)
    new: list[int] = []
    pending, first = ids, 0
    while len(new) < n:
        tokens = torch.tensor(pending, device=device)
        positions = torch.arange(first, first + len(pending), device=device)
        h = model.hidden(tokens, positions, cache)
        token = pick(project(model.lm_head, h[-1:], batch_invariant=True)[0])
        new.append(token)
        first += len(pending)
        pending = [token]
    return new
