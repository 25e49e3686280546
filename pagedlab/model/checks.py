"""The model's argument checks, of which each public function's one guard is built.

Every public function and method of :mod:`pagedlab.model` starts with one named guard, then
runs its mechanism; nothing is validated inside the mechanism. A wrong kind raises
:class:`~pagedlab.ground.checks.ArgumentTypeError` (a ``TypeError``, also a ``ValueError``), a wrong
value ``ValueError``; every message names the argument and the value, and a refused call
changes nothing. The checks take sizes or a config, not a ``TinyLlama`` (no import cycle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import torch

from pagedlab.ground.checks import ArgumentTypeError, check_int
from pagedlab.model.config import LlamaConfig

T = TypeVar("T")

ID_DTYPES = (torch.int32, torch.int64)
"""Dtypes ``nn.Embedding`` takes as token ids."""


def check_instance(value: object, kind: type[T], name: str) -> T:
    """``value`` is a ``kind``; else an ArgumentTypeError naming ``name`` and the type given."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def check_token_ids(
    tokens: object, name: str, vocab_size: int | None, allow_empty: bool = False
) -> list[int]:
    """``tokens`` as a list of ints in ``[0, vocab_size)`` (``>= 0`` when ``vocab_size`` is
    None): a sequence, not a string or a tensor; empty only if ``allow_empty``."""
    if isinstance(tokens, (str, bytes, torch.Tensor)) or not isinstance(tokens, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of token ids, got {type(tokens).__name__}")
    if not tokens and not allow_empty:
        raise ValueError(f"{name} must hold at least one token id, got []")
    top = None if vocab_size is None else vocab_size - 1
    return [check_int(t, f"{name}[{i}]", 0, top) for i, t in enumerate(tokens)]


def check_prompts(prompts: object, vocab_size: int | None) -> list[list[int]]:
    """One or more prompts, each checked by :func:`check_token_ids` (named ``prompts[i]``)."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise ArgumentTypeError(f"prompts must be a list of prompts, got {prompts!r}")
    if not prompts:
        raise ValueError("prompts must hold at least one prompt, got []")
    return [check_token_ids(p, f"prompts[{i}]", vocab_size) for i, p in enumerate(prompts)]


def check_length(max_positions: int, prompt: list[int], max_new_tokens: object, name: str) -> int:
    """``max_new_tokens`` >= 1 and room for it within ``max_position_embeddings``."""
    n = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    if len(prompt) + n > max_positions:
        raise ValueError(
            f"{name} has {len(prompt)} tokens + max_new_tokens {n} = {len(prompt) + n}, more "
            f"than max_position_embeddings = {max_positions}"
        )
    return n


def check_id_tensor(
    ids: object, name: str, dims: int, vocab_size: int, device: torch.device
) -> torch.Tensor:
    """``ids`` is an int32/int64 tensor of ``dims`` dimensions on ``device`` whose every
    entry is a token id in ``[0, vocab_size)`` (one read of its min and max)."""
    if not isinstance(ids, torch.Tensor):
        raise ArgumentTypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids)}")
    if ids.dtype not in ID_DTYPES:
        raise ArgumentTypeError(f"{name} must hold int32 or int64 token ids, got {ids.dtype}")
    if ids.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimension(s), got shape {tuple(ids.shape)}")
    if ids.device != device:
        raise ValueError(f"{name} is on {ids.device}, the model on {device}")
    if ids.numel():
        outside = (ids < 0) | (ids >= vocab_size)
        if bool(outside.any()):
            bad = int(ids[outside][0])
            raise ValueError(f"{name} holds token id {bad}, outside [0, {vocab_size})")
    return ids


def check_positions(positions: object, count: int, max_positions: int, device: object) -> None:
    """``positions`` is a 1-D integer tensor of ``count`` entries in ``[0, max_positions)``
    on ``device``."""
    if not isinstance(positions, torch.Tensor):
        raise ArgumentTypeError(f"positions must be a torch.Tensor, got {type(positions)}")
    dtype = positions.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise ArgumentTypeError(f"positions must hold integers, got {dtype}")
    if tuple(positions.shape) != (count,):
        raise ValueError(f"positions must be [{count}] (one per id), got {tuple(positions.shape)}")
    if positions.device != device:
        raise ValueError(f"positions is on {positions.device}, the ids on {device}")
    if count:
        outside = (positions < 0) | (positions >= max_positions)
        if bool(outside.any()):
            bad = int(positions[outside][0])
            raise ValueError(f"positions holds {bad}, outside [0, {max_positions})")


def check_store(store: object) -> None:
    """``store`` is a KVStore: an ``attend`` method and a ``batch_invariant`` flag."""
    if not callable(getattr(store, "attend", None)) or not hasattr(store, "batch_invariant"):
        raise ArgumentTypeError(
            f"store must be a KVStore (attend, batch_invariant), got {type(store).__name__}"
        )


def check_qkv(q: object, k: object, v: object, first: object) -> int:
    """q ``[n, heads, d]``, k and v ``[first + n, kv_heads, d]`` tensors, ``heads`` a multiple
    of ``kv_heads``, ``first >= 0``; returns ``first``."""
    q, k, v = (check_instance(t, torch.Tensor, name) for name, t in (("q", q), ("k", k), ("v", v)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.dtype.is_floating_point:
            raise ArgumentTypeError(f"{name} must hold floats, got {t.dtype}")
        if t.dim() != 3:
            raise ValueError(f"{name} must be 3-D, got shape {tuple(t.shape)}")
    start = check_int(first, "first", minimum=0)
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)}, {tuple(v.shape)}")
    n, heads, d = q.shape
    if k.shape[2] != d or heads % k.shape[1]:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit k {tuple(k.shape)}: head_dim must match and "
            "heads be a multiple of kv_heads"
        )
    if k.shape[0] != start + n:
        raise ValueError(f"k has {k.shape[0]} positions, first + len(q) = {start + n}")
    return start


def check_flat_attend(
    layer: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: int, of: str
) -> None:
    """``layer >= 0``; q, k, v of ``rows`` rows each (a store over whole sequences: ``of``
    names what fixes that count in the message)."""
    check_int(layer, "layer", minimum=0)
    check_qkv(q, k, v, 0)
    if q.shape[0] != rows:
        raise ValueError(f"q has {q.shape[0]} rows, {of} {rows}")


def parameter_shapes(config: Mapping[str, int | float] | LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter of a config's model, HF names, at its shape; a tied config has no
    ``lm_head.weight`` of its own."""
    c = LlamaConfig.from_hf(config)
    hidden, vocab, inter, d = c.hidden_size, c.vocab_size, c.intermediate_size, c.head_dim
    heads, kv_heads = c.num_attention_heads, c.num_key_value_heads
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(c.num_hidden_layers):
        layer = f"model.layers.{i}"
        shapes |= {
            f"{layer}.self_attn.q_proj.weight": (heads * d, hidden),
            f"{layer}.self_attn.k_proj.weight": (kv_heads * d, hidden),
            f"{layer}.self_attn.v_proj.weight": (kv_heads * d, hidden),
            f"{layer}.self_attn.o_proj.weight": (hidden, heads * d),
            f"{layer}.mlp.gate_proj.weight": (inter, hidden),
            f"{layer}.mlp.up_proj.weight": (inter, hidden),
            f"{layer}.mlp.down_proj.weight": (hidden, inter),
            f"{layer}.input_layernorm.weight": (hidden,),
            f"{layer}.post_attention_layernorm.weight": (hidden,),
        }
    shapes["model.norm.weight"] = (hidden,)
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (vocab, hidden)
    return shapes


def check_weights(
    config: Mapping[str, object], weights: object
) -> tuple[LlamaConfig, dict[str, torch.Tensor]]:
    """A validated config and the weights to take: every parameter at its shape and nothing
    else; a tied config may also give ``lm_head.weight`` if it holds the very values of
    ``model.embed_tokens.weight`` (it is left out of the result). The caller's mapping and
    tensors are not changed."""
    checked = LlamaConfig.from_hf(config)
    if not isinstance(weights, Mapping):
        raise ArgumentTypeError(f"weights must be a dict of tensors, got {type(weights).__name__}")
    given = dict(weights)
    for name, tensor in given.items():
        if not isinstance(tensor, torch.Tensor):
            raise ArgumentTypeError(f"weights[{name!r}] must be a torch.Tensor, got {tensor!r}")
    if checked.tie_word_embeddings and "lm_head.weight" in given:
        head = given.pop("lm_head.weight")
        embed = given.get("model.embed_tokens.weight")
        if embed is None or not torch.equal(head, embed):
            raise ValueError("tied config: lm_head.weight must equal model.embed_tokens.weight")
    expected = parameter_shapes(checked)
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    if missing or unexpected:
        raise ValueError(f"weights: missing {missing}, unexpected {unexpected}")
    for name, shape in expected.items():
        if tuple(given[name].shape) != shape:
            raise ValueError(
                f"weights[{name!r}] has shape {tuple(given[name].shape)}, expected {shape}"
            )
    return checked, given
