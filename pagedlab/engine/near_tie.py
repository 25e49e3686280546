"""A near-tie, made on purpose: where batching decides the greedy token.

Batching changes the last bits of a token's hidden state (:mod:`pagedlab.model.agreement`).
That only changes a greedy token where the top two logits are closer than those bits, which
real prompts almost never hit. To *see* it, :func:`forge_near_tie` makes one: in a copy of
the model whose output matrix is its own (SmolLM2 ties it to the embeddings), it moves the
runner-up token's row ``b`` by ``(gap + t) * u`` (``u = h / |h|^2``, ``h`` the oracle's hidden
state, ``gap`` = logit a - logit b), which puts logit ``b`` at logit ``a + t`` for the oracle,
up to rounding; the batched forward's hidden state differs from ``h`` in the last bits, and
rows ``a`` and ``b`` weigh that difference differently, so its switch point is elsewhere. Bisection
finds the shift ``t`` where the oracle (the prompt alone, ``batch_invariant``) switches from
``a`` to ``b``, and the one where the engine's default batched prefill (every prompt in one
forward) switches; if the two differ, any ``t`` between them is a near-tie that batching
decides. The result is confirmed with real runs: ``Engine(...).generate`` and
``generate_contiguous`` pick different first tokens, while ``Engine(..., batch_invariant=True)``
picks the oracle's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.engine.engine import Engine
from pagedlab.model.agreement import last_hidden
from pagedlab.model.generate import generate_contiguous
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama


@dataclass(frozen=True)
class NearTie:
    """A model copy and a prompt batch where the default engine and the oracle disagree
    (``oracle_token != batched_token``, both seen in real runs)."""

    model: TinyLlama  # the copy: its own lm_head, row ``runner_up`` moved
    index: int  # the prompt (in the batch) whose first token flips
    top: int  # the original argmax, a
    runner_up: int  # b
    oracle_gap: float  # the oracle's logit[its token] - logit[the other token], >= 0
    batched_gap: float  # the batched forward's logit[its token] - logit[the other], >= 0
    oracle_token: int  # generate_contiguous's first new token: a or b, as run
    batched_token: int  # the default engine's, every prompt in one batch: the other, as run


@torch.no_grad()
def forge_near_tie(
    model: TinyLlama, prompts: Sequence[Sequence[int]], index: int = 0, steps: int = 28
) -> NearTie | None:
    """A near-tie on ``prompts[index]``'s first new token that the default engine's batch
    decides the other way from the oracle (confirmed by running both); None if none is found
    (the two forwards agree to the last bit on this machine).

    Each switch point is bisected ``steps`` times from the bracket ``[-1e-3, 1e-3]``: 28 steps
    narrow it to under 1e-11 (in logit units), far below a float32 logit's last bit (about
    1e-6 at SmolLM2's logits), where two forwards' switch points differ if they differ at all."""
    alone = last_hidden(model, [prompts[index]], batch_invariant=True)  # [1, hidden]
    batched = last_hidden(model, prompts, batch_invariant=False)  # [prompts, hidden]
    weights = {**model.state_dict(), "lm_head.weight": model.lm_head.weight.detach().clone()}
    copy = TinyLlama.from_state_dict({**model.config, "tie_word_embeddings": False}, weights)
    weight = copy.lm_head.weight
    logits = project(model.lm_head, alone, True)[0]
    a, b = (int(i) for i in torch.topk(logits, 2).indices)
    h = alone[0].double()
    u = h / h.dot(h)
    row_b, gap = weight[b].double(), float(logits[a] - logits[b])

    def flips(t: float, hidden: torch.Tensor, invariant: bool) -> bool:
        weight[b] = (row_b + (gap + t) * u).float()
        if invariant:
            return int(torch.argmax(project(copy.lm_head, hidden, True)[0])) == b
        return int(torch.argmax(copy.lm_head(hidden)[index])) == b  # all rows: the engine's M

    def switch_point(hidden: torch.Tensor, invariant: bool) -> float:
        lo, hi = -1e-3, 1e-3  # picks a at lo, b at hi
        for _ in range(steps):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if flips(mid, hidden, invariant) else (mid, hi)
        return hi

    t_oracle, t_batched = switch_point(alone, True), switch_point(batched, False)
    if t_oracle == t_batched:
        return None
    t = (t_oracle + t_batched) / 2
    weight[b] = (row_b + (gap + t) * u).float()
    oracle_logits = project(copy.lm_head, alone, True)[0]
    batched_logits = copy.lm_head(batched)[index]
    o, g = int(torch.argmax(oracle_logits)), int(torch.argmax(batched_logits))
    if o == g:
        return None
    blocks = sum(-(-(len(p) + 1) // 16) for p in prompts)  # roomy: one prefill step for all
    batch = [list(p) for p in prompts]
    served = Engine(copy, blocks, 16, prefix_caching=False).generate(batch, 1)[index]
    if served != [g] or generate_contiguous(copy, batch[index], 1) != [o]:
        return None  # the real runs did not reproduce it (a forward differs from last_hidden's)
    oracle_gap = float(oracle_logits[o] - oracle_logits[g])
    batched_gap = float(batched_logits[g] - batched_logits[o])
    return NearTie(copy, index, a, b, oracle_gap, batched_gap, o, g)
