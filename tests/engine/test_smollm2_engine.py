"""SmolLM2 through the engine: the tokens of transformers reading the same file, whatever the
pages did (preemption by recompute and by swap, prefix caching, chunked prefill).

Two oracles: ``transformers``' own reading of the GGUF (``generate``, the prompts in one
left-padded batch) and ``generate_contiguous`` (one request alone, computed as if alone). The
default engine must agree with both up to a near-tie (the first different token at a logit
gap <= 1e-4); ``batch_invariant=True`` must equal ``generate_contiguous`` token for token.
Also: the Triton kernel, run on the engine's own pages at every decode, matches the torch
path, and a forged near-tie is decided the oracle's way by ``batch_invariant=True``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import pagedlab
from pagedlab.engine import Engine
from pagedlab.engine.near_tie import forge_near_tie
from pagedlab.model import TinyLlama, generate_contiguous, pretrained
from pagedlab.model.agreement import first_divergence
from pagedlab.model.smollm2 import chat_prompt, transformers_greedy

NEW = 8
QUESTIONS = ["What is the capital of France?", "Name the three primary colours."]


@pytest.fixture(scope="module")
def smollm2() -> tuple[TinyLlama, Any, list[list[int]]]:
    model, tokenizer = pretrained()
    return model, tokenizer, [chat_prompt(tokenizer, q) for q in QUESTIONS]


@pytest.fixture(scope="module")
def oracles(
    smollm2: tuple[TinyLlama, Any, list[list[int]]], smollm2_transformers: Any
) -> tuple[list, list]:
    """(transformers' tokens, generate_contiguous's tokens) per prompt (transformers' model:
    ``transformers_model()``, loaded once per worker, tests/conftest.py)."""
    model, tokenizer, prompts = smollm2
    hf = smollm2_transformers
    pad = tokenizer.pad_token_id
    hf_tokens = transformers_greedy(hf, prompts, NEW, pad)  # one left-padded batch
    return hf_tokens, [generate_contiguous(model, p, NEW) for p in prompts]


def agrees(model: TinyLlama, prompts: list[list[int]], want: list, got: list) -> bool:
    splits = [first_divergence(model, p, w, g) for p, w, g in zip(prompts, want, got, strict=True)]
    return all(d is None or d.near_tie for d in splits)


def test_the_oracles_agree(smollm2: tuple, oracles: tuple[list, list]) -> None:
    model, _, prompts = smollm2
    hf_tokens, contiguous = oracles
    assert agrees(model, prompts, contiguous, hf_tokens)


# (num_blocks, block_size, preemption, token_budget, prefix_caching): pools that admit both
# requests (prompts of 37 and 36 tokens) and then run out as they grow, so one is preempted.
# With prefix caching the second prompt starts on the first's 3 shared blocks in the very
# step that schedules them, so whole prefills on 11 blocks of 8 preempt only without it.
SETTINGS = [
    (11, 8, "recompute", None, False),
    (11, 8, "swap", None, False),
    (14, 4, "recompute", 16, True),
    (14, 4, "swap", 16, True),
]


@pytest.mark.parametrize("batch_invariant", [False, True])
@pytest.mark.parametrize(("num_blocks", "block_size", "preemption", "budget", "prefix"), SETTINGS)
def test_the_engine_gives_transformers_tokens_under_preemption(
    smollm2: tuple,
    oracles: tuple[list, list],
    num_blocks: int,
    block_size: int,
    preemption: str,
    budget: int | None,
    prefix: bool,
    batch_invariant: bool,
) -> None:
    model, _, prompts = smollm2
    hf_tokens, contiguous = oracles
    engine = Engine(
        model,
        num_blocks,
        block_size,
        preemption=preemption,
        token_budget=budget,
        prefix_caching=prefix,
        batch_invariant=batch_invariant,
    )
    out = engine.generate(prompts, NEW)
    assert engine.last_run is not None and engine.last_run.preemptions > 0
    if batch_invariant:
        assert out == contiguous
    assert agrees(model, prompts, contiguous, out)
    assert agrees(model, prompts, hf_tokens, out)
    assert engine.allocator.num_free == num_blocks


def test_the_kernel_reads_the_engines_pages_as_the_torch_path(smollm2: tuple) -> None:
    model, _, prompts = smollm2
    launches: list[int] = []

    def read(query: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        launches.append(query.shape[0])
        out = pagedlab.paged_attention(query, *args)
        torch.testing.assert_close(out, pagedlab.torch_paged_attention(query, *args))
        return out

    engine = Engine(model, 12, 16, decode_attention=read)
    engine.generate(prompts, 3)  # 2 decode steps x 30 layers, both sequences in each launch
    assert launches == [2] * 2 * model.num_layers


def test_eos_ends_an_answer(smollm2: tuple) -> None:
    model, tokenizer, prompts = smollm2
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    engine = Engine(model, 16, 16)
    first, second = engine.generate(prompts, 24, eos_token_id=eos)
    assert "Paris" in tokenizer.decode(first) and first[-1] == eos and len(first) < 24
    assert engine.allocator.num_free == 16


def test_a_forged_near_tie_flips_the_batch_and_batch_invariance_settles_it(smollm2: tuple) -> None:
    model, _, prompts = smollm2
    tie = forge_near_tie(model, prompts)
    if tie is None:
        pytest.skip("this CPU's batched and lone forwards agree to the last bit")
    alone = generate_contiguous(tie.model, prompts[tie.index], 1)
    batched = Engine(tie.model, 12, 16).generate(prompts, 1)[tie.index]
    invariant = Engine(tie.model, 12, 16, batch_invariant=True).generate(prompts, 1)[tie.index]
    assert batched != alone == invariant
    assert alone == [tie.oracle_token] and batched == [tie.batched_token]  # what it reports
    divergence = first_divergence(tie.model, prompts[tie.index], alone, batched)
    assert divergence is not None and divergence.near_tie
