"""The engine keeps its promise under errors, threads, weight changes and tight pools.

Each test names a way the promise (every request's tokens are the oracle's, every block
comes back) used to break, and checks it holds now:

- capacity counts exactly what is stored: prompt + max_new_tokens - 1 positions (the last
  new token's K/V is never written), so a pool that holds that is enough;
- an error (or an interrupt) mid-generation frees every block and leaves the engine usable;
- calls from several threads run one after the other, never mixed;
- a run left unfinished by ``start`` refuses another clearly, until ``abort``;
- new weights (``load_state_dict``, an in-place edit) empty the prefix cache;
- ``eos_token_id`` ends a request after its first EOS and frees its blocks;
- ``batch_invariant=True``: tokens equal the oracle's exactly under preemption, chunking
  and prefix caching.
"""

from __future__ import annotations

import pytest
import torch

from pagedlab.engine import Engine
from pagedlab.model import TINY, TinyLlama, generate_contiguous
from tests.engine.threaded import run_in_threads

NEW = 6


def fresh_model(seed: int = 11) -> TinyLlama:
    return TinyLlama(TINY, seed=seed, init_std=0.3)


MODEL = fresh_model()
_g = torch.Generator().manual_seed(5)
PROMPTS = [torch.randint(0, 64, (n,), generator=_g).tolist() for n in (9, 4, 13, 7)]
ORACLE = [generate_contiguous(MODEL, p, NEW) for p in PROMPTS]


def test_a_pool_that_holds_what_is_stored_is_enough() -> None:
    """3 prompt tokens + 2 new store 4 positions: one block of 4 is enough."""
    engine = Engine(MODEL, 1, 4)
    assert engine.generate([PROMPTS[1][:3]], 2) == [generate_contiguous(MODEL, PROMPTS[1][:3], 2)]
    assert engine.generate([PROMPTS[1]], 1) == [ORACLE[1][:1]]  # 4 + 1 new: 4 stored
    with pytest.raises(ValueError, match=r"2 blocks of 4 \(1 sample\(s\) x 5 tokens, .* pool's 1"):
        engine.generate([PROMPTS[1]], 2)
    assert engine.allocator.num_free == 1


class Boom(RuntimeError):
    pass


def failing_after(model: TinyLlama, calls: int, error: type[BaseException]) -> list[int]:
    """Make the model's first MLP raise ``error`` on its ``calls``-th forward; returns the
    counter (the patch stays until the attribute is deleted)."""
    mlp = model.model.layers[0].mlp
    seen = [0]
    real = type(mlp).forward

    def forward(x: torch.Tensor, batch_invariant: bool = False) -> torch.Tensor:
        seen[0] += 1
        if seen[0] == calls:
            raise error("injected")
        return real(mlp, x, batch_invariant)

    mlp.forward = forward  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_an_error_mid_generation_frees_every_block(
    error: type[BaseException], preemption: str
) -> None:
    model = fresh_model()
    engine = Engine(model, 8, 4, preemption=preemption, token_budget=6)
    failing_after(model, 4, error)
    with pytest.raises(error, match="injected"):
        engine.generate(PROMPTS, NEW)
    assert engine.allocator.num_free == engine.allocator.num_blocks
    assert engine.host.num_free == engine.host.num_blocks
    assert engine.last_run is not None and engine.last_run.aborted
    with pytest.raises(RuntimeError, match="this run has ended"):
        engine.step(engine.last_run)
    del model.model.layers[0].mlp.forward  # the model works again
    assert engine.generate(PROMPTS, NEW) == ORACLE  # the engine too, prefix cache included
    assert engine.allocator.num_free == engine.allocator.num_blocks


def test_threads_are_served_one_after_the_other() -> None:
    engine = Engine(MODEL, 10, 4, token_budget=8)
    results: dict[int, list[list[int]]] = {}

    def call(i: int) -> None:
        results[i] = engine.generate([PROMPTS[i], PROMPTS[(i + 1) % 4]], NEW)

    run_in_threads(call, 4, timeout_s=120)
    assert results == {i: [ORACLE[i], ORACLE[(i + 1) % 4]] for i in range(4)}
    assert engine.allocator.num_free == 10


