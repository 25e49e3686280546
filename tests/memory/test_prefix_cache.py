"""Prefix caching: chained hashes, hits, misses, LRU eviction, collisions, and the two rules
behind most "low hit rate" reports (only full blocks; the last prompt token is computed)."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest
import torch

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError
from pagedlab.memory.prefix_cache import ROOT_HASH, PrefixCache, block_hashes, chain_hash
from tests.memory.bad_calls import (
    IntCall,
    OtherCall,
    misuse_tests,
    scene,
)
from tests.refuses import refuses


def make(num_blocks: int = 8, block_size: int = 4, **kw: int) -> PrefixCache:
    return PrefixCache(BlockAllocator(num_blocks, block_size), **kw)


def test_hash_is_chained_sha256_over_the_prefix() -> None:
    tokens = list(range(10))
    hashes = block_hashes(tokens, 4)
    assert len(hashes) == 2  # the partial tail (tokens 8, 9) has no hash
    first = hashlib.sha256(ROOT_HASH.encode() + struct.pack("<4q", 0, 1, 2, 3)).hexdigest()[:16]
    assert hashes[0] == first
    assert hashes[1] == chain_hash(first, [4, 5, 6, 7])
    # same block content after a different prefix: a different hash
    assert block_hashes([9, 9, 9, 9, 4, 5, 6, 7], 4)[1] != hashes[1]


def test_shared_prefix_hits_and_the_rest_is_computed() -> None:
    cache = make()
    first = cache.admit(list(range(10)))  # blocks 0, 1 full; block 2 holds 2 tokens
    assert first.hit_blocks == [] and first.miss_blocks == 2
    assert cache.cached_blocks().keys() == {0, 1}
    second = cache.admit(list(range(8)) + [50, 51, 52])
    assert second.hit_blocks == [0, 1] and second.computed_tokens == 3
    assert second.table.blocks[:2] == [0, 1]
    assert cache.allocator.refcount(0) == 2
    assert cache.stats.hit_tokens == 8 and cache.stats.query_tokens == 21
    assert cache.stats.hit_blocks == 2 and cache.stats.miss_blocks == 2


def test_only_full_blocks_are_cached() -> None:
    cache = make()
    cache.admit([1, 2, 3, 4, 5, 6])  # one full block, two tokens in a partial one
    again = cache.admit([1, 2, 3, 4, 5, 6, 7])
    assert again.hit_blocks == [0]  # tokens 5 and 6 were computed before, but never cached
    assert again.partial_tokens == 3 and again.computed_tokens == 3


def test_last_prompt_token_is_always_computed() -> None:
    cache = make()
    cache.admit(list(range(8)))  # block-aligned: both blocks cached
    assert len(cache.cached_blocks()) == 2
    again = cache.admit(list(range(8)))
    assert again.hit_blocks == [0]  # not [0, 1]: at most (8 - 1) // 4 = 1 block may hit
    assert again.recomputed_last_block and again.computed_tokens == 4
    assert again.table.blocks[1] != 1  # the last block is recomputed into a new block
    assert cache.cached_blocks()[1] == cache.hashes(range(8))[1]  # the original stays cached
    assert cache.stats.hit_rate == 4 / 16


def test_freed_blocks_stay_cached_until_reallocated_lru_first() -> None:
    cache = make(num_blocks=6)
    a = cache.admit(list(range(9)))  # blocks 0, 1 cached, 2 partial
    b = cache.admit(list(range(100, 109)))  # blocks 3, 4 cached, 5 partial
    a.table.free()
    b.table.free()
    alloc = cache.allocator
    assert alloc.free_list() == [2, 1, 0, 5, 4, 3]  # tail first: prefixes leave last
    assert set(cache.cached_blocks()) == {0, 1, 3, 4}
    hit = cache.admit(list(range(9)))  # still a hit after the free: reuse takes 0, 1 back
    assert hit.hit_blocks == [0, 1] and alloc.refcount(0) == 1
    assert cache.stats.evictions == 0
    hit.table.free()
    # An 11-token request takes 3 blocks from the front: 5, 4, 3 (request b's, least
    # recently used); 4 and 3 were cached and are evicted, 5 was a partial block.
    other = cache.admit(list(range(200, 211)))
    assert other.table.blocks == [5, 4, 3]
    assert cache.stats.evictions == 2
    assert set(cache.cached_blocks()) == {0, 1, 5, 4}  # 5, 4 now cached with new tokens
    assert cache.tokens_of(4) == (204, 205, 206, 207)
    with pytest.raises(ValueError, match="block 3 is not cached \\(evicted or never stored\\)"):
        cache.tokens_of(3)
    assert cache.hashes(range(100, 108))[0] not in cache.cached_blocks().values()


def test_collision_is_a_miss_not_wrong_kv() -> None:
    cache = make(num_blocks=64, hash_bytes=1)  # 256 possible hashes: collisions are easy
    cache.admit([0, 0, 0, 0, 1])
    target = cache.hashes([0, 0, 0, 0])[0]
    other = next([t, t, t, t] for t in range(1, 10_000) if cache.hashes([t, t, t, t])[0] == target)
    result = cache.admit(other + [1])
    assert result.hit_blocks == [] and cache.stats.collisions == 1
    assert result.table.blocks[0] != 0
    assert cache.tokens_of(0) == (0, 0, 0, 0)


def test_a_colliding_block_computed_after_another_prefix_is_a_miss() -> None:
    """Same hash and same tokens, but the cached block's KV was computed after other tokens."""

    def level1(tokens: list[int]) -> str:
        return block_hashes(tokens, 2, hash_bytes=1)[1]

    k, x = next(
        (k, x)
        for k in range(2, 200)
        for x in range(2, 3000)
        if block_hashes([x, x], 2, 1) != block_hashes([1, 1], 2, 1)
        and level1([x, x, k, k]) == level1([1, 1, k, k])
    )
    cache = make(num_blocks=64, block_size=2, hash_bytes=1)
    first = cache.admit([1, 1, k, k, 9])  # its block 1: the KV of (k, k) after (1, 1)
    own = cache.admit([x, x, 9]).table.blocks[0]
    again = cache.admit([x, x, k, k, 9])  # (k, k) after (x, x): same hash, other KV
    assert again.hit_blocks == [own] and first.table.blocks[1] not in again.hit_blocks
    assert cache.stats.collisions == 1


