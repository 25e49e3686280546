"""SchedulerExplorer driven headlessly: controls, Play/step, readout, bad settings."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from pagedlab.attention.swap import SwappingKV
from pagedlab.explorers.scheduler import (
    MAX_STEP,
    SchedulerExplorer,
    _run,
    explorer_state,
    readout_html,
)
from pagedlab.explorers.scheduler import SchedulerState as ExplorerState
from pagedlab.ground.checks import ArgumentTypeError
from pagedlab.pictures.canvas import drawing_png as to_png
from pagedlab.pictures.scenes import scheduler_scene
from pagedlab.pictures.scheduler import scheduler_drawing
from tests.explorers.test_explorers import assert_widgets_are_declarations


@pytest.fixture(scope="module")
def explorer() -> SchedulerExplorer:
    return SchedulerExplorer()


def test_controls_have_the_documented_names(explorer: SchedulerExplorer) -> None:
    assert set(explorer.values) == {
        "mode",
        "block_size",
        "token_budget",
        "chunked_prefill",
        "step",
    }
    assert explorer.mode.description == "mode" and list(explorer.mode.options) == [
        "swap",
        "recompute",
    ]
    assert explorer.block_size.description == "block size"
    assert explorer.token_budget.description == "token budget"
    assert explorer.play.description == "play"
    assert "pagedlab-readout" in explorer.readout._dom_classes
    assert bytes(explorer.picture.value).startswith(b"\x89PNG")
    assert_widgets_are_declarations(explorer)


def test_swap_run_moves_blocks_and_recompute_run_recomputes(explorer: SchedulerExplorer) -> None:
    swap = explorer.set(mode="swap", block_size=4, token_budget=16, step=MAX_STEP)
    assert swap.scheduler.done and swap.scheduler.preemptions > 0
    assert swap.scheduler.blocks_swapped_out > 0 and swap.scheduler.tokens_recomputed == 0
    assert (
        "all finished" in explorer.readout.value and "✓ no block leaked" in explorer.readout.value
    )
    recompute = explorer.set(mode="recompute")
    assert recompute.scheduler.tokens_recomputed > 0
    assert recompute.scheduler.blocks_swapped_out == 0
    assert f"tokens recomputed {recompute.scheduler.tokens_recomputed}" in explorer.readout.value


def test_step_and_play(explorer: SchedulerExplorer) -> None:
    explorer.set(mode="swap", step=0)
    assert explorer.state.result is None
    state = explorer.advance()
    assert state.scheduler.steps == 1 and state.result is not None
    assert state.result.admitted  # the first step admits
    explorer.play.value = 5
    assert explorer.state.scheduler.steps == 5 and explorer.step_slider.value == 5
    explorer.set(step=MAX_STEP)
    end = explorer.state.total_steps
    explorer.advance()
    assert explorer.step_slider.value == MAX_STEP or explorer.step_slider.value == end


def test_bad_settings_change_nothing(explorer: SchedulerExplorer) -> None:
    before = explorer.values
    with pytest.raises(ValueError, match="block_size"):
        explorer.set(block_size=1)
    with pytest.raises(ArgumentTypeError, match="token_budget"):
        explorer.set(token_budget=4.5)
    with pytest.raises(ValueError, match="mode"):
        explorer.set(mode="evict")
    with pytest.raises(TypeError, match="length"):
        explorer.set(length=3)
    assert explorer.values == before


def test_render_reads_state_only() -> None:
    state = explorer_state("swap", 2, 8, True, 12)
    refcounts = state.scheduler.device.refcounts()
    drawing = scheduler_drawing(state.scheduler, state.result)
    assert to_png(drawing).startswith(b"\x89PNG")
    assert state.scheduler.device.refcounts() == refcounts
    blocks = drawing.count("block", "device") + drawing.count("free-block", "device")
    assert blocks == 16
    held = sum(1 for rc in refcounts if rc)
    assert drawing.count("block", "device") == held


def test_plain_text_is_deterministic(explorer: SchedulerExplorer) -> None:
    explorer.set(mode="swap", block_size=4, token_budget=16, chunked_prefill=True, step=3)
    bundle = explorer._repr_mimebundle_()
    assert (
        bundle["text/plain"]
        == repr(explorer)
        == (
            "SchedulerExplorer(mode='swap', block_size=4, token_budget=16, chunked_prefill=True, "
            "step=3)"
        )
    )
    assert "image/png" in bundle  # the first frame, for static renderers


def _seen(state: ExplorerState) -> tuple:
    """Everything the explorer and its pictures read from a state, by value (K/V cloned)."""
    s = state.scheduler
    store = s.kv
    assert isinstance(store, SwappingKV)
    groups = [
        (g.name, g.status, g.generated, g.work, g.prefilled, g.recompute_left, g.preemptions,
         g.finished_at, [list(h) for h in g.host], list(g.host_tokens),
         [(t.id, t.blocks, t.num_tokens, t.freed) for t in g.tables])
        for g in s.groups.values()
    ]  # fmt: skip
    queues = [[g.name for g in q] for q in (s.waiting, s.running, s.swapped, s.finished)]
    counters = (s.steps, s.preemptions, s.tokens_recomputed, s.blocks_swapped_out,
                s.blocks_swapped_in, s.done)  # fmt: skip
    pools = (s.device.refcounts(), s.device.free_list(), s.host.refcounts(), s.host.free_list())
    kv = [t.clone() for t in (store.device.key, store.device.value)]
    kv += [t.clone() for t in (store.host.cache.key, store.host.cache.value)]
    fields = replace(state, scheduler=None)
    drawing = scheduler_drawing(s, state.result)
    return fields, groups, queues, counters, pools, kv, drawing, readout_html(state)


def _same(a: tuple, b: tuple) -> bool:
    tensors = all(torch.equal(x, y) for x, y in zip(a[5], b[5], strict=True))
    return a[:5] == b[:5] and tensors and a[6:] == b[6:]


def _replayed(mode: str, size: int, budget: int, chunked: bool) -> list[tuple]:
    """What every step shows when replayed from scratch (the scene built, then n steps)."""
    scheduler, store = scheduler_scene(mode, size, budget, chunked)
    total = len(scheduler_scene(mode, size, budget, chunked)[0].run())
    state = ExplorerState(mode, size, budget, chunked, 0, scheduler, None, 0, total)
    seen = [_seen(state)]
    for step in range(1, MAX_STEP + 1):
        if not scheduler.done:
            result = scheduler.step()
            scheduler.check_invariants()
            checked = state.sequences_checked + store.verify(scheduler.running)
            state = replace(state, result=result, sequences_checked=checked)
        state = replace(state, step=step)
        seen.append(_seen(state))
    return seen


@pytest.mark.parametrize(
    "setting", [("swap", 4, 16, True), ("recompute", 2, 8, False), ("swap", 8, 64, False)]
)
def test_incremental_states_are_the_from_scratch_replay_at_every_step(setting) -> None:
    _run.cache_clear()
    replay = _replayed(*setting)
    middle = explorer_state(*setting, 7)  # held by a caller while the run goes on
    held = _seen(middle)
    states = [explorer_state(*setting, step) for step in range(MAX_STEP, -1, -1)][::-1]
    for step, state in enumerate(states):
        assert _same(_seen(state), replay[step]), f"step {step} differs from the replay"
    assert _same(_seen(middle), held) and _same(held, replay[7])
    assert states[-1].scheduler.done and states[-1].step == MAX_STEP
    assert len({id(s.scheduler) for s in states[: states[0].total_steps + 1]}) == (
        states[0].total_steps + 1
    )  # every step has its own scheduler (and K/V): nothing is shared between snapshots
    kvs = {id(s.scheduler.kv) for s in states[: states[0].total_steps + 1]}
    assert len(kvs) == states[0].total_steps + 1


def test_a_state_handed_out_is_the_callers_to_poke() -> None:
    """A state handed out is the caller's: stepping or freeing it changes no later view."""
    first = SchedulerExplorer(mode="swap", block_size=4, token_budget=16, step=5)
    kept = _seen(explorer_state("swap", 4, 16, True, 5))
    poked = first.state.scheduler
    poked.step()
    poked.step()
    poked.running[0].tables[0].free()
    poked.device.free(poked.device.refcounts().index(1))
    second = SchedulerExplorer(mode="swap", block_size=4, token_budget=16, step=5)
    assert second.state.scheduler is not first.state.scheduler
    assert _same(_seen(second.state), kept) and _same(
        _seen(explorer_state("swap", 4, 16, True, 5)), kept
    )
    assert second.set(step=6).scheduler.steps == 6  # later steps are unaffected too


@pytest.mark.parametrize("bad", [["swap"], {"mode": 1}, None, 3.5])
def test_unhashable_or_wrong_controls_are_named(bad) -> None:
    with pytest.raises((TypeError, ValueError), match="mode"):
        explorer_state(bad)
