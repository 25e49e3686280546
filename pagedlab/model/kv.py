"""The attention seam: where a layer's K/V go and what its queries read.

Every :class:`~pagedlab.model.layers.Attention` layer computes q, k, v (rotary applied) for
the tokens of one forward and hands them to a :class:`KVStore`, whose ``attend`` stores the
new K/V and returns attention over everything the sequence holds. Three stores, one seam:

- :class:`DenseCausal`: no cache; ``batch`` sequences of ``length`` tokens each, causal
  (training, and the full-sequence logits the Hugging Face comparison checks);
- :class:`ContiguousCache`: one sequence, K/V appended to per-layer contiguous tensors (the
  ordinary KV cache of :func:`~pagedlab.model.generate.generate_contiguous`, the oracle);
- :class:`pagedlab.model.paged.PagedStep`: many sequences, K/V written by slot mapping into
  :class:`pagedlab.PagedKVCache` pages, decode read by :func:`pagedlab.paged_attention`.

All attention math is fp32 (softmax included), cast back to the query's dtype.
"""

from __future__ import annotations

from typing import Protocol

import torch


class KVStore(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q ``[tokens, heads, d]``, k/v ``[tokens, kv_heads, d]`` -> ``[tokens, heads, d]``."""
        ...


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int) -> torch.Tensor:
    """Queries at positions ``first .. first + len(q) - 1`` over keys ``0 .. len(k) - 1``.

    q ``[n, heads, d]``; k, v ``[len(k), kv_heads, d]`` with ``len(k) = first + n``; query
    ``i`` sees keys ``<= first + i``. fp32 math; returns ``[n, heads, d]`` in q's dtype.
    """
    n, heads, d = q.shape
    group = heads // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), kf) * d**-0.5
    allowed = torch.arange(k.shape[0])[None, :] <= (first + torch.arange(n))[:, None]
    scores = scores.masked_fill(~allowed.to(scores.device), float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), vf).to(q.dtype)


class DenseCausal:
    """``batch`` sequences of ``length`` tokens, flattened row after row; nothing is kept."""

    def __init__(self, batch: int, length: int) -> None:
        self.batch, self.length = batch, length

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        shape = (self.batch, self.length)
        qb = q.reshape(*shape, *q.shape[1:]).transpose(1, 2)  # [b, heads, t, d]
        kb = k.reshape(*shape, *k.shape[1:]).transpose(1, 2)
        vb = v.reshape(*shape, *v.shape[1:]).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(
            qb.float(), kb.float(), vb.float(), is_causal=True, enable_gqa=True
        )
        return out.transpose(1, 2).reshape(q.shape).to(q.dtype)


class ContiguousCache:
    """One sequence's K/V per layer, ``[positions, kv_heads, d]``, grown by concatenation."""

    def __init__(self, num_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    @property
    def num_tokens(self) -> int:
        k = self.keys[0]
        return 0 if k is None else int(k.shape[0])

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        old_k, old_v = self.keys[layer], self.values[layer]
        first = 0 if old_k is None else int(old_k.shape[0])
        if old_k is not None and old_v is not None:
            k, v = torch.cat([old_k, k]), torch.cat([old_v, v])
        self.keys[layer], self.values[layer] = k, v
        return causal_attention(q, k, v, first)
