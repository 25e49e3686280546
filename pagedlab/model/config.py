"""A Llama configuration as a plain dict, with Hugging Face ``LlamaConfig``'s field names.

:func:`llama_config` fills in defaults and validates; the result is what
``TinyLlama.config`` returns and what ``transformers.LlamaConfig(**config)`` accepts. Only the
fields this decoder implements are allowed (no biases, no rope scaling, SiLU gates), so a
config can never name a feature that is silently ignored. ``tie_word_embeddings`` (a bool,
``LlamaConfig``'s default ``False``) is always present in the result: ``True`` makes
``lm_head`` share ``embed_tokens``' matrix (SmolLM2 does), ``False`` gives it its own.

Invariants: every field is a positive number; ``hidden_size`` is a multiple of
``num_attention_heads`` (``head_dim = hidden_size // num_attention_heads``, even, for rotary
pairs) and ``num_attention_heads`` a multiple of ``num_key_value_heads`` (grouped-query
attention: query head ``h`` reads kv head ``h // group``, as in HF and vLLM).
"""

from __future__ import annotations

from collections.abc import Mapping

from pagedlab.checks import ArgumentTypeError, check_bool, check_int

INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
)
FLOAT_FIELDS = ("rms_norm_eps", "rope_theta")
BOOL_FIELDS = ("tie_word_embeddings",)
DEFAULTS: dict[str, float] = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0}
IMPLIED: dict[str, object] = {
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "rope_scaling": None,
    "attention_dropout": 0.0,
    "pretraining_tp": 1,
}
"""Other LlamaConfig fields, accepted only at the value this decoder implements (and dropped)."""

TINY: dict[str, int | float] = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
"""A config small enough for the equivalence tests (head_dim 8, two kv heads: GQA)."""


def llama_config(config: Mapping[str, object]) -> dict[str, int | float]:
    """A validated copy of ``config``, defaults filled in; errors name the field.

    Values are ints, floats and one bool (``tie_word_embeddings``; a bool is an int).
    """
    if not isinstance(config, Mapping):
        raise ArgumentTypeError(f"config must be a dict of LlamaConfig fields, got {config!r}")
    for name, implied in IMPLIED.items():
        if name in config and config[name] != implied:
            raise ValueError(
                f"config field {name} = {config[name]!r} is not supported (only {implied!r})"
            )
    allowed = INT_FIELDS + FLOAT_FIELDS + BOOL_FIELDS
    unknown = sorted(set(config) - set(allowed) - set(IMPLIED))
    if unknown:
        raise ValueError(f"config fields {unknown} are not supported; allowed: {allowed}")
    missing = [name for name in INT_FIELDS if name not in config]
    if missing:
        raise ValueError(f"config is missing {missing}")
    out: dict[str, int | float] = {name: check_int(config[name], name, 1) for name in INT_FIELDS}
    for name in FLOAT_FIELDS:
        value = config.get(name, DEFAULTS[name])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentTypeError(f"{name} must be a number, got {value!r}")
        if not 0 < float(value) < float("inf"):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        out[name] = float(value)
    for name in BOOL_FIELDS:
        out[name] = check_bool(config.get(name, False), name)
    heads, kv_heads = int(out["num_attention_heads"]), int(out["num_key_value_heads"])
    if int(out["hidden_size"]) % heads:
        raise ValueError(
            f"hidden_size ({out['hidden_size']}) must be a multiple of "
            f"num_attention_heads ({heads})"
        )
    if heads % kv_heads:
        raise ValueError(
            f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})"
        )
    if (int(out["hidden_size"]) // heads) % 2:
        raise ValueError("head_dim = hidden_size // num_attention_heads must be even (rotary)")
    return out


def head_dim(config: Mapping[str, int | float]) -> int:
    """Size of one attention head: ``hidden_size // num_attention_heads``."""
    return int(config["hidden_size"]) // int(config["num_attention_heads"])
