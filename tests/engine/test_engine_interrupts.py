"""The engine's promise under the hostile user's moves of issue 41 (tiny seeded models):

- in-place weight edits that torch's version counter misses (``p.data.copy_``,
  ``p.data.mul_``, a numpy view) empty the prefix cache; ``reset_prefix_cache`` by hand;
- a run owns its ``max_new_tokens``: a later call never cuts or lengthens an earlier answer,
  and threads mixing ``sample`` and ``generate`` get each call's own answer;
- a KeyboardInterrupt at any line of a call leaves the pools whole and the engine usable;
- a model made under ``torch.inference_mode()`` is served, inside it and outside;
- misuse (``abort(None)``, ``abort`` before any run) is a clear error naming the argument.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import torch

import pagedlab
from pagedlab.engine import Engine
from pagedlab.model import TINY, TinyLlama, generate_contiguous, sample_contiguous
from tests.engine.threaded import run_in_threads

NEW = 6
MODEL = TinyLlama(TINY, seed=11, init_std=0.3)
_g = torch.Generator().manual_seed(5)
PROMPTS = [torch.randint(0, 64, (n,), generator=_g).tolist() for n in (9, 4, 13, 7)]
ORACLE = [generate_contiguous(MODEL, p, NEW) for p in PROMPTS]


def k_proj(model: TinyLlama) -> torch.Tensor:
    return model.model.layers[0].self_attn.k_proj.weight


EDITS: dict[str, Callable[[TinyLlama], None]] = {  # none of these bumps the version counter
    "data.copy_": lambda m: k_proj(m).data.copy_(k_proj(TinyLlama(TINY, seed=12, init_std=0.3))),
    "data.mul_": lambda m: k_proj(m).data.mul_(-1.5),
    "numpy view": lambda m: k_proj(m).detach().numpy().__setitem__(slice(None), 0.25),
}


@pytest.mark.parametrize("edit", EDITS)
def test_edits_the_version_counter_misses_empty_the_prefix_cache(edit: str) -> None:
    model = TinyLlama(TINY, seed=11, init_std=0.3)
    engine = Engine(model, 16, 4)
    base = PROMPTS[2]  # 13 tokens: 3 full blocks of 4 to hit
    engine.generate([base], NEW)
    version = k_proj(model)._version
    EDITS[edit](model)
    assert k_proj(model)._version == version  # invisible to the version counter
    want = generate_contiguous(model, base[:12] + [7], NEW)
    assert engine.generate([base[:12] + [7]], NEW) == [want]
    assert engine.last_run is not None
    assert engine.last_run.scheduler.hit_tokens == 0  # type: ignore[attr-defined]


def test_reset_prefix_cache_forgets_every_block_and_waits_for_the_run() -> None:
    engine = Engine(MODEL, 16, 4)
    engine.generate([PROMPTS[2]], NEW)
    run = engine.start([PROMPTS[2]], NEW)
    engine.step(run)
    with pytest.raises(RuntimeError, match="still running an earlier run"):
        engine.reset_prefix_cache()
    assert run.scheduler.hit_tokens > 0  # type: ignore[attr-defined]
    engine.abort(run)
    engine.generate([PROMPTS[2]], NEW)
    engine.reset_prefix_cache()
    assert engine.generate([PROMPTS[2]], NEW) == [ORACLE[2]]
    assert engine.last_run is not None
    assert engine.last_run.scheduler.hit_tokens == 0  # type: ignore[attr-defined]


def test_a_run_keeps_its_own_max_new_tokens() -> None:
    engine = Engine(MODEL, 16, 4)
    first = engine.start(PROMPTS[:1], NEW)
    while not first.scheduler.done:
        engine.step(first)
    engine.generate(PROMPTS[1:2], 1)
    assert engine.tokens(first, "A") == ORACLE[0]  # not cut to 1 token
    engine.generate(PROMPTS[1:2], NEW + 3)
    assert engine.tokens(first, "A") == ORACLE[0]
    assert engine.last_run is not None and engine.last_run.steps[0].reserved_slots == 4 + NEW + 3


def test_threads_mixing_sample_and_generate_get_their_own_answers() -> None:
    engine = Engine(MODEL, 16, 4)
    want = [sample_contiguous(MODEL, p, NEW, 2, 0.8, 3, request=i) for i, p in enumerate(PROMPTS)]
    got: list[Any] = []

    def call(i: int) -> None:
        for _ in range(3):
            if i % 2:
                got.append(("g", engine.generate([PROMPTS[i]], 1)))
            else:
                got.append(("s", engine.sample(PROMPTS, NEW, 2, 0.8, 3)))

    run_in_threads(call, 4, timeout_s=300)
    assert len(got) == 12
    assert all(out == want for kind, out in got if kind == "s")
    assert sorted(out for kind, out in got if kind == "g") == sorted(
        [[ORACLE[i][:1]] for i in (1, 3)] * 3
    )


PACKAGE = str(Path(pagedlab.__file__).parent)


def traced(call: Callable[[], object], k: int = 0) -> int:
    """Run ``call``, raising KeyboardInterrupt at the ``k``-th line of pagedlab it executes
    (``k = 0``: never); returns the lines it ran, or -1 if it was interrupted."""
    seen = [0]

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        if event == "line":
            seen[0] += 1
            if seen[0] == k:
                sys.settrace(None)
                raise KeyboardInterrupt(f"line {k}: {frame.f_code.co_name}")
        return trace

    sys.settrace(trace)
    try:
        call()
    except KeyboardInterrupt:
        return -1
    finally:
        sys.settrace(None)
    return seen[0]


def whole(engine: Engine) -> bool:
    for pool in (engine.allocator, engine.host):
        if pool.num_free != pool.num_blocks or any(pool.refcounts()):
            return False
    return True


def start_and_step(engine: Engine) -> None:
    run = engine.start(PROMPTS, NEW)
    while not run.scheduler.done:
        engine.step(run)


CALLS: dict[str, Callable[[Engine], object]] = {
    "generate": lambda e: e.generate(PROMPTS, NEW, eos_token_id=ORACLE[0][2]),
    "sample": lambda e: e.sample(PROMPTS[:2], NEW, n=2, temperature=0.7),
    "start and step": start_and_step,
}


@pytest.mark.parametrize(
    ("call", "preemption"),
    [
        ("generate", "recompute"),
        ("generate", "swap"),
        ("sample", "swap"),
        ("start and step", "recompute"),
    ],
)
def test_an_interrupt_at_any_line_leaves_the_pools_whole(call: str, preemption: str) -> None:
    """Ctrl-C at 20 lines spread over all that pagedlab runs in the call (thousands: the
    checks, the weights guard, the scheduler, the allocator's bookkeeping, the forward)."""
    engine = Engine(MODEL, 8, 4, preemption=preemption, token_budget=6)
    engine.generate(PROMPTS, NEW)  # the prefix cache holds blocks, as after each try below
    lines = traced(lambda: CALLS[call](engine))
    for k in range(lines // 40, lines, lines // 20):
        engine.reset_prefix_cache()
        engine.generate(PROMPTS, NEW)
        assert traced(lambda: CALLS[call](engine), k) == -1, k
        run = engine.last_run
        if run is not None and not run.aborted and not run.scheduler.done:
            # only between steps (the test's loop, step()'s argument checks): the run is
            # intact and could go on; abort() ends it
            assert call == "start and step", k
            engine.abort(run)
        assert whole(engine), k
        assert engine.generate(PROMPTS, NEW) == ORACLE, k
        assert whole(engine), k


@pytest.mark.parametrize("inside", ["model", "model and engine"])
def test_a_model_made_under_inference_mode_is_served(inside: str) -> None:
    with torch.inference_mode():
        model = TinyLlama(TINY, seed=11, init_std=0.3)
        engine = Engine(model, 8, 4, preemption="swap") if inside == "model and engine" else None
    engine = engine or Engine(model, 8, 4, preemption="swap")
    assert engine.generate(PROMPTS, NEW) == ORACLE  # outside inference mode
    with torch.inference_mode():
        assert engine.generate(PROMPTS, NEW) == ORACLE


def test_abort_names_its_argument() -> None:
    engine = Engine(MODEL, 8, 4)
    for bad in (engine.last_run, "A"):  # before any run: last_run is None
        with pytest.raises(TypeError, match=r"run must be an EngineRun .*got (None|'A')"):
            engine.abort(bad)  # type: ignore[arg-type]
    run = engine.start(PROMPTS[:1], NEW)
    engine.abort(run)
    engine.abort(run)  # idempotent
    assert run.aborted and whole(engine)
