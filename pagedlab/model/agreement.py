"""When do two greedy runs agree? Exactly, or up to a near-tie (how vLLM's tests compare).

Greedy decoding picks the argmax of the logits. Two correct implementations of the same
model round floats differently when they batch rows differently (the BLAS picks its kernel
and blocking by the number of rows), so their logits differ in the last bits. Where the top
two logits are closer than that noise, one run may pick the other token, and from there the
two continuations differ. vLLM's model tests accept exactly this (``check_logprobs_close``:
a divergence is fine when each run's token is among the other's top candidates).

:func:`first_divergence` gives where two token lists first differ, and the *gap* there: the
oracle's logit of its own token minus its logit of the other run's token (>= 0, since the
oracle picked the argmax). pagedlab's default engine promises: no divergence, or the first one
at a gap of at most ``NEAR_TIE`` (DESIGN: "the two tokens' logits within 1e-4").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.ground.checks import ArgumentTypeError, check_bool, check_int
from pagedlab.model.checks import (
    check_flat_attend,
    check_instance,
    check_prompts,
    check_token_ids,
)
from pagedlab.model.kv import causal_attention, invariant_attention
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama

NEAR_TIE = 1e-4
"""Largest logit gap at which the default engine may pick the other token (the contract)."""


@dataclass(frozen=True)
class Divergence:
    """The first new-token index where two greedy runs differ, and the oracle's gap there."""

    index: int  # into the new tokens
    expected: int  # the oracle's token
    got: int  # the other run's token
    gap: float  # oracle's logit[expected] - logit[got], >= 0

    @property
    def near_tie(self) -> bool:
        return self.gap <= NEAR_TIE


class Segments:
    """A :class:`~pagedlab.model.kv.KVStore` over whole sequences of ``lengths`` tokens,
    flattened one after the other, each attending causally to itself only; nothing kept."""

    def __init__(self, lengths: Sequence[int], batch_invariant: bool = False) -> None:
        self.lengths, self.batch_invariant = _check_segments(lengths, batch_invariant)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        check_flat_attend(layer, q, k, v, sum(self.lengths), "the segments")
        attend = invariant_attention if self.batch_invariant else causal_attention
        out, start = [], 0
        for n in self.lengths:
            rows = slice(start, start + n)
            out.append(attend(q[rows], k[rows], v[rows], 0))
            start += n
        return torch.cat(out)


def _check_segments(lengths: object, batch_invariant: object) -> tuple[list[int], bool]:
    """One or more lengths >= 1, and a bool."""
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        raise ArgumentTypeError(f"lengths must be a list of ints, got {lengths!r}")
    if not lengths:
        raise ValueError("lengths must hold at least one length, got []")
    checked = [check_int(n, f"lengths[{i}]", minimum=1) for i, n in enumerate(lengths)]
    return checked, check_bool(batch_invariant, "batch_invariant")


def _check_prompts(
    model: object, prompts: object, batch_invariant: object
) -> tuple[TinyLlama, list[list[int]]]:
    """A TinyLlama, one or more prompts of its token ids (each within max_positions), and a
    bool."""
    llama = check_instance(model, TinyLlama, "model")
    checked = check_prompts(prompts, llama.vocab_size)
    for i, p in enumerate(checked):
        if len(p) > llama.max_positions:
            raise ValueError(
                f"prompts[{i}] has {len(p)} tokens, more than max_position_embeddings = "
                f"{llama.max_positions}"
            )
    check_bool(batch_invariant, "batch_invariant")
    return llama, checked


def _check_divergence(
    model: object, prompt: object, expected: object, got: object
) -> tuple[TinyLlama, list[int], list[int], list[int]]:
    """A TinyLlama, a prompt and two equally long runs of its token ids, all of them within
    max_positions."""
    llama = check_instance(model, TinyLlama, "model")
    ids = check_token_ids(prompt, "prompt", llama.vocab_size)
    want = check_token_ids(expected, "expected", llama.vocab_size, allow_empty=True)
    have = check_token_ids(got, "got", llama.vocab_size, allow_empty=True)
    if len(have) != len(want):
        raise ValueError(f"the runs have {len(want)} and {len(have)} new tokens: not comparable")
    if len(ids) + len(want) > llama.max_positions:
        raise ValueError(
            f"prompt + expected = {len(ids) + len(want)} tokens, more than "
            f"max_position_embeddings = {llama.max_positions}"
        )
    return llama, ids, want, have


@torch.no_grad()
def last_hidden(
    model: TinyLlama, prompts: Sequence[Sequence[int]], batch_invariant: bool = False
) -> torch.Tensor:
    """Final hidden states ``[len(prompts), hidden]`` at each prompt's last position, all
    prompts in one forward (one flat batch, as an engine's prefill step runs them)."""
    model, prompts = _check_prompts(model, prompts, batch_invariant)
    ids = [t for p in prompts for t in p]
    positions = torch.cat([torch.arange(len(p)) for p in prompts])
    store = Segments([len(p) for p in prompts], batch_invariant)
    hidden = model.hidden(torch.tensor(ids), positions, store)
    return hidden[torch.tensor([len(p) for p in prompts]).cumsum(0) - 1]


@torch.no_grad()
def last_logits(
    model: TinyLlama, prompts: Sequence[Sequence[int]], batch_invariant: bool = False
) -> torch.Tensor:
    """Logits ``[len(prompts), vocab]`` at each prompt's last position (:func:`last_hidden`)."""
    _check_prompts(model, prompts, batch_invariant)
    hidden = last_hidden(model, prompts, batch_invariant)
    return project(model.lm_head, hidden, batch_invariant)


def first_divergence(
    model: TinyLlama, prompt: Sequence[int], expected: Sequence[int], got: Sequence[int]
) -> Divergence | None:
    """None if ``got == expected``; else where they first differ and the oracle's gap there
    (the oracle's logits computed as alone: ``batch_invariant``, as ``generate_contiguous``)."""
    model, prompt, expected, got = _check_divergence(model, prompt, expected, got)
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        if want != have:
            logits = last_logits(model, [[*prompt, *expected[:i]]], batch_invariant=True)[0]
            return Divergence(i, want, have, float(logits[want] - logits[have]))
    return None