def test_listeners_hear_each_store_and_eviction_after_the_change() -> None:
    cache = make(num_blocks=4, block_size=2)
    heard: list[tuple[str, int, str, bool]] = []
    cache.listen(lambda kind, b, h: heard.append((kind, b, h, b in cache.cached_blocks())))
    hashes = cache.hashes([1, 1, 2, 2])
    cache.admit([1, 1, 2, 2, 3]).table.free()
    assert heard == [("stored", 0, hashes[0], True), ("stored", 1, hashes[1], True)]
    cache.allocator.reuse(1)
    heard.clear()
    assert [cache.allocator.allocate() for _ in range(3)] == [3, 2, 0]
    # block 0 handed out, and block 1 (computed after it) with it; the cache said so first
    assert heard == [("evicted", 0, hashes[0], False), ("evicted", 1, hashes[1], False)]
    for b in (0, 1, 2, 3):
        cache.allocator.free(b)
    stored = cache.admit([5, 5, 6]).table.blocks[0]
    heard.clear()
    cache.close()
    assert [(kind, b) for kind, b, _, _ in heard] == [("evicted", stored)]
    with pytest.raises(TypeError, match="listener must be callable, got 3"):
        cache.listen(3)  # type: ignore[arg-type]


def test_evicting_a_block_forgets_the_blocks_cached_after_it() -> None:
    cache = make(num_blocks=4, block_size=2)
    cache.admit([1, 1, 2, 2, 3]).table.free()  # blocks 0, 1 cached (1 after 0), 2 partial
    alloc = cache.allocator
    assert alloc.free_list() == [3, 2, 1, 0]
    alloc.reuse(1)  # block 1 is held again, still cached
    assert [alloc.allocate() for _ in range(3)] == [3, 2, 0]  # block 0 is handed out
    assert cache.cached_blocks() == {}  # and block 1, computed after it, is unreachable
    assert cache.stats.evictions == 2 and cache.lookup([1, 1, 2, 2, 3]) == ([], 0)


def test_decoded_blocks_can_be_registered() -> None:
    cache = make()
    first = cache.admit([1, 2, 3])
    first.table.append_tokens(1)
    assert cache.register(first.table, [1, 2, 3, 9]) == 1
    assert cache.admit([1, 2, 3, 9, 5]).hit_blocks == [first.table.blocks[0]]
    with pytest.raises(ValueError, match="tokens has 3 ids but table"):
        cache.register(first.table, [1, 2, 3])


