"""Seeded sampling: the RNG protocol that makes a sample independent of how it was served.

One :class:`torch.Generator` per (request, sample), on the CPU, seeded from ``(seed,
request index, sample index)`` by :func:`sample_seed` (sha256 of the three, so streams of
neighbouring indices are unrelated). Each generated token of that sample draws **exactly
one** vector of ``vocab_size`` float64 uniforms from its generator, in token order, and picks
the token by the Gumbel-max trick: ``argmax(logits / temperature - log(-log(u)))``, a draw from
``softmax(logits / temperature)``. So token ``t`` of sample ``s`` of request ``i`` depends only
on ``(seed, i, s, t)`` and that position's logits: not on batching, chunking, preemption,
block layout or which other samples ran in the same forward. Recomputed positions never draw
(their tokens are known). :func:`pagedlab.model.sample_contiguous` (the oracle) and
:meth:`pagedlab.engine.Engine.sample` both follow it.

``temperature = 0`` is greedy (``torch.argmax``, lowest token id on ties; nothing drawn), the
limit of the Gumbel-max draw as the temperature goes to 0.
"""

from __future__ import annotations

import hashlib

import torch

from pagedlab.ground.checks import ArgumentTypeError, check_int


def check_temperature(temperature: object) -> float:
    """``temperature`` as a finite float >= 0 (0: greedy); errors name the value."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ArgumentTypeError(f"temperature must be a number, got {temperature!r}")
    if not 0 <= float(temperature) < float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    return float(temperature)


def sample_seed(seed: int, request: int, sample: int) -> int:
    """The 63-bit seed of ``(seed, request, sample)``'s generator (sha256 of the three)."""
    parts = _check_seed_parts(seed, request, sample)
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def sample_generator(seed: int, request: int, sample: int) -> torch.Generator:
    """A fresh CPU generator for ``sample`` of ``request``: one draw per generated token."""
    _check_seed_parts(seed, request, sample)
    return torch.Generator().manual_seed(sample_seed(seed, request, sample))


def draw(logits: torch.Tensor, generator: torch.Generator | None, temperature: float) -> int:
    """One token from ``logits`` ``[vocab]``: Gumbel-max at ``temperature``, argmax at 0.

    Draws exactly ``vocab`` uniforms from ``generator`` when ``temperature > 0``.
    """
    temperature = _check_draw(logits, generator, temperature)
    if temperature == 0 or generator is None:
        return int(torch.argmax(logits))
    u = torch.rand(logits.shape[-1], generator=generator, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(u))
    return int(torch.argmax(logits.detach().double().cpu() / temperature + gumbel))


def _check_seed_parts(seed: object, request: object, sample: object) -> tuple[int, int, int]:
    """``seed``, ``request`` and ``sample`` integers >= 0."""
    return (
        check_int(seed, "seed", 0),
        check_int(request, "request", 0),
        check_int(sample, "sample", 0),
    )


def _check_draw(logits: object, generator: object, temperature: object) -> float:
    """1-D float ``logits`` (one per token id), a ``torch.Generator`` or None, a temperature."""
    if not isinstance(logits, torch.Tensor):
        raise ArgumentTypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not logits.dtype.is_floating_point:
        raise ArgumentTypeError(f"logits must hold floats, got {logits.dtype}")
    if logits.dim() != 1 or not logits.numel():
        raise ValueError(f"logits must be [vocab], vocab >= 1, got {tuple(logits.shape)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ArgumentTypeError(f"generator must be a torch.Generator or None, got {generator!r}")
    return check_temperature(temperature)
