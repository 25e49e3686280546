"""The engine runs a step as decide -> execute -> update: one forward per step, whatever happens.

The scheduler's plan is executed in one order (swaps out, swaps in, copies, one forward over
every piece), then the sampled tokens are appended, and only then are finished requests'
blocks freed. Each test counts or inspects the model's forwards (``TinyLlama.hidden``,
wrapped on the instance) and checks the tokens against ``generate_contiguous`` /
``sample_contiguous``, run alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from pagedlab.engine import Engine
from pagedlab.memory.scheduler import Scheduler
from pagedlab.model import TINY, TinyLlama, generate_contiguous, sample_contiguous

MODEL = TinyLlama(TINY, seed=11, init_std=0.3)
_g = torch.Generator().manual_seed(5)
PROMPTS = [torch.randint(0, 64, (n,), generator=_g).tolist() for n in (6, 5, 3, 3)]


def watch_forwards(model: TinyLlama, each: Callable[[Any], None] | None = None) -> list[int]:
    """Wrap ``model.hidden`` on this instance: returns a list that gets one entry per forward
    (its token count); ``each(step)`` sees the forward's PagedStep before it runs."""
    calls: list[int] = []
    hidden = model.hidden

    def counted(ids: torch.Tensor, positions: torch.Tensor, kv: Any) -> torch.Tensor:
        if each is not None:
            each(kv)
        calls.append(int(ids.numel()))
        return hidden(ids, positions, kv)

    model.hidden = counted  # type: ignore[method-assign]
    return calls


def fresh_model() -> TinyLlama:
    return TinyLlama(TINY, seed=11, init_std=0.3)


# (num_blocks, block_size, preemption, token_budget, prefix_caching, n): pools that preempt
# (swap and recompute), chunked and whole prefills, samples that copy on write
CONFIGS = [
    (5, 2, "swap", 6, False, 1),  # a decoded group preempted later in its step (see below)
    (5, 2, "swap", 6, True, 1),
    (7, 3, "recompute", 6, True, 1),  # blocks freed and handed out again within a step
    (6, 3, "recompute", None, True, 1),
    (6, 3, "swap", None, False, 1),
    (12, 4, "recompute", 4, False, 2),  # two samples: copy-on-write of a partial prompt block
    (12, 4, "swap", None, True, 2),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_every_step_runs_exactly_one_forward(config: tuple[Any, ...]) -> None:
    """One step is one forward over every scheduled piece: preemption, swaps, copy-on-write
    and blocks handed out again within the step never split it; a step with no piece (only
    swaps) runs none. The tokens are the oracle's."""
    blocks, size, mode, budget, caching, n = config
    model = fresh_model()
    calls = watch_forwards(model)
    engine = Engine(model, blocks, size, mode, budget, prefix_caching=caching)
    run = engine.start(PROMPTS, 4, n=n, temperature=1.0 if n > 1 else 0.0, seed=2)
    while not run.scheduler.done:
        before = len(calls)
        record = engine.step(run)
        assert len(calls) - before == (1 if record.result.work else 0), record.result
    assert engine.stats.forwards == len(calls) == sum(1 for r in run.steps if r.result.work)
    if n == 1:
        want = [generate_contiguous(MODEL, p, 4) for p in PROMPTS]
        assert [engine.tokens(run, name) for name in run.names] == want
    else:
        for i, name in enumerate(run.names):
            want = sample_contiguous(MODEL, PROMPTS[i], 4, n, 1.0, seed=2, request=i)
            assert [engine.tokens(run, name, s) for s in range(n)] == want
    assert run.preemptions > 0 or n > 1


def test_a_group_preempted_after_it_decoded_in_the_same_step_drops_out_of_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunked prefill may preempt running[-1] after it decoded in the same step: its piece,
    copies and counters leave the plan (it is recomputed later), the step is still one
    forward, and every token is the oracle's."""
    taken_back: list[tuple[str, int]] = []
    unschedule = Scheduler._unschedule

    def record(self: Scheduler, group: Any, out: Any) -> None:
        unschedule(self, group, out)
        taken_back.append((group.name, out.step))
        assert all(w.group != group.name for w in out.work)
        assert all(c.group != group.name for c in out.copies)

    monkeypatch.setattr(Scheduler, "_unschedule", record)
    model = fresh_model()
    calls = watch_forwards(model)
    engine = Engine(model, 5, 2, "swap", 6, prefix_caching=False)
    assert engine.generate(PROMPTS, 4) == [generate_contiguous(MODEL, p, 4) for p in PROMPTS]
    assert taken_back, "the workload no longer preempts a group that decoded in its step"
    run = engine.last_run
    assert run is not None
    for name, step in taken_back:
        result = run.steps[step - 1].result
        assert name in result.preempted and name not in result.swapped_out  # recomputed
        assert name not in result.decoded and name not in result.finished
    assert len(calls) == sum(1 for r in run.steps if r.result.work)


def test_finished_requests_hold_their_blocks_through_the_forward() -> None:
    """Every block a piece writes or reads is held while the forward runs (a finished
    request's last piece included); the finished requests' blocks are freed after it."""
    model = fresh_model()
    engine = Engine(model, 7, 3, "recompute", 6, prefix_caching=False)
    size = engine.block_size

    def held(step: Any) -> None:
        for piece in step.pieces:
            for block in piece.read_blocks(size):
                assert engine.allocator.refcount(block) > 0, f"block {block} is free"

    watch_forwards(model, held)
    run = engine.start(PROMPTS, 4)
    finished_any = False
    while not run.scheduler.done:
        record = engine.step(run)
        for name in record.result.finished:
            finished_any = True
            assert not run.scheduler.groups[name].tables  # freed once the step is complete
    assert finished_any
    assert engine.allocator.num_free == engine.allocator.num_blocks


def test_a_prefix_is_hit_in_the_step_that_schedules_it() -> None:
    """A prefix block is hittable as soon as it is scheduled (as vLLM caches full blocks at
    allocation): a request admitted in the same step starts on it, reads it in the same
    forward, and its tokens are the oracle's."""
    base = PROMPTS[0] + PROMPTS[1] + PROMPTS[2]  # 14 tokens
    prompts = [base, base[:12] + [7, 7, 7]]
    model = fresh_model()
    calls = watch_forwards(model)
    engine = Engine(model, 32, 4, token_budget=64)
    assert engine.generate(prompts, 3) == [generate_contiguous(MODEL, p, 3) for p in prompts]
    run = engine.last_run
    assert run is not None
    first = run.steps[0].result
    assert first.admitted == ["A", "B"] and len(calls) == len(run.steps)
    a, b = (run.scheduler.groups[n] for n in "AB")
    assert run.scheduler.hit_tokens == 12  # B's three full blocks, scheduled for A in step 1
    assert first.prefill_tokens == {"A": 14, "B": 3}
    b_work = [w for w in first.work if w.group == "B"]
    a_work = [w for w in first.work if w.group == "A"]
    assert b_work[0].first == 12 and b_work[0].blocks[:3] == a_work[0].blocks[:3]
    assert a.finished_at == b.finished_at
