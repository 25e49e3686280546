"""pagedlab.frontier.miss_reasons: every missed token classified, on notebook 11's workload."""

from __future__ import annotations

import pytest

from pagedlab.frontier.miss_reasons import REASONS, MissClassifier
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.pictures.control_scenes import miss_scene


def test_every_reason_but_hit_is_a_miss_at_block_size_16() -> None:
    classifier = miss_scene(16)
    by_name = {r.name: r.counts for r in classifier.results}
    assert by_name["R2"]["hit"] == 288  # R1 cached S when it was scheduled, in the same step
    assert by_name["R3"]["hit"] == 288  # 18 full blocks of S, a step later
    assert by_name["R4"]["shorter than a block"] == 12
    assert by_name["R5"] == {**dict.fromkeys(REASONS, 0), "hit": 240, "the last-token rule": 16}
    assert by_name["R8"]["evicted"] == 288  # R6 and R7 filled the pool
    assert by_name["R6"]["no shared prefix"] == 2048
    for r in classifier.results:
        assert sum(r.counts.values()) == r.tokens and r.counts["hit"] % 16 == 0
    assert set(classifier.totals()) == set(REASONS)


def test_blocks_longer_than_the_prompts_hit_nothing() -> None:
    for size in (512, 1024):
        classifier = miss_scene(size)
        assert classifier.hit_rate == 0.0
        assert classifier.totals()["shorter than a block"] > 0


def test_a_prompt_that_does_not_fit_stops_the_step_after_the_ones_before_it() -> None:
    alloc = BlockAllocator(4, 4)
    classifier = MissClassifier(alloc)
    with pytest.raises(OutOfBlocksError):
        classifier.run_step([("small", [1, 2, 3]), ("big", list(range(20)))])
    assert alloc.num_free == 4 and [r.name for r in classifier.results] == ["small"]
    with pytest.raises(ValueError, match="at least one token"):
        classifier.run_step([("empty", [])])
    with pytest.raises(ValueError, match="block_size"):
        miss_scene(4096)
