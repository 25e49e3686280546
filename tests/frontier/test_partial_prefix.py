"""pagedlab.frontier.partial_prefix: hits inside a block, the (src, dst) copy, the source kept
one step, prefix_match_unit = block size as vLLM's default."""

from __future__ import annotations

import pytest

from pagedlab.frontier.partial_prefix import BlockCopy, PartialPrefixCache
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError

SHARED = [1, 2, 3, 4, 5, 6]  # ends inside block 1 at block size 4


def test_a_hit_inside_a_block_copies_it_and_keeps_both_ends_one_step() -> None:
    alloc = BlockAllocator(8, 4)
    cache = PartialPrefixCache(alloc, prefix_match_unit=2)
    first = cache.admit([*SHARED, 7, 8, 9])
    assert first.blocks == [0, 1, 2] and first.copy is None
    assert cache.finish_step() == []
    second = cache.admit([*SHARED, 20, 21])
    assert second.hit_tokens == 6 and second.shared_blocks == [0]
    assert second.copy == BlockCopy(src=1, dst=3) and second.blocks == [0, 3]
    assert cache.pending_copies == [BlockCopy(1, 3)]
    assert alloc.refcount(1) == 2 and alloc.refcount(3) == 2  # the request + the pending copy
    cache.free(first.request)  # a free in the same step: the source survives it
    assert alloc.refcount(1) == 1 and 1 not in alloc.free_list()
    assert cache.finish_step() == [BlockCopy(1, 3)]
    assert alloc.refcount(1) == 0 and alloc.refcount(3) == 1 and cache.pending_copies == []


def test_default_unit_is_the_block_size_only_full_blocks_hit() -> None:
    cache = PartialPrefixCache(BlockAllocator(8, 4))
    assert cache.prefix_match_unit == 4
    cache.admit([*SHARED, 7, 8, 9])
    second = cache.admit([*SHARED, 20, 21])
    assert second.hit_tokens == 4 and second.copy is None


def test_the_last_prompt_token_is_always_computed() -> None:
    cache = PartialPrefixCache(BlockAllocator(8, 4), prefix_match_unit=1)
    cache.admit(SHARED)
    again = cache.admit(SHARED)
    assert again.hit_tokens == 5 and again.computed_tokens == 1 and again.copy is not None


def test_a_reused_block_forgets_its_entries() -> None:
    alloc = BlockAllocator(2, 4)
    cache = PartialPrefixCache(alloc, prefix_match_unit=2)
    cache.free(cache.admit([1, 2, 3, 4, 5]).request)
    cache.free(cache.admit([9, 9, 9, 9, 9, 9, 9, 9]).request)  # takes both blocks back
    assert cache.lookup([1, 2, 3, 4, 5]) == (0, [])


def test_misuse_changes_nothing() -> None:
    alloc = BlockAllocator(3, 4)
    with pytest.raises(ValueError, match="divide"):
        PartialPrefixCache(alloc, prefix_match_unit=3)
    with pytest.raises(ValueError, match="prefix_match_unit"):
        PartialPrefixCache(alloc, prefix_match_unit=8)
    with pytest.raises(TypeError, match="BlockAllocator"):
        PartialPrefixCache("pool")  # type: ignore[arg-type]
    cache = PartialPrefixCache(alloc, prefix_match_unit=2)
    cache.admit([*SHARED, 7])
    before = alloc.refcounts()
    with pytest.raises(OutOfBlocksError):
        cache.admit([*SHARED, 30, 31, 32, 33, 34, 35])  # a copy and a new block, 1 free
    with pytest.raises(ValueError, match="at least one"):
        cache.admit([])
    with pytest.raises(ValueError, match="not admitted"):
        cache.free(99)
    assert alloc.refcounts() == before and cache.pending_copies == []
