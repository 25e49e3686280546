"""first_divergence and last_logits: how two greedy runs are compared (near-ties).

On a tiny seeded model: equal runs have no divergence; a run that differs is reported at its
first different token with the oracle's logit gap there (the logit of the oracle's own token
minus that of the other, so >= 0); runs of different lengths are refused. last_logits in
batch-invariant mode gives a prompt the same bits alone and in a batch, and a projection's row
the same bits in either place of its tile, whatever its neighbour.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pagedlab.model import TINY, TinyLlama, generate_contiguous
from pagedlab.model.agreement import NEAR_TIE, Divergence, first_divergence, last_logits
from pagedlab.model.layers import project

MODEL = TinyLlama(TINY, seed=3, init_std=0.3)
PROMPTS = [[5, 9, 2, 7], [1, 1, 3], [8, 6, 4, 2, 0, 63]]


def test_equal_runs_have_no_divergence() -> None:
    tokens = generate_contiguous(MODEL, PROMPTS[0], 5)
    assert first_divergence(MODEL, PROMPTS[0], tokens, list(tokens)) is None


def test_a_different_token_is_reported_with_the_oracles_gap() -> None:
    tokens = generate_contiguous(MODEL, PROMPTS[0], 5)
    other = (tokens[2] + 1) % MODEL.vocab_size
    got = tokens[:2] + [other, 0, 0]
    d = first_divergence(MODEL, PROMPTS[0], tokens, got)
    assert d is not None and (d.index, d.expected, d.got) == (2, tokens[2], other)
    logits = last_logits(MODEL, [PROMPTS[0] + tokens[:2]], batch_invariant=True)[0]
    assert d.gap == pytest.approx(float(logits[tokens[2]] - logits[other])) and d.gap >= 0
    assert d.near_tie == (d.gap <= NEAR_TIE)
    assert Divergence(0, 1, 2, 5e-5).near_tie and not Divergence(0, 1, 2, 0.01).near_tie


def test_runs_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="have 3 and 2 new tokens"):
        first_divergence(MODEL, PROMPTS[0], [1, 2, 3], [1, 2])


def test_batch_invariant_logits_are_the_same_alone_and_in_a_batch() -> None:
    together = last_logits(MODEL, PROMPTS, batch_invariant=True)
    for i, prompt in enumerate(PROMPTS):
        assert torch.equal(last_logits(MODEL, [prompt], batch_invariant=True)[0], together[i])
    oracle = [generate_contiguous(MODEL, p, 1)[0] for p in PROMPTS]
    assert together.argmax(dim=-1).tolist() == oracle


@pytest.mark.parametrize(("width", "out"), [(576, 1536), (1536, 576), (576, 49152), (32, 64)])
def test_a_projected_row_has_the_same_bits_in_either_place_of_its_tile(
    width: int, out: int
) -> None:
    """Batch invariance rests on this (SmolLM2's shapes): the row alone, shifted by one (the
    other place in its tile) and beside other rows gives the same bits."""
    torch.manual_seed(width + out)
    linear, x = nn.Linear(width, out, bias=False), torch.randn(5, width)
    rows = project(linear, x, batch_invariant=True)
    shifted = project(linear, torch.cat([torch.randn(1, width), x]), batch_invariant=True)[1:]
    for i in range(len(x)):
        alone = project(linear, x[i : i + 1], batch_invariant=True)[0]
        assert torch.equal(rows[i], alone) and torch.equal(shifted[i], alone), i
