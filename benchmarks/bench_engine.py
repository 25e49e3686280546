"""The engine's tokens per second on the CPU, beside transformers' generate(), one run.

Same model (the seeded TinyLlama config below, loaded into LlamaForCausalLM strictly), same
prompts, greedy, the same new tokens (asserted). Three ways:

- ``transformers``: ``LlamaForCausalLM.generate`` one prompt at a time (its dynamic cache);
- ``engine, kernel``: pagedlab's Engine, decodes through the Triton kernel (on the CPU: Triton's
  *interpreter*, which runs the kernel's program one block at a time in Python);
- ``engine, reference``: the same Engine with ``decode_attention=reference_attention``.

On a GPU the kernel compiles (this script still runs on the CPU, as the figures are meant for
a laptop). Speed is reported, never asserted.

Run: HF_HUB_OFFLINE=1 python benchmarks/bench_engine.py
"""

from __future__ import annotations

import os
import time

import torch

import pagedlab
from pagedlab.engine import Engine
from pagedlab.model import TinyLlama, generate_contiguous
from pagedlab.model.weights import BYTE_CONFIG as CONFIG  # the trained model's shape

os.environ.setdefault("HF_HUB_OFFLINE", "1")

NUM_PROMPTS, PROMPT_LEN, NEW = 8, 32, 24
NUM_BLOCKS, BLOCK_SIZE = 64, 16


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(2)
    model = TinyLlama(CONFIG, seed=0, init_std=0.3)
    hf = LlamaForCausalLM(LlamaConfig(**model.config))
    hf.load_state_dict(model.state_dict(), strict=True)
    hf.eval()
    hf.generation_config.eos_token_id = None  # LlamaConfig's default eos (2) would stop early
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (PROMPT_LEN,), generator=g).tolist() for _ in range(8)]
    oracle = [generate_contiguous(model, p, NEW) for p in prompts]

    def with_hf() -> list[list[int]]:
        out = []
        with torch.no_grad():
            for p in prompts:
                ids = torch.tensor([p])
                gen = hf.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=NEW,
                    do_sample=False,
                    pad_token_id=0,
                )
                out.append(gen[0, len(p) :].tolist())
        return out

    Engine(model, 8, BLOCK_SIZE).generate(prompts[:1], 2)  # warm the interpreter up
    rows = []
    hf_out, hf_s = timed(with_hf)
    assert hf_out == oracle, "transformers disagrees with generate_contiguous"
    rows.append(("transformers generate()", hf_s))
    for name, attention in [
        ("engine, Triton kernel (interpreter)", None),
        ("engine, reference_attention", pagedlab.reference_attention),
    ]:
        engine = Engine(model, NUM_BLOCKS, BLOCK_SIZE, decode_attention=attention)
        out, seconds = timed(lambda e=engine: e.generate(prompts, NEW))
        assert out == oracle, f"{name} disagrees with generate_contiguous"
        rows.append((f"{name} [{engine.stats.forwards} forwards]", seconds))
    tokens = NUM_PROMPTS * NEW
    print(
        f"{NUM_PROMPTS} prompts x {PROMPT_LEN} tokens, {NEW} new each ({tokens} tokens), "
        f"{model.num_layers} layers, hidden {CONFIG['hidden_size']}, block size {BLOCK_SIZE}, "
        f"torch {torch.__version__}, backend {pagedlab.attention.backend.BACKEND}"
    )
    for name, seconds in rows:
        print(f"  {name:<52} {seconds:7.2f} s  {tokens / seconds:8.1f} tokens/s")
    print(f"  ratio engine (kernel) / transformers: {hf_s / rows[1][1]:.3f} x the speed")
    print(f"  ratio engine (reference) / transformers: {hf_s / rows[2][1]:.3f} x the speed")
    print("  (same tokens from all three, asserted)")


if __name__ == "__main__":
    main()
