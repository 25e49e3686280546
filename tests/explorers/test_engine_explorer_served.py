"""EngineExplorer.served: the frames' own engine and run, computed once, for a cell to inspect."""

from __future__ import annotations

import pytest

from pagedlab import reference_attention
from pagedlab.explorers.engine import EngineExplorer
from pagedlab.model import TINY, TinyLlama, generate_contiguous

PROMPTS = [[3, 1, 4, 1, 5], [9, 2, 6, 5], [3, 5]]


def _explorer() -> tuple[EngineExplorer, TinyLlama]:
    model = TinyLlama(TINY, seed=0, init_std=0.3)
    explorer = EngineExplorer(
        model,
        PROMPTS,
        lambda ids: " ".join(map(str, ids)),
        max_new_tokens=4,
        num_blocks=3,
        block_size=4,
        decode_attention=reference_attention,
    )
    return explorer, model


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_served_is_the_run_the_frames_show(mode: str) -> None:
    explorer, model = _explorer()
    engine, run = explorer.served(mode)
    frames = explorer.frames(mode)
    assert run.scheduler.done
    assert len(run.steps) == frames[-1].total_steps == len(frames) - 1
    assert sum(len(s.result.preempted) for s in run.steps) == frames[-1].preemptions > 0
    tokens = [engine.tokens(run, name) for name in run.names]
    last = dict(frames[-1].texts)
    for name, t in zip(run.names, tokens, strict=True):
        assert last[name].endswith(" ".join(map(str, t)))
    assert (tokens == [generate_contiguous(model, p, 4) for p in PROMPTS]) == frames[-1].identical


def test_served_is_computed_once_and_checks_the_mode() -> None:
    explorer, _ = _explorer()
    first = explorer.served("recompute")
    assert explorer.served("recompute") is first
    assert explorer.frames("recompute")[-1].total_steps == len(first[1].steps)
    with pytest.raises(ValueError, match="mode"):
        explorer.served("evict")
