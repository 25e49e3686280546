"""The Llama layer kit: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP.

Parameter names and math follow Hugging Face's ``modeling_llama`` (so a state dict moves
between the two unchanged): RMSNorm in fp32 then scaled by ``weight``; rotary embedding with
``inv_freq = theta ** (-2i / head_dim)`` and the "rotate half" pairing (dimension ``i`` with
``i + head_dim / 2``); attention ``softmax(q k^T / sqrt(head_dim)) v`` with query head ``h``
reading kv head ``h // (heads // kv_heads)``; MLP ``down(silu(gate(x)) * up(x))``; no biases.

Tokens are flat ``[tokens, hidden]`` with one position each: sequences and batches are the
:class:`~pagedlab.model.kv.KVStore`'s business (the attention seam), not the layers'.

Batch invariance (``store.batch_invariant``): a matrix product's rows can round differently
when the batch around them changes (the BLAS picks its kernel and blocking by the number of
rows). With the flag set, every projection runs on tiles of exactly ``ROW_TILE`` rows (one:
a matrix-vector product per token, each its own call), so a token's result depends on its own
row only: the same in a batch of 40 as alone. RMSNorm, rotary, SiLU and the products of two
activations are row-wise already (one row's numbers never meet another's).
"""

from __future__ import annotations

import torch
from torch import nn

from pagedlab.model.kv import KVStore

ROW_TILE = 1
"""Rows per matrix product in batch-invariant mode (one kernel shape for every token).

One row: each token's projection is its own matrix-vector product, the cheapest shape for
decode, where a step holds a few rows (a 16-row tile made a lone token pay for 16: the
oracle's 4 x 16 tokens of SmolLM2 took 9.6 s of CPU with 16-row tiles, 4.9 s with one)."""


def project(linear: nn.Linear, x: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
    """``linear(x)`` for ``x`` ``[tokens, in]``; with ``batch_invariant``, tile by tile.

    Each tile of ``ROW_TILE`` rows (the last zero-padded) is one call of the same shape, so
    row ``i``'s output does not depend on how many rows, or which, share the call.
    """
    if not batch_invariant:
        return linear(x)
    n = x.shape[0]
    padded = -(-n // ROW_TILE) * ROW_TILE
    if padded != n:
        x = torch.cat([x, x.new_zeros(padded - n, x.shape[1])])
    tiles = [linear(x[i : i + ROW_TILE]) for i in range(0, padded, ROW_TILE)]
    return torch.cat(tiles)[:n]


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rotary(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, ...]:
    """cos and sin ``[tokens, head_dim]`` (fp32) for integer ``positions`` ``[tokens]``."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    freqs = positions.float()[:, None] * inv_freq.to(positions.device)[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[tokens, heads, d]`` by its positions' angles (HF's rotate-half form)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos[:, None, :] + rotated * sin[:, None, :]).to(x.dtype)


class Attention(nn.Module):
    """Grouped-query self-attention; K/V storage and reading are delegated to a KVStore."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, theta: float) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.theta = theta
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, ...],
        store: KVStore,
        layer: int,
    ) -> torch.Tensor:
        n, d = x.shape[0], self.head_dim
        tiled = store.batch_invariant
        q = project(self.q_proj, x, tiled).view(n, self.heads, d)
        k = project(self.k_proj, x, tiled).view(n, self.kv_heads, d)
        v = project(self.v_proj, x, tiled).view(n, self.kv_heads, d)
        cos, sin = cos_sin
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = store.attend(layer, q, k, v)  # the one seam: contiguous or paged
        return project(self.o_proj, out.reshape(n, self.heads * d), tiled)


class MLP(nn.Module):
    """SwiGLU: ``down_proj(silu(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
        gate = project(self.gate_proj, x, batch_invariant)
        up = project(self.up_proj, x, batch_invariant)
        return project(self.down_proj, nn.functional.silu(gate) * up, batch_invariant)


class DecoderLayer(nn.Module):
    """Pre-norm residual block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: dict[str, int | float]) -> None:
        super().__init__()
        hidden, eps = int(config["hidden_size"]), float(config["rms_norm_eps"])
        self.self_attn = Attention(
            hidden,
            int(config["num_attention_heads"]),
            int(config["num_key_value_heads"]),
            float(config["rope_theta"]),
        )
        self.mlp = MLP(hidden, int(config["intermediate_size"]))
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(
        self, x: torch.Tensor, cos_sin: tuple[torch.Tensor, ...], store: KVStore, layer: int
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos_sin, store, layer)
        return x + self.mlp(self.post_attention_layernorm(x), store.batch_invariant)
