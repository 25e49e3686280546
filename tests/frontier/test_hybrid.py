"""pagedlab.frontier.hybrid: the design doc's 3 groups and 11 blocks, windows freed into the
null block, the hit-rate floor and the pinned pool at model-set block sizes."""

from __future__ import annotations

import pytest

from pagedlab.frontier.hybrid import (
    CacheGroup,
    HybridRequest,
    attention_block_for_state,
    block_size_floor,
    group_layers,
)
from pagedlab.frontier.peers import NULL_BLOCK, vllm_block_pool
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError


def test_the_design_docs_example_holds_11_blocks() -> None:
    groups = group_layers(10, 20, 32)
    assert groups == [CacheGroup("full", 10), *[CacheGroup("sliding", 10, 32)] * 2]
    pool = vllm_block_pool(64, 16)
    request = HybridRequest(pool, groups)
    for _ in range(112):
        request.append(1)
    assert [len(t) for t in request.tables] == [7, 7, 7]
    assert request.held_blocks == 11 and pool.num_free == 64 - 1 - 11
    for table in request.tables[1:]:  # 112 - 32 + 1 = 81 tokens skipped: 5 whole blocks
        assert table[:5] == [NULL_BLOCK] * 5 and NULL_BLOCK not in table[5:]
    assert request.freed_to_null == 10
    request.free()
    assert pool.num_free == 63 and pool.refcount(NULL_BLOCK) == 1


def test_groups_are_vllms_fewest_layers_padded() -> None:
    assert (
        group_layers(10, 52, 1024)
        == [CacheGroup("full", 10)] + [CacheGroup("sliding", 10, 1024)] * 6
    )
    assert group_layers(12, 13, 8) == [CacheGroup("full", 13), CacheGroup("sliding", 13, 8)]
    assert group_layers(0, 5, 8) == [CacheGroup("sliding", 5, 8)]


def test_hybrid_request_misuse_changes_nothing() -> None:
    with pytest.raises(ValueError, match="null block"):
        HybridRequest(BlockAllocator(4, 4), group_layers(1, 1, 4))
    pool = vllm_block_pool(4, 4)
    request = HybridRequest(pool, group_layers(1, 1, 4))
    with pytest.raises(OutOfBlocksError):
        request.append(8)  # 2 groups x 2 blocks, 3 free
    assert request.num_tokens == 0 and pool.num_free == 3
    with pytest.raises(ValueError, match="n"):
        request.append(0)
    with pytest.raises(ValueError, match="at least one layer"):
        group_layers(0, 0, 4)


def test_block_size_floor_and_the_unit_fix() -> None:
    rows = {r.block_size: r for r in block_size_floor()}
    assert rows[16].hit_rate == pytest.approx(0.7)  # 7 of 8 prompts hit their 400 shared tokens
    for size in (528, 784, 1920, 2096, 8320):  # a prompt of 500 tokens is shorter than a block
        assert rows[size].hit_rate == 0.0
        assert rows[size].hit_rate_with_unit == pytest.approx(0.7)  # prefix_match_unit = 16
    assert rows[8320].pool_blocks == 3 and rows[8320].pinned_share == pytest.approx(1 / 3)
    assert rows[16].pinned_share == pytest.approx(1 / 1560)
    with pytest.raises(ValueError, match="holds 1 block"):
        block_size_floor((16, 20_000))


def test_attention_block_for_state() -> None:
    assert attention_block_for_state(2_000_000, 4096) == 496  # 489 tokens, up to a multiple of 16
    assert attention_block_for_state(1, 1) == 16
    with pytest.raises(ValueError, match="state_bytes"):
        attention_block_for_state(0, 1)
