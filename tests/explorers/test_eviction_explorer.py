"""Notebook 6's eviction explorer: a returning prompt hits until the pool runs out of others."""

from __future__ import annotations

import pytest

from pagedlab.explorers.sharing import EvictionExplorer
from pagedlab.pictures.control_scenes import eviction_scene


def test_a_large_pool_keeps_every_cached_block_and_a_small_one_evicts() -> None:
    assert eviction_scene(16, 3).hits == 2  # room for everyone: A's 2 full blocks still hit
    assert eviction_scene(16, 3).evicted == [0, 0, 0]
    small = eviction_scene(4, 1)  # R1 takes 3 of 4 blocks: the front reaches A's block 1
    assert (small.first, small.others, small.evicted, small.hits) == (
        [0, 1, 2],
        [[3, 2, 1]],
        [1],
        1,
    )
    assert eviction_scene(3, 1).hits == 0


@pytest.mark.parametrize("rule", ["fifo", "vllm-v1"])
def test_hits_never_grow_with_more_requests_in_between(rule: str) -> None:
    for pool in range(3, 17):
        hits = [eviction_scene(pool, others, rule).hits for others in range(7)]  # type: ignore[arg-type]
        assert hits == sorted(hits, reverse=True), (pool, hits)
        assert hits[0] == 2


def test_vllm_rule_reuses_unhashed_blocks_first_so_a_keeps_more() -> None:
    # 6 blocks, 2 requests in between: FIFO hands out A's blocks; V1 first takes the
    # unhashed partial blocks, so A keeps one cached block
    assert eviction_scene(6, 2, "fifo").hits == 0
    assert eviction_scene(6, 2, "vllm-v1").hits == 1


def test_explorer_follows_the_controls_and_names_the_hits() -> None:
    explorer = EvictionExplorer()
    assert "hits <b>2 of its 2</b>" in explorer.readout.value
    explorer.set(pool_blocks=4, others=1)
    assert "hits <b>1 of its 2</b>" in explorer.readout.value
    assert "R1 (its own prompt): blocks [3, 2, 1]" in explorer.readout.value
    with pytest.raises(ValueError, match="pool_blocks"):
        explorer.set(pool_blocks=2)
    assert explorer.state.cache.allocator.num_blocks == 4  # a refused move changes nothing
