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
rows). With the flag set, every projection runs on tiles of exactly ``ROW_TILE`` rows, one
call per tile, so a token's result depends on its own row only: the same in a batch of 40 as
alone (a product computes each output from its own row; that it does so the same way in
either row of a tile is tested). RMSNorm, rotary, SiLU and the products of two activations
are row-wise already (one row's numbers never meet another's).
"""

from __future__ import annotations

import torch
from torch import nn

from pagedlab.ground.checks import ArgumentTypeError, check_bool, check_int
from pagedlab.model.checks import check_instance, check_store
from pagedlab.model.config import LlamaConfig, check_positive
from pagedlab.model.kv import KVStore

ROW_TILE = 2
"""Rows per matrix product in batch-invariant mode (one kernel shape for every token).

Two: a 2-row product costs what a 1-row one does (both read the weights once: 170 us for
SmolLM2's 576 x 1536 on one core, 356 us for 4 rows), so a prefill makes half the calls and
a lone decode token pays nothing extra (16-row tiles made it pay for 16: 9.6 s of CPU for the
oracle's 4 x 16 tokens, against 4.9 s with one-row tiles)."""


def project(linear: nn.Linear, x: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
    """``linear(x)`` for ``x`` ``[tokens, in]``; with ``batch_invariant``, tile by tile.

    Each tile of ``ROW_TILE`` rows (the last zero-padded) is one call of the same shape, so
    row ``i``'s output does not depend on how many rows, or which, share the call.
    """
    _check_tokens(x, check_instance(linear, nn.Linear, "linear").in_features)
    check_bool(batch_invariant, "batch_invariant")
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
        size = check_int(size, "size", minimum=1)
        eps = check_positive(eps, "eps")
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_rows(x, self.weight.shape[0], "x")
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rotary(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, ...]:
    """cos and sin ``[tokens, head_dim]`` (fp32) for integer ``positions`` ``[tokens]``."""
    _check_rotary(positions, head_dim, theta)
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    freqs = positions.float()[:, None] * inv_freq.to(positions.device)[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[tokens, heads, d]`` by its positions' angles (HF's rotate-half form)."""
    _check_apply_rotary(x, cos, sin)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos[:, None, :] + rotated * sin[:, None, :]).to(x.dtype)


class Attention(nn.Module):
    """Grouped-query self-attention; K/V storage and reading are delegated to a KVStore."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, theta: float) -> None:
        _check_attention(hidden, heads, kv_heads, theta)
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
        _check_layer_input(x, self.q_proj.in_features, cos_sin, store, layer)
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
        _check_sizes(hidden=hidden, intermediate=intermediate)
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
        _check_tokens(x, self.gate_proj.in_features)
        check_bool(batch_invariant, "batch_invariant")
        gate = project(self.gate_proj, x, batch_invariant)
        up = project(self.up_proj, x, batch_invariant)
        return project(self.down_proj, nn.functional.silu(gate) * up, batch_invariant)


class DecoderLayer(nn.Module):
    """Pre-norm residual block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: LlamaConfig | dict[str, int | float]) -> None:
        c = _check_decoder(config)
        super().__init__()
        heads, kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.self_attn = Attention(c.hidden_size, heads, kv_heads, c.rope_theta)
        self.mlp = MLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, cos_sin: tuple[torch.Tensor, ...], store: KVStore, layer: int
    ) -> torch.Tensor:
        _check_layer_input(x, self.self_attn.q_proj.in_features, cos_sin, store, layer)
        x = x + self.self_attn(self.input_layernorm(x), cos_sin, store, layer)
        return x + self.mlp(self.post_attention_layernorm(x), store.batch_invariant)


# --- guards: shapes and kinds only (no read of a tensor's values: no device sync) ---------
def _check_rows(x: object, width: int, name: str) -> torch.Tensor:
    """``x`` a float tensor whose last dimension is ``width``."""
    t = check_instance(x, torch.Tensor, name)
    if not t.dtype.is_floating_point:
        raise ArgumentTypeError(f"{name} must hold floats, got {t.dtype}")
    if t.dim() < 1 or t.shape[-1] != width:
        raise ValueError(f"{name} must end in {width} features, got shape {tuple(t.shape)}")
    return t


def _check_tokens(x: object, width: int) -> None:
    """``x`` ``[tokens, width]`` floats."""
    t = _check_rows(x, width, "x")
    if t.dim() != 2:
        raise ValueError(f"x must be [tokens, {width}], got shape {tuple(t.shape)}")


def _check_sizes(**sizes: object) -> list[int]:
    """Every size an integer >= 1."""
    return [check_int(value, name, minimum=1) for name, value in sizes.items()]


def _check_rotary(positions: object, head_dim: object, theta: object) -> None:
    """Integer ``positions`` ``[tokens]``, an even ``head_dim >= 2``, ``theta > 0``."""
    t = check_instance(positions, torch.Tensor, "positions")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise ArgumentTypeError(f"positions must hold integers, got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"positions must be [tokens], got shape {tuple(t.shape)}")
    if check_int(head_dim, "head_dim", minimum=2) % 2:
        raise ValueError(f"head_dim must be even (rotary pairs), got {head_dim}")
    check_positive(theta, "theta")


def _check_apply_rotary(x: object, cos: object, sin: object) -> None:
    """``x`` ``[tokens, heads, d]``; cos and sin ``[tokens, d]``."""
    t = check_instance(x, torch.Tensor, "x")
    if t.dim() != 3:
        raise ValueError(f"x must be [tokens, heads, d], got shape {tuple(t.shape)}")
    for name, angle in (("cos", cos), ("sin", sin)):
        a = check_instance(angle, torch.Tensor, name)
        if tuple(a.shape) != (t.shape[0], t.shape[2]):
            raise ValueError(
                f"{name} must be [{t.shape[0]}, {t.shape[2]}] for x {tuple(t.shape)}, "
                f"got {tuple(a.shape)}"
            )


def _check_attention(hidden: object, heads: object, kv_heads: object, theta: object) -> None:
    """Sizes >= 1; ``hidden`` splits into ``heads`` of even size; ``heads`` a multiple of
    ``kv_heads``; ``theta > 0``."""
    width, h, kv = _check_sizes(hidden=hidden, heads=heads, kv_heads=kv_heads)
    if width % h or (width // h) % 2:
        raise ValueError(f"hidden {width} must split into {h} heads of even size")
    if h % kv:
        raise ValueError(f"heads ({h}) must be a multiple of kv_heads ({kv})")
    check_positive(theta, "theta")


def _check_layer_input(
    x: object, hidden: int, cos_sin: object, store: object, layer: object
) -> None:
    """``x`` ``[tokens, hidden]`` floats, a (cos, sin) pair, a KVStore, ``layer >= 0``."""
    _check_tokens(x, hidden)
    if not isinstance(cos_sin, tuple) or len(cos_sin) != 2:
        raise ArgumentTypeError(f"cos_sin must be a (cos, sin) pair, got {type(cos_sin).__name__}")
    check_store(store)
    check_int(layer, "layer", minimum=0)


def _check_decoder(config: object) -> LlamaConfig:
    """A LlamaConfig, or a dict of its fields (validated: :meth:`LlamaConfig.from_hf`)."""
    return LlamaConfig.from_hf(config)  # type: ignore[arg-type]