def test_an_unfinished_run_refuses_another_until_aborted() -> None:
    engine = Engine(MODEL, 12, 4)
    run = engine.start(PROMPTS[:2], NEW)
    engine.step(run)
    with pytest.raises(RuntimeError, match="still running an earlier run"):
        engine.generate(PROMPTS[2:], NEW)
    assert engine.allocator.num_free < 12  # the first run still holds its blocks
    engine.abort(run)
    assert engine.allocator.num_free == 12
    assert engine.generate(PROMPTS[2:], NEW) == ORACLE[2:]


def shared_prefix_prompts() -> list[list[int]]:
    base = PROMPTS[2]  # 13 tokens: 3 full blocks of 4 to hit
    return [base, base[:12] + [7, 8]]


@pytest.mark.parametrize("change", ["load_state_dict", "in_place"])
def test_new_weights_empty_the_prefix_cache(change: str) -> None:
    model = fresh_model()
    engine = Engine(model, 16, 4)
    first, second = shared_prefix_prompts()
    engine.generate([first], NEW)  # its full blocks are now cached
    if change == "load_state_dict":
        model.load_state_dict(fresh_model(seed=12).state_dict())
    else:
        with torch.no_grad():
            model.model.layers[0].self_attn.k_proj.weight.mul_(-1.5)
    want = generate_contiguous(model, second, NEW)
    assert engine.generate([second], NEW) == [want]  # nothing of the old weights served
    assert engine.last_run is not None
    assert engine.last_run.scheduler.hit_tokens == 0  # type: ignore[attr-defined]
    assert engine.generate([second], NEW) == [want]  # the new weights' blocks hit again
    assert engine.last_run.scheduler.hit_tokens > 0  # type: ignore[attr-defined]


def test_weights_changed_mid_run_abort_it() -> None:
    model = fresh_model()
    engine = Engine(model, 16, 4)
    run = engine.start(PROMPTS[:2], NEW)
    engine.step(run)
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    with pytest.raises(RuntimeError, match="weights changed during this run"):
        engine.step(run)
    assert run.aborted and engine.allocator.num_free == 16


def test_eos_ends_a_request_after_its_first_eos() -> None:
    eos = ORACLE[0][2]  # the third new token of prompt 0
    engine = Engine(MODEL, 12, 4, token_budget=8)
    out = engine.generate(PROMPTS, NEW, eos_token_id=eos)
    for tokens, want in zip(out, ORACLE, strict=True):
        cut = want[: want.index(eos) + 1] if eos in want else want
        assert tokens == cut
    assert out[0] == ORACLE[0][:3]
    assert engine.allocator.num_free == 12
    with pytest.raises(ValueError, match="eos_token_id must be <= 63"):
        engine.generate(PROMPTS, NEW, eos_token_id=64)


@pytest.mark.parametrize(
    ("num_blocks", "block_size", "preemption", "budget"),
    [(6, 4, "recompute", 5), (6, 4, "swap", 5), (9, 3, "recompute", None), (40, 2, "swap", 3)],
)
def test_batch_invariant_tokens_equal_the_oracle_bit_for_bit(
    num_blocks: int, block_size: int, preemption: str, budget: int | None
) -> None:
    engine = Engine(
        MODEL,
        num_blocks,
        block_size,
        preemption=preemption,
        token_budget=budget,
        batch_invariant=True,
    )
    assert engine.generate(PROMPTS, NEW) == ORACLE
    assert engine.last_run is not None
    if num_blocks < 10:
        assert engine.last_run.preemptions > 0
    assert engine.generate(PROMPTS, NEW) == ORACLE  # again, through prefix-cache hits


def test_batch_invariant_logits_do_not_depend_on_the_batch() -> None:
    """The row-tiled projections and per-query attention give a token the same bits alone
    and among others (the default batched path may differ in the last bits)."""
    from pagedlab.model.kv import ContiguousCache

    ids = torch.tensor(PROMPTS[2])
    positions = torch.arange(len(ids))
    together = MODEL.hidden(ids, positions, ContiguousCache(MODEL.num_layers, True))
    alone = MODEL.hidden(ids[:5], positions[:5], ContiguousCache(MODEL.num_layers, True))
    assert torch.equal(together[:5], alone)
