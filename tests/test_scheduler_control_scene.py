"""scheduler_control_scene: notebook 9's scene without K/V makes the same decisions and counts."""

from __future__ import annotations

import pytest

from pagedlab.pictures.control_scenes import scheduler_control_scene
from pagedlab.pictures.scenes import SCHEDULER_POOL_BLOCKS, scheduler_scene


def _counts(scheduler: object) -> tuple:
    s = scheduler
    return (
        s.preemptions,  # type: ignore[attr-defined]
        s.blocks_swapped_out,  # type: ignore[attr-defined]
        s.blocks_swapped_in,  # type: ignore[attr-defined]
        s.tokens_recomputed,  # type: ignore[attr-defined]
        [g.name for g in s.finished],  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize(
    ("mode", "size", "budget", "chunked"),
    [("swap", 2, 16, True), ("recompute", 3, None, False), ("swap", 4, None, False)],
)
def test_the_control_scene_decides_as_the_scene_with_kv(
    mode: str, size: int, budget: int | None, chunked: bool
) -> None:
    with_kv, _ = scheduler_scene(mode, size, budget, chunked)
    counts_only = scheduler_control_scene(mode, size, budget, chunked)
    assert counts_only.kv is None and counts_only.host.num_blocks == SCHEDULER_POOL_BLOCKS
    results = with_kv.run(), counts_only.run()
    assert [r.events() for r in results[0]] == [r.events() for r in results[1]]
    assert _counts(with_kv) == _counts(counts_only)
    assert counts_only.preemptions > 0  # the scene is under memory pressure at these sizes
