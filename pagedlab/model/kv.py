"""The attention seam: where a layer's K/V go and what its queries read.

Every :class:`~pagedlab.model.layers.Attention` layer hands q, k, v (rotary applied) to a
:class:`KVStore`, whose ``attend`` stores the new K/V and returns attention over everything the
sequence holds: :class:`DenseCausal` (no cache), :class:`ContiguousCache` (one sequence, the
oracle's ordinary cache) or :class:`pagedlab.model.paged.PagedStep` (pages, by slot mapping).
All attention math is fp32 (softmax included), cast back to the query's dtype.

``batch_invariant=True`` computes each token as if alone: projections on fixed row tiles
(:func:`pagedlab.model.layers.project`) and :func:`invariant_attention`, one query at a time
over its keys padded to a multiple of ``KEY_TILE``, so a token gets the same bits in a prefill,
a chunk, a recompute or a decode, in any batch; ``False`` lets torch batch freely.
"""

from __future__ import annotations

from typing import Protocol

import torch

from pagedlab.ground.checks import check_bool, check_int
from pagedlab.model.checks import check_flat_attend, check_qkv

KEY_TILE = 64
"""Keys per tile in :func:`invariant_attention`: a query's reduction shapes depend only on
its own position (``ceil((position + 1) / KEY_TILE)`` tiles), never on the batch."""


class KVStore(Protocol):
    batch_invariant: bool  # each token computed as if alone (see the module docstring)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q ``[tokens, heads, d]``, k/v ``[tokens, kv_heads, d]`` -> ``[tokens, heads, d]``."""
        ...


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int) -> torch.Tensor:
    """Queries at positions ``first .. first + len(q) - 1`` over keys ``0 .. len(k) - 1``.

    q ``[n, heads, d]``; k, v ``[len(k), kv_heads, d]`` with ``len(k) = first + n``; query
    ``i`` sees keys ``<= first + i``. fp32 math; returns ``[n, heads, d]`` in q's dtype.
    """
    check_qkv(q, k, v, first)
    n, heads, d = q.shape
    group = heads // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), kf) * d**-0.5
    allowed = torch.arange(k.shape[0])[None, :] <= (first + torch.arange(n))[:, None]
    scores = scores.masked_fill(~allowed.to(scores.device), float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), vf).to(q.dtype)


def invariant_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int
) -> torch.Tensor:
    """:func:`causal_attention`, one query at a time, each over keys padded to ``KEY_TILE``.

    Query ``i`` (position ``first + i``) reads keys ``0 .. first + i`` padded to the next
    multiple of ``KEY_TILE`` (zeros past the keys there are, later positions' keys within the
    tile; all past ``first + i`` score ``-inf``, weight 0): every shape, and so every reduction
    order, is a function of that position alone. Queries in one tile share its padded K/V.
    """
    check_qkv(q, k, v, first)
    n, heads, d = q.shape
    group = heads // k.shape[1]
    out = torch.empty(n, heads, d, dtype=torch.float32, device=q.device)
    tiles: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # padded length -> K, V [.., heads, d]
    for i in range(n):
        length = first + i + 1
        padded = -(-length // KEY_TILE) * KEY_TILE
        if padded not in tiles:
            kv = k.new_zeros(2, padded, *k.shape[1:], dtype=torch.float32)
            have = min(padded, len(k))
            kv[0, :have], kv[1, :have] = k[:have], v[:have]
            keys, values = kv.repeat_interleave(group, dim=2).unbind(0)
            tiles[padded] = keys, values
        keys, values = tiles[padded]
        scores = torch.einsum("hd,thd->ht", q[i].float(), keys) * d**-0.5
        scores[:, length:] = float("-inf")
        out[i] = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), values)
    return out.to(q.dtype)


class DenseCausal:
    """``batch`` sequences of ``length`` tokens, flattened row after row; nothing is kept."""

    batch_invariant = False  # full-sequence logits, batched freely

    def __init__(self, batch: int, length: int) -> None:
        self.batch = check_int(batch, "batch", minimum=1)
        self.length = check_int(length, "length", minimum=1)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        check_flat_attend(layer, q, k, v, self.batch * self.length, "batch x length =")
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

    def __init__(self, num_layers: int, batch_invariant: bool = False) -> None:
        num_layers = check_int(num_layers, "num_layers", minimum=1)
        self.batch_invariant = check_bool(batch_invariant, "batch_invariant")
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    @property
    def num_tokens(self) -> int:
        k = self.keys[0]
        return 0 if k is None else int(k.shape[0])

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._check_attend(layer, q, k, v)
        old_k, old_v = self.keys[layer], self.values[layer]
        first = 0 if old_k is None else int(old_k.shape[0])
        if old_k is not None and old_v is not None:
            k, v = torch.cat([old_k, k]), torch.cat([old_v, v])
        self.keys[layer], self.values[layer] = k, v
        attend = invariant_attention if self.batch_invariant else causal_attention
        return attend(q, k, v, first)

    def _check_attend(
        self, layer: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        """``layer`` one of the cache's; q, k, v the new tokens' (one k/v row per query), k
        of the heads, head_dim and dtype already cached in that layer."""
        index = check_int(layer, "layer", minimum=0, maximum=len(self.keys) - 1)
        check_qkv(q, k, v, 0)
        old = self.keys[index]
        if old is not None and (old.shape[1:], old.dtype) != (k.shape[1:], k.dtype):
            raise ValueError(
                f"k is {k.dtype} {tuple(k.shape[1:])} per token, layer {index} holds "
                f"{old.dtype} {tuple(old.shape[1:])}"
            )
