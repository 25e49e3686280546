"""SchedulerExplorer driven headlessly: controls, Play/step, readout, bad settings."""

from __future__ import annotations

import pytest

from pagedlab.checks import ArgumentTypeError
from pagedlab.explorers.scheduler import (
    MAX_STEP,
    SchedulerExplorer,
    explorer_state,
)
from pagedlab.pictures.png import to_png
from pagedlab.pictures.scheduler import scheduler_drawing


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
