"""A Llama configuration: :class:`LlamaConfig`, Hugging Face ``LlamaConfig``'s field names.

``LlamaConfig.from_hf(dict)`` fills in defaults and validates (errors name the field);
``to_hf()`` is the dict ``TinyLlama.config`` returns and ``transformers.LlamaConfig(**d)``
accepts. Only the fields this decoder implements are allowed (no biases, no rope scaling, SiLU
gates), so a config can never name a feature that is silently ignored.

Invariants: every field is a positive number; ``hidden_size`` is a multiple of
``num_attention_heads`` (``head_dim``, even, for rotary pairs) and ``num_attention_heads`` a
multiple of ``num_key_value_heads`` (query head ``h`` reads kv head ``h // group``, as in HF
and vLLM). ``tie_word_embeddings=True`` makes ``lm_head`` share ``embed_tokens``' matrix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from pagedlab.ground.checks import ArgumentTypeError, check_bool, check_int

IMPLIED: dict[str, object] = {
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "rope_scaling": None,
    "attention_dropout": 0.0,
    "pretraining_tp": 1,
}
"""Other LlamaConfig fields, accepted only at the value this decoder implements (and dropped)."""


def check_positive(value: object, name: str) -> float:
    """``value`` as a finite real number > 0 (a bool is not one); errors name ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be a number, got {value!r}")
    if not 0 < float(value) < float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_hf(self) -> dict[str, int | float]:
        """The fields as a dict (a fresh one): ``transformers.LlamaConfig(**config.to_hf())``."""
        return asdict(self)

    @classmethod
    def from_hf(cls, config: Mapping[str, object] | LlamaConfig) -> LlamaConfig:
        """A validated config from ``LlamaConfig`` fields (defaults filled in)."""
        if isinstance(config, LlamaConfig):
            return config
        if not isinstance(config, Mapping):
            raise ArgumentTypeError(f"config must be a dict of LlamaConfig fields, got {config!r}")
        for name, implied in IMPLIED.items():
            if name in config and config[name] != implied:
                raise ValueError(
                    f"config field {name} = {config[name]!r} is not supported (only {implied!r})"
                )
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(config) - set(allowed) - set(IMPLIED))
        if unknown:
            raise ValueError(f"config fields {unknown} are not supported; allowed: {allowed}")
        missing = [f.name for f in fields(cls) if f.type == "int" and f.name not in config]
        if missing:
            raise ValueError(f"config is missing {missing}")
        out: dict[str, object] = {}
        for f in fields(cls):
            value = config.get(f.name, f.default)
            if f.type == "int":
                out[f.name] = check_int(value, f.name, 1)
            elif f.type == "bool":
                out[f.name] = check_bool(value, f.name)
            else:
                out[f.name] = check_positive(value, f.name)
        checked = cls(**out)  # type: ignore[arg-type]
        heads, kv_heads = checked.num_attention_heads, checked.num_key_value_heads
        if checked.hidden_size % heads:
            raise ValueError(
                f"hidden_size ({checked.hidden_size}) must be a multiple of "
                f"num_attention_heads ({heads})"
            )
        if heads % kv_heads:
            raise ValueError(
                f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads "
                f"({kv_heads})"
            )
        if checked.head_dim % 2:
            raise ValueError("head_dim = hidden_size // num_attention_heads must be even (rotary)")
        return checked


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
