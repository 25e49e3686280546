"""pagedlab.frontier.peers: vLLM 0.34's and transformers 5.24's free-block rules on one trace,
the Hugging Face rule checked against the installed transformers where it imports."""

from __future__ import annotations

import pytest

from pagedlab.frontier.peers import NULL_BLOCK, HFCachePool, run_trace, vllm_block_pool
from pagedlab.memory.allocator import OutOfBlocksError


def test_the_trace_under_three_rules() -> None:
    assert run_trace("pagedlab").blocks == {"A": [0, 1], "B": [2, 3, 4], "C": [5, 6]}
    assert run_trace("vllm").blocks == {"A": [1, 2], "B": [3, 4, 5], "C": [2, 1]}
    # the scheduler's try_to_free_sectors before C's batch hands A's sectors back, reversed
    assert run_trace("hf").blocks == {"A": [9, 8], "B": [7, 6, 5], "C": [8, 9]}


def test_vllm_pool_never_hands_out_its_null_block() -> None:
    pool = vllm_block_pool(4, 2)
    assert pool.refcount(NULL_BLOCK) == 1 and pool.num_free == 3
    assert sorted(pool.allocate() for _ in range(3)) == [1, 2, 3]
    with pytest.raises(OutOfBlocksError):
        pool.allocate()


def test_hf_pool_sectors_of_several_blocks_and_misuse() -> None:
    pool = HFCachePool(3, blocks_per_sector=2)  # sectors 2, 3, 4 -> blocks 4..9
    assert pool.allocate("a", 3) == [9, 8, 6]  # sector 4 whole, then sector 3's last leaf
    assert pool.num_free_blocks == 1 and pool.free_sectors == [2]
    with pytest.raises(OutOfBlocksError):
        pool.allocate("b", 4)  # needs 2 new sectors, 1 free: nothing changed
    assert pool.num_free_blocks == 1 and pool.free_sectors == [2] and "b" not in pool.tables
    with pytest.raises(ValueError, match="holds no blocks"):
        pool.free("zz")
    with pytest.raises(ValueError, match="n"):
        pool.allocate("b", 0)
    with pytest.raises(TypeError, match="request"):
        pool.allocate("", 1)
    assert pool.free("a") == [9, 8, 6]
    assert pool.try_to_free_sectors() == [3, 4] and pool.free_sectors == [2, 3, 4]
    with pytest.raises(ValueError, match="rule"):
        run_trace("sglang")


def test_hf_sectors_of_two_blocks_match_the_installed_cache_pool() -> None:
    pytest.importorskip("transformers")
    from transformers.generation.continuous_batching.cache_allocators.cache_pool import CachePool

    real, ours = CachePool(4, 1), HFCachePool(4, blocks_per_sector=2)
    real.set_blocks_per_sector(0, 2)
    tables: dict[str, list[int]] = {}

    def take(name: str, n: int) -> None:
        fresh = max(0, -(-(n - real.count_free_blocks(0)) // 2))
        for _ in range(fresh):
            real.allocate_sector(0)
        tables.setdefault(name, []).extend(real.get_free_blocks(0, n))
        ours.allocate(name, n)
        assert ours.tables[name] == tables[name]

    take("a", 3)
    take("b", 2)
    real.free_blocks(0, tables.pop("a"))
    ours.free("a")
    take("c", 1)
    real.try_to_free_sectors()
    ours.try_to_free_sectors()
    assert ours.free_sectors == real.free_sectors
    take("d", 4)