def test_out_of_blocks_changes_nothing() -> None:
    cache = make(num_blocks=4)
    cache.admit(list(range(9))).table.free()  # blocks 0, 1 cached and free
    refuses(
        lambda: cache.admit(list(range(8)) + list(range(50, 62))),  # 2 hits back + 3 new > 4
        OutOfBlocksError,
        match="needs 5 free block",
        state=lambda: (cache.allocator.free_list(), cache.cached_blocks(), repr(cache.stats)),
    )


def test_bad_hash_bytes() -> None:
    with pytest.raises(ValueError, match="hash_bytes must be <= 32 \\(sha256\\), got 33"):
        make(hash_bytes=33)
    with pytest.raises(ValueError, match="hash_bytes must be >= 1, got 0"):
        make(hash_bytes=0)


# --- bad values: a TypeError or ValueError naming the value, nothing changed ----------------
INT_ARGUMENTS: list[tuple[str, IntCall]] = [
    ("hash_bytes", lambda s, v: PrefixCache(s.alloc, hash_bytes=v)),
    ("hash_bytes", lambda s, v: block_hashes([1, 2, 3, 4], 4, hash_bytes=v)),
    ("hash_bytes", lambda s, v: chain_hash("", [1], hash_bytes=v)),
    ("block_size", lambda s, v: block_hashes([1, 2, 3, 4], v)),  # a huge one: no full block
    ("token id", lambda s, v: s.cache.admit([1, v])),
    ("token id", lambda s, v: s.cache.lookup([1, v])),
    ("token id", lambda s, v: s.cache.blocks_to_admit([1, v])),
    ("token id", lambda s, v: s.cache.register(s.table, [1, 2, 3, 4, v])),
    ("token id", lambda s, v: chain_hash("", [v])),
    ("block", lambda s, v: s.cache.tokens_of(v)),
]


OTHER_CALLS: list[OtherCall] = [
    (lambda s: PrefixCache(None), TypeError, "PrefixCache needs a BlockAllocator"),
    (
        lambda s: s.cache.admit("abc"),
        TypeError,
        "tokens must be a sequence of integer token ids, got 'abc'",
    ),
    (lambda s: s.cache.admit(5), TypeError, "tokens must be a sequence"),
    (lambda s: s.cache.lookup(torch.tensor(3)), TypeError, "tokens must be a sequence"),
    (lambda s: s.cache.admit(np.array(3)), TypeError, "tokens must be a sequence"),
    (
        lambda s: s.cache.admit([]),
        ValueError,
        "tokens must hold at least one token id, got none",
    ),
    (lambda s: s.cache.admit([1, 2.5]), TypeError, "token id must be an integer, got 2.5"),
    (
        lambda s: s.cache.admit([2**64]),
        ValueError,
        "token id 18446744073709551616 does not fit",
    ),
    (lambda s: s.cache.register("t", [1]), TypeError, "table must be a BlockTable"),
    (lambda s: chain_hash(None, [1]), TypeError, "parent must be a hex hash string"),
    (lambda s: chain_hash("", [2**64]), ValueError, "does not fit in 64 bits"),
]
(
    test_wrong_kinds_are_type_errors,
    test_wrong_values_are_value_errors,
    test_other_bad_arguments,
) = misuse_tests(INT_ARGUMENTS, OTHER_CALLS)


def test_a_closed_prefix_cache_answers_nothing() -> None:
    s = scene()
    s.table.free()
    s.child.free()  # block 0 is cached and free
    s.cache.close()
    s.cache.close()  # twice is harmless
    BlockTable(s.alloc).append_tokens(32)  # every block handed out again, block 0 included
    assert s.cache.cached_blocks() == {}
    for call in (lambda: s.cache.lookup([1, 2, 3, 4, 5]), lambda: s.cache.admit([1, 2, 3, 4, 5])):
        refuses(call, match="the prefix cache was closed", state=s.state)


def test_cache_settings_are_read_only() -> None:
    s = scene()
    for name in ("hash_bytes", "allocator", "block_size", "stats"):
        with pytest.raises(AttributeError):
            setattr(s.cache, name, 0)
