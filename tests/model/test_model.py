"""TinyLlama against Hugging Face's LlamaForCausalLM, and the contiguous-cache oracle.

The same weights (our state dict, loaded strictly into HF's model) must give the same logits
in fp32, max abs difference <= 1e-4, over configs with and without grouped-query attention;
generate_contiguous must equal HF's greedy generate(). Weights are scaled up from the default
init (std 0.5) so logits are O(1) and the tolerance means something.
"""

from __future__ import annotations

import os

import pytest
import torch

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.model import TINY, LlamaConfig, TinyLlama, generate_contiguous

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

CONFIGS = {
    "gqa": TINY,
    "mha": {**TINY, "num_key_value_heads": 4},
    "mqa": {**TINY, "num_key_value_heads": 1, "num_hidden_layers": 3},
    "wide": {
        **TINY,
        "hidden_size": 48,
        "num_attention_heads": 6,
        "num_key_value_heads": 3,
        "intermediate_size": 80,
        "rope_theta": 500.0,
        "rms_norm_eps": 1e-5,
    },
}


def hf_twin(model: TinyLlama) -> torch.nn.Module:
    config = transformers.LlamaConfig(**model.config)
    twin = transformers.LlamaForCausalLM(config)
    twin.load_state_dict(model.state_dict(), strict=True)
    return twin.eval()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_logits_equal_hugging_face(name: str) -> None:
    model = TinyLlama(CONFIGS[name], seed=3, init_std=0.5)
    twin = hf_twin(model)
    ids = torch.randint(0, TINY["vocab_size"], (3, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = model(ids), twin(ids).logits
    assert ours.shape == theirs.shape == (3, 17, model.vocab_size)
    assert theirs.abs().max() > 1.0  # O(1) logits: the tolerance is not vacuous
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_state_dict_names_are_hugging_faces_and_load_both_ways() -> None:
    model = TinyLlama(TINY, seed=0)
    twin = transformers.LlamaForCausalLM(transformers.LlamaConfig(**model.config))
    assert list(model.state_dict()) == list(twin.state_dict())
    back = TinyLlama(TINY, seed=9)
    back.load_state_dict(twin.state_dict(), strict=True)
    assert all(
        torch.equal(a, b)
        for a, b in zip(back.state_dict().values(), twin.state_dict().values(), strict=True)
    )
    assert model.config == LlamaConfig.from_hf(TINY).to_hf() and model.config is not model.config


@pytest.mark.parametrize("name", ["gqa", "mqa"])
def test_generate_contiguous_equals_hugging_face_greedy(name: str) -> None:
    model = TinyLlama(CONFIGS[name], seed=5, init_std=0.5)
    twin = hf_twin(model)
    twin.generation_config.eos_token_id = None  # LlamaConfig's default eos (2) stops early
    prompt = [3, 14, 15, 9, 2, 6]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = twin.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
        )
    assert generate_contiguous(model, prompt, 12) == out[0, len(prompt) :].tolist()


def test_contiguous_cache_logits_equal_full_forward() -> None:
    """Incremental decoding (one token at a time) gives the full forward's logits."""
    from pagedlab.model.kv import ContiguousCache

    model = TinyLlama(TINY, seed=2, init_std=0.5)
    ids = list(range(10, 30))
    with torch.no_grad():
        full = model(torch.tensor([ids]))[0]
        cache = ContiguousCache(model.num_layers)
        first = model.hidden(torch.tensor(ids[:7]), torch.arange(7), cache)
        rows = [model.lm_head(first)]
        for p in range(7, len(ids)):
            h = model.hidden(torch.tensor([ids[p]]), torch.tensor([p]), cache)
            rows.append(model.lm_head(h))
    assert (torch.cat(rows) - full).abs().max().item() <= 1e-4


def test_fields_at_the_implemented_value_are_accepted_and_dropped() -> None:
    model = TinyLlama({**TINY, "tie_word_embeddings": False, "hidden_act": "silu"})
    assert model.config == LlamaConfig.from_hf(TINY).to_hf()


def test_tied_embeddings_are_one_matrix_and_equal_hugging_face() -> None:
    """``tie_word_embeddings=True`` (SmolLM2): lm_head is embed_tokens, in HF's model too."""
    model = TinyLlama({**TINY, "tie_word_embeddings": True}, seed=3, init_std=0.5)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    twin = hf_twin(model)
    assert twin.lm_head.weight is twin.model.embed_tokens.weight
    ids = torch.randint(0, TINY["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (model(ids) - twin(ids).logits).abs().max().item() <= 1e-4


def test_from_state_dict_takes_the_tensors_and_checks_the_keys() -> None:
    model = TinyLlama({**TINY, "tie_word_embeddings": True}, seed=1)
    weights = {k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    back = TinyLlama.from_state_dict(model.config, weights)
    assert back.model.norm.weight is not None and not back.training
    assert (
        back.model.embed_tokens.weight.data_ptr() == weights["model.embed_tokens.weight"].data_ptr()
    )
    assert back.lm_head.weight is back.model.embed_tokens.weight
    ids = torch.tensor([[1, 5, 9]])
    with torch.no_grad():
        assert torch.equal(back(ids), model(ids))
    with pytest.raises(ValueError, match="missing"):
        TinyLlama.from_state_dict(
            model.config, {k: v for k, v in weights.items() if "norm" not in k}
        )
    with pytest.raises(ValueError, match="shape"):
        TinyLlama.from_state_dict(model.config, {**weights, "model.norm.weight": torch.ones(3)})
    with pytest.raises(ValueError, match="lm_head.weight must equal"):
        TinyLlama.from_state_dict(
            model.config, {**weights, "lm_head.weight": torch.zeros(TINY["vocab_size"], 32)}
        )


def test_same_seed_same_weights_and_other_seed_differs() -> None:
    a, b, c = TinyLlama(TINY, seed=4), TinyLlama(TINY, seed=4), TinyLlama(TINY, seed=5)
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": 30}, "multiple of num_attention_heads"),
        ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
        ({"mlp_bias": True}, "not supported"),
        ({"tie_word_embeddings": 1}, "True or False"),
        ({"hidden_act": "gelu"}, "not supported"),
        ({"sliding_window": 4}, "not supported"),
        ({"rope_theta": -1.0}, "rope_theta"),
        ({"vocab_size": 0}, "vocab_size"),
    ],
)
def test_bad_config_is_refused_naming_the_field(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TinyLlama({**TINY, **change})


def test_bad_prompts_are_refused_naming_the_value() -> None:
    model = TinyLlama(TINY)
    with pytest.raises(ValueError, match=r"prompt\[1\] must be <= 63, got 64"):
        generate_contiguous(model, [1, 64], 3)
    with pytest.raises(ValueError, match="at least one token"):
        generate_contiguous(model, [], 3)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        generate_contiguous(model, [1], 0)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        generate_contiguous(model, [1] * 250, 10)
    with pytest.raises(TypeError):
        generate_contiguous(model, "abc", 3)  # type: ignore[arg-type]


def test_the_config_is_a_frozen_dataclass_and_the_public_dict_round_trips() -> None:
    """``model.cfg`` is the frozen LlamaConfig; ``model.config`` stays the HF-named dict."""
    model = TinyLlama(TINY)
    assert isinstance(model.cfg, LlamaConfig) and isinstance(model.config, dict)
    assert LlamaConfig.from_hf(model.config) == model.cfg and model.cfg.head_dim == 8
    assert model.config == {**TINY, "tie_word_embeddings": False}
    with pytest.raises(AttributeError):
        model.cfg.hidden_size = 64  # type: ignore[misc]
