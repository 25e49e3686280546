"""Bytes per token and blocks per GiB: GQA, MLA, fp8 KV and sliding windows, for three models.

Per layer and token a cache stores ``2 * kv_heads * head_dim`` values (K and V, GQA) or
``kv_lora_rank + qk_rope_head_dim`` (MLA: one latent plus the rotary key, no separate V),
times the KV dtype's bytes (bf16 2, fp8 1). A block of ``block_size`` tokens holds every
layer's page, so a pool holds ``pool_bytes // (block_size * bytes_per_token)`` blocks. A
sliding-window layer keeps only its window: :func:`blocks_per_request` counts what a real
:class:`~pagedlab.frontier.hybrid.HybridRequest` holds. The model numbers are each model's
Hugging Face ``config.json`` (named with each).
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedlab.frontier.hybrid import HybridRequest, group_layers
from pagedlab.frontier.peers import vllm_block_pool
from pagedlab.ground.checks import check_choice, check_int

GIB = 1024**3
DTYPE_BYTES = {"bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class KVModel:
    """What a model's KV cache stores per token and layer, from its config."""

    name: str
    layers: int
    kv_heads: int  # GQA: K/V heads (MLA: 0)
    head_dim: int  # GQA: per head (MLA: 0)
    latent: int = 0  # MLA: kv_lora_rank + qk_rope_head_dim values, no separate V
    sliding_layers: int = 0
    window: int = 0
    source: str = ""

    def bytes_per_token(self, dtype: str = "bf16") -> int:
        """Every layer's K/V of one token, as stored (a sliding layer's too, while in window)."""
        check_choice(dtype, "dtype", tuple(DTYPE_BYTES))
        per_layer = self.latent or 2 * self.kv_heads * self.head_dim  # values (MLA: the latent)
        return self.layers * per_layer * DTYPE_BYTES[dtype]


MODELS: dict[str, KVModel] = {
    "Llama-3.1-8B": KVModel(
        "Llama-3.1-8B", layers=32, kv_heads=8, head_dim=128,
        source="meta-llama/Llama-3.1-8B config.json: num_hidden_layers 32, "
        "num_attention_heads 32, num_key_value_heads 8, hidden_size 4096 (head_dim 128): GQA",
    ),
    "DeepSeek-V3": KVModel(
        "DeepSeek-V3", layers=61, kv_heads=0, head_dim=0, latent=512 + 64,
        source="deepseek-ai/DeepSeek-V3 config.json: num_hidden_layers 61, kv_lora_rank 512, "
        "qk_rope_head_dim 64: MLA caches 576 values per token and layer, no separate V",
    ),
    "Gemma-3-27B": KVModel(
        "Gemma-3-27B", layers=62, kv_heads=16, head_dim=128, sliding_layers=52, window=1024,
        source="google/gemma-3-27b-it config.json (text_config): num_hidden_layers 62, "
        "num_key_value_heads 16, head_dim 128, sliding_window 1024, sliding_window_pattern 6 "
        "(5 local layers to 1 global: 52 sliding, 10 full)",
    ),
}  # fmt: skip
"""The three models of notebook 11, each with the config it was read from."""


def blocks_per_gib(model: KVModel, block_size: int = 16, dtype: str = "bf16") -> int:
    """Blocks of ``block_size`` tokens (every layer's page) that fit in one GiB."""
    block_size = check_int(block_size, "block_size", minimum=1)
    return GIB // (block_size * model.bytes_per_token(dtype))


def blocks_per_request(model: KVModel, context: int, block_size: int = 16) -> int:
    """Blocks (of every layer) one request of ``context`` tokens holds, sliding windows
    applied: counted on a real allocator, in vLLM's groups, scaled to whole-model blocks."""
    context = check_int(context, "context", minimum=1)
    block_size = check_int(block_size, "block_size", minimum=1)
    if not model.sliding_layers:
        return -(-context // block_size)
    groups = group_layers(model.layers - model.sliding_layers, model.sliding_layers, model.window)
    step = max(1, min(context, model.window // 2))
    full = sum(1 for g in groups if g.kind == "full")
    peak = full * -(-context // block_size) + (len(groups) - full) * (
        -(-(model.window + step) // block_size) + 1
    )  # what the groups can hold at once, chunk by chunk
    request = HybridRequest(vllm_block_pool(peak + 1, block_size), groups)  # + the null block
    done = 0
    while done < context:  # in chunks, as prefill would, so the windows slide as it goes
        n = min(step, context - done)
        request.append(n)
        done += n
    pages = request.held_blocks * groups[0].layers  # pages of one layer each
    return -(-pages // model.layers)  # in whole-model blocks, rounded up
