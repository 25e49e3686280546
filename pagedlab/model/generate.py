"""The oracle: greedy generation for one request over an ordinary contiguous KV cache.

``generate_contiguous(model, prompt, max_new_tokens)`` returns the ``max_new_tokens`` new
tokens only (not the prompt), as :meth:`pagedlab.engine.Engine.generate` does: one prefill
over the whole prompt, then one token per step, each the argmax of the last position's
logits (ties go to the lowest token id, ``torch.argmax``). No end-of-sequence token: it
always generates exactly ``max_new_tokens``.

Every token is computed as if alone (``batch_invariant``: projections on fixed row tiles,
attention one query at a time, :mod:`pagedlab.model.kv`), so its bits depend on the token and
its prefix only: :class:`pagedlab.engine.Engine` with ``batch_invariant=True`` reproduces
them exactly in any batch, chunking or preemption. :func:`sample_contiguous`, the sampling
oracle, draws by :mod:`pagedlab.model.sampling`'s protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from pagedlab.ground.checks import check_int
from pagedlab.model.checks import check_instance, check_length, check_token_ids
from pagedlab.model.kv import ContiguousCache
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama
from pagedlab.model.sampling import check_temperature, draw, sample_generator


@torch.no_grad()
def generate_contiguous(model: TinyLlama, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Greedy: the ``max_new_tokens`` tokens after ``prompt`` (new tokens only)."""
    ids, n = _check_generate(model, prompt, max_new_tokens)
    return _run_contiguous(model, ids, n, [lambda logits: int(torch.argmax(logits))])[0]


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
    """The sampling oracle: ``n`` samples of ``prompt``, each run alone on its own cache (a
    copy of the one prefill's: the same bits as its own prefill, every token computed as if alone).

    Sample ``s`` draws its tokens from ``sample_generator(seed, request, s)``, one draw per
    token (:mod:`pagedlab.model.sampling`); ``request`` is the prompt's index in an
    ``Engine.sample`` call, so ``Engine.sample(prompts, ...)[i] == sample_contiguous(model,
    prompts[i], ..., request=i)``. ``temperature = 0`` is greedy: every sample is
    :func:`generate_contiguous`'s tokens.
    """
    ids, new, samples, temp, seed, request = _check_sample(
        model, prompt, max_new_tokens, n, temperature, seed, request
    )
    picks = []
    for s in range(samples):
        generator = sample_generator(seed, request, s)

        def pick(logits: torch.Tensor, g: torch.Generator = generator) -> int:
            return draw(logits, g, temp)

        picks.append(pick)
    return _run_contiguous(model, ids, new, picks)


def _check_generate(model: object, prompt: object, max_new_tokens: object) -> tuple[list[int], int]:
    """A TinyLlama, a non-empty prompt of its token ids, ``max_new_tokens >= 1`` that fits
    within ``max_position_embeddings``: the prompt's ids and the count."""
    llama = check_instance(model, TinyLlama, "model")
    ids = check_token_ids(prompt, "prompt", llama.vocab_size)
    return ids, check_length(llama.max_positions, ids, max_new_tokens, "prompt")


def _check_sample(
    model: object,
    prompt: object,
    max_new_tokens: object,
    n: object,
    temperature: object,
    seed: object,
    request: object,
) -> tuple[list[int], int, int, float, int, int]:
    """:func:`_check_generate`'s, and ``n >= 1`` samples, a finite ``temperature >= 0``,
    ``seed >= 0`` and ``request >= 0``."""
    ids, new = _check_generate(model, prompt, max_new_tokens)
    return (
        ids,
        new,
        check_int(n, "n", minimum=1),
        check_temperature(temperature),
        check_int(seed, "seed", minimum=0),
        check_int(request, "request", minimum=0),
    )


def _run_contiguous(
    model: TinyLlama, ids: list[int], n: int, picks: Sequence[Callable[[torch.Tensor], int]]
) -> list[list[int]]:
    """One prefill on a ContiguousCache, then per pick its own run of one token a step on its own
    copy of that cache (``attend`` replaces a layer's tensors, never writes into them)."""
    device = next(model.parameters()).device
    prefilled = ContiguousCache(model.num_layers, batch_invariant=True)
    h = model.hidden(
        torch.tensor(ids, device=device), torch.arange(len(ids), device=device), prefilled
    )
    last = project(model.lm_head, h[-1:], batch_invariant=True)[0]
    runs = []
    for pick in picks:
        cache = ContiguousCache(model.num_layers, batch_invariant=True)
        cache.keys, cache.values = list(prefilled.keys), list(prefilled.values)
        new = [pick(last)]
        while len(new) < n:
            position = torch.tensor([len(ids) + len(new) - 1], device=device)
            h = model.hidden(torch.tensor(new[-1:], device=device), position, cache)
            new.append(pick(project(model.lm_head, h, batch_invariant=True)[0]))
        runs.append(new)
    return runs
