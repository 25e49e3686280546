"""pagedlab.frontier.kv_bytes: bytes per token and blocks per GiB for GQA, MLA, fp8 and windows."""

from __future__ import annotations

import pytest

from pagedlab.frontier.kv_bytes import MODELS, blocks_per_gib, blocks_per_request


def test_bytes_per_token_of_the_three_models() -> None:
    llama, deepseek, gemma = (MODELS[k] for k in ("Llama-3.1-8B", "DeepSeek-V3", "Gemma-3-27B"))
    assert llama.bytes_per_token() == 2 * 8 * 128 * 2 * 32 == 131_072  # 128 KiB, K and V
    assert deepseek.bytes_per_token() == 576 * 2 * 61 == 70_272  # one latent, no separate V
    assert gemma.bytes_per_token("fp8") * 2 == gemma.bytes_per_token()
    assert blocks_per_gib(llama) == 512 and blocks_per_gib(llama, dtype="fp8") == 1024
    assert all(m.source for m in MODELS.values())


def test_sliding_windows_hold_only_their_window() -> None:
    gemma, llama = MODELS["Gemma-3-27B"], MODELS["Llama-3.1-8B"]
    assert blocks_per_request(llama, 32_768) == 2048
    windowed = blocks_per_request(gemma, 32_768)
    assert 10 * 2048 / 62 < windowed < 2048 / 4  # 10 full layers' pages plus 52 windows
    assert blocks_per_request(gemma, 100) == 8  # 7 groups x 10 layers (8 padding) x 7 blocks / 62
    assert windowed == 393  # vLLM's grouping: 1 full and 6 sliding groups of 10 layers


def test_misuse() -> None:
    with pytest.raises(ValueError, match="dtype"):
        MODELS["DeepSeek-V3"].bytes_per_token("fp4")
    with pytest.raises(ValueError, match="context"):
        blocks_per_request(MODELS["Gemma-3-27B"], 0)
