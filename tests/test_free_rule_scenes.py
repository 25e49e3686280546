"""The scenes that put pagedlab's FIFO queue beside vLLM V1's free rule, and the buddy frames."""

from __future__ import annotations

import pytest

from pagedlab.pictures.buddy import buddy_scene
from pagedlab.pictures.scenes import (
    buddy_pow2_frames,
    lru_scene,
)


def test_notebook_6_eviction_example_under_both_rules() -> None:
    fifo, after, blocks = lru_scene("fifo")
    assert after == [2, 1, 0, 5, 4, 3] and blocks == [5, 4, 3] and fifo.stats.evictions == 2
    v1, after, blocks = lru_scene("vllm-v1")
    assert after == [5, 2, 1, 0, 4, 3] and blocks == [5, 2, 4] and v1.stats.evictions == 1
    assert sorted(v1.cached_blocks()) == [0, 1, 2, 3, 5]


def test_buddy_frames_split_and_merge_and_the_picture_counts() -> None:
    frames = buddy_pow2_frames(pool=1024, prompt=100, output=25)
    assert [f.live for f in frames] == [(), ((0, 256),), ()]
    assert frames[1].free == ((256, 256), (512, 512)) and frames[1].requested == 132
    assert frames[0].free == frames[2].free == ((0, 1024),)
    assert "2 splits" in frames[1].caption
    before = list(frames)
    d = buddy_scene(frames)
    assert frames == before
    assert d.count("reserved") == d.count("rounding") == 1
    assert d.count("free-block") == 1 + 2 + 1


@pytest.mark.parametrize(("pool", "match"), [(1000, "power of two"), (128, "cannot hold")])
def test_buddy_frames_refuse_a_pool_that_cannot_work(pool: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        buddy_pow2_frames(pool=pool)


def test_buddy_scene_needs_a_frame() -> None:
    with pytest.raises(ValueError, match="at least one frame"):
        buddy_scene([])
