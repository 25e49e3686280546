"""A Llama GGUF file (llama.cpp's format) as a Hugging Face config and fp32 state dict.

:func:`read_llama_gguf` reads the ``llama.*`` metadata into ``LlamaConfig`` field names
(``_CONFIG_KEYS``) and dequantizes every tensor to fp32 with the ``gguf`` package
(``GGUFReader``, ``gguf.quants.dequantize``: Q4_1, Q8_0, F32, ...), renamed to
``LlamaForCausalLM``'s keys (``_TOP_NAMES``, ``_LAYER_NAMES``; no ``output`` tensor: tied).

llama.cpp's rotary pairs dimension ``2i`` with ``2i + 1`` of a head; HF's pairs ``i`` with
``i + head_dim / 2``. Converting a checkpoint to GGUF therefore permutes the rows of each head
of ``q_proj`` and ``k_proj``; :func:`unpermute_rows` undoes it. Nothing else is changed.

Only what this decoder implements is accepted: architecture ``llama``, no rope scaling; anything
else raises ValueError naming the key. No module here is named ``gguf`` (that is the package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from pagedlab.ground.checks import ArgumentTypeError, check_int
from pagedlab.model.checks import check_instance

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_CONFIG_KEYS = {  # LlamaConfig field -> GGUF metadata key (after "llama.")
    "max_position_embeddings": "context_length",
    "hidden_size": "embedding_length",
    "intermediate_size": "feed_forward_length",
    "num_hidden_layers": "block_count",
    "num_attention_heads": "attention.head_count",
    "num_key_value_heads": "attention.head_count_kv",
    "rms_norm_eps": "attention.layer_norm_rms_epsilon",
    "rope_theta": "rope.freq_base",
}


def hf_name(gguf_name: str) -> str:
    """The ``LlamaForCausalLM`` key of a GGUF tensor name; ValueError if it has none."""
    check_instance(gguf_name, str, "gguf_name")
    stem, dot, suffix = gguf_name.rpartition(".")
    if not dot or suffix not in ("weight", "bias"):
        raise ValueError(f"GGUF tensor {gguf_name!r}: expected a .weight")
    if stem in _TOP_NAMES:
        return f"{_TOP_NAMES[stem]}.{suffix}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_NAMES:
        return f"model.layers.{int(parts[1])}.{_LAYER_NAMES[parts[2]]}.{suffix}"
    raise ValueError(f"GGUF tensor {gguf_name!r} has no Llama counterpart")


def unpermute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary row order in ``weight`` ``[heads * head_dim, in]``, per head.

    GGUF row ``2i + half`` of a head holds HF row ``half * head_dim/2 + i``:
    ``[heads, head_dim/2, 2, in]`` -> swap the two middle axes -> ``[heads, 2, head_dim/2, in]``.
    """
    rows, cols, heads = _check_rows(weight, heads)
    half = rows // heads // 2
    return weight.reshape(heads, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def llama_config_from_gguf(reader: object) -> dict[str, int | float]:
    """``LlamaConfig`` fields from the ``llama.*`` metadata of an open ``GGUFReader``."""
    _check_reader(reader)
    config: dict[str, int | float] = {}
    for field, key in _CONFIG_KEYS.items():
        value = reader.get_field(f"llama.{key}").contents()  # type: ignore[attr-defined]
        if field in ("rms_norm_eps", "rope_theta"):
            # stored as float32: keep the shortest decimal that reads back to it (1e-05)
            config[field] = float(str(np.float32(value)))
        else:
            config[field] = int(value)
    return config


def open_reader(path: str | Path) -> Any:
    """``gguf.GGUFReader`` over the file copied into memory, not mapped: its metadata (SmolLM2's
    49,152 tokenizer strings) parses in 1.1 s instead of 3.2-5.0 (slicing a plain array costs
    less than slicing a ``memmap``), and rewriting the file later changes nothing read from it."""
    _check_path(path)
    from gguf.gguf_reader import GGUFReader  # the class (``gguf.GGUFReader`` may be patched)

    class InMemory(GGUFReader):  # the reader's own parsing, on a plain copy of its bytes
        @property
        def data(self) -> Any:
            return self._bytes

        @data.setter
        def data(self, mapped: Any) -> None:
            self._bytes = np.array(mapped)

    return InMemory(str(path))  # read-only: a copy is never written back


def read_llama_gguf(path: str | Path) -> tuple[dict[str, int | float], dict[str, torch.Tensor]]:
    """``(config, state_dict)`` of the Llama GGUF file at ``path``: fp32, HF names.

    ``config`` has ``vocab_size`` (rows of ``token_embd``) and ``tie_word_embeddings`` (True
    when the file has no ``output`` tensor). The tensors are fresh (owned by the caller).
    """
    _check_path(path)
    import gguf  # here, not at import: only this path needs it (and it takes a moment)

    reader = open_reader(path)
    config = llama_config_from_gguf(reader)
    heads = int(config["num_attention_heads"])
    kv_heads = int(config["num_key_value_heads"])
    weights: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        array = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        array = np.asarray(array, dtype=np.float32)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = array.copy()  # F32 tensors come back as views of the read-only file
        if name.endswith("q_proj.weight"):
            array = unpermute_rows(array, heads)
        elif name.endswith("k_proj.weight"):
            array = unpermute_rows(array, kv_heads)
        weights[name] = torch.from_numpy(array)
    if "model.embed_tokens.weight" not in weights:
        raise ValueError(f"{path}: no token_embd tensor")
    config["vocab_size"] = int(weights["model.embed_tokens.weight"].shape[0])
    config["tie_word_embeddings"] = "lm_head.weight" not in weights
    return config, weights


def _check_rows(weight: object, heads: object) -> tuple[int, int, int]:
    """A 2-D array whose rows split into ``heads >= 1`` heads of even size."""
    array = check_instance(weight, np.ndarray, "weight")
    count = check_int(heads, "heads", minimum=1)
    if array.ndim != 2:
        raise ValueError(f"weight must be 2-D [rows, in], got shape {array.shape}")
    rows, cols = array.shape
    if rows % (2 * count):
        raise ValueError(f"{rows} rows do not split into {count} heads of even size")
    return rows, cols, count


def _check_path(path: object) -> None:
    """A str or Path naming an existing file."""
    if not isinstance(path, (str, Path)):
        raise ArgumentTypeError(f"path must be a str or Path, got {type(path).__name__}")
    if not Path(path).is_file():
        raise ValueError(f"path {str(path)!r} is not a file")


def _check_reader(reader: object) -> None:
    """A GGUF reader of a Llama file without rope scaling, holding every config key."""
    get_field = getattr(reader, "get_field", None)
    if not callable(get_field):
        raise ArgumentTypeError(f"reader must be a GGUFReader, got {type(reader).__name__}")
    keys = ["general.architecture", *(f"llama.{key}" for key in _CONFIG_KEYS.values())]
    for key in keys:
        if get_field(key) is None:
            raise ValueError(f"GGUF metadata {key!r} is missing")
    arch = get_field("general.architecture").contents()
    if arch != "llama":
        raise ValueError(f"GGUF general.architecture is {arch!r}, expected 'llama'")
    if get_field("llama.rope.scaling.type") is not None:
        raise ValueError("GGUF llama.rope.scaling.type: rope scaling is not supported")
