"""pagedlab.frontier.async_steps: one step ahead, placeholders, a stale token after preemption."""

from __future__ import annotations

import pytest

from pagedlab.frontier.async_steps import run_async


def test_one_step_ahead_gives_the_synchronous_tokens() -> None:
    ahead, sync = run_async(), run_async(one_step_ahead=False)
    assert ahead.outputs == sync.outputs
    assert all(len(v) == 6 for v in ahead.outputs.values())
    assert sync.placeholders == 0 and sync.stale_tokens == 0
    assert ahead.placeholders > 0  # decodes planned before their input token existed


def test_a_preempted_requests_in_flight_token_arrives_stale_and_is_kept() -> None:
    timeline = run_async()
    step3 = timeline.plans[3]
    assert step3.preempted == ("R2",) and step3.stale == ("R2",)
    assert timeline.stale_tokens == 1
    resumed = next(p for p in timeline.plans[4:] if p.work.get("R2", "").startswith("prefill"))
    assert resumed.work["R2"] == "prefill 9"  # 6 prompt + 3 tokens: the stale one was kept
    dropped = run_async(drop_stale=True)  # reset_prefix_cache's drop_stale_output
    assert any(p.work.get("R2") == "prefill 8" for p in dropped.plans)
    assert dropped.outputs == timeline.outputs  # the dropped token is recomputed, same value
    sync = run_async(one_step_ahead=False)
    assert sync.plans[3].preempted == ("R2",) and sync.plans[3].stale == ()
    assert any(p.work.get("R2") == "prefill 9" for p in sync.plans)  # it had 3 tokens


def test_misuse() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        run_async(prompts=(30,), num_blocks=2)
    with pytest.raises(ValueError, match="at least one"):
        run_async(prompts=())
    with pytest.raises(ValueError, match="max_new"):
        run_async(max_new=0)
