"""Swapping real K/V: exact round trips, the scheduler's data plane, Fig. 19's two halves."""

from __future__ import annotations

import pytest
import torch

from pagedlab import paged_attention, reference_attention
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor
from pagedlab.attention.swap import (
    HostPool,
    SwappingKV,
    copy_blocks,
    swap_in,
    swap_out,
    token_kv,
)
from pagedlab.attention.swap_cost import CostModel, measure_swap
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.requests import Request
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig
from tests.refuses import refuses


def attention(cache: PagedKVCache, table: BlockTable) -> tuple[torch.Tensor, torch.Tensor]:
    query = torch.linspace(-1, 1, 2 * 8, device=cache.device).reshape(1, 2, 8)
    args = (
        query,
        cache.key,
        cache.value,
        block_tables_tensor([table.blocks], device=cache.device),
        torch.tensor([table.num_tokens], dtype=torch.int32, device=cache.device),
    )
    return paged_attention(*args), reference_attention(*args)


def test_swap_round_trip_moves_blocks_not_results() -> None:
    pool = BlockAllocator(8, 4)
    cache = PagedKVCache(8, 4, 2, 8)
    host = HostPool.like(cache)
    table = BlockTable(pool)
    table.append_tokens(11)
    k, v = token_kv("seq", 0, torch.arange(11), 2, 8)
    cache.write(table.slot_mapping(), k.to(cache.device), v.to(cache.device))
    before, reference = attention(cache, table)
    blocks_before = table.blocks

    swapped = swap_out(table, cache, host)
    assert pool.num_free == 8 and table.freed and host.allocator.num_free == 5
    other = BlockTable(pool)
    other.append_tokens(8)  # someone else takes the freed blocks meanwhile
    back = swap_in(swapped, host, cache, pool)

    assert set(back.blocks).isdisjoint(blocks_before)  # new physical blocks
    assert host.allocator.num_free == 8
    assert torch.equal(cache.gather(back.blocks, 11)[0], k.to(cache.device))
    after, _ = attention(cache, back)
    assert torch.equal(after, before)  # bit for bit
    assert torch.allclose(before, reference, atol=1e-5)


def test_swap_is_atomic_when_a_pool_is_full() -> None:
    pool = BlockAllocator(4, 2)
    cache = PagedKVCache(4, 2, 1, 2, device="cpu")
    host = HostPool(1, 2, 1, 2)
    table = BlockTable(pool)
    table.append_tokens(4)
    with pytest.raises(OutOfBlocksError):
        swap_out(table, cache, host)
    assert not table.freed and host.allocator.num_free == 1
    host = HostPool(4, 2, 1, 2)
    swapped = swap_out(table, cache, host)
    filler = BlockTable(pool)
    filler.append_tokens(7)
    with pytest.raises(OutOfBlocksError):
        swap_in(swapped, host, cache, pool)
    assert host.allocator.num_free == 2 and pool.num_free == 0


def test_host_pool_is_pinned_only_with_cuda() -> None:
    host = HostPool(2, 4, 1, 2)
    assert host.cache.device.type == "cpu"
    assert host.cache.key.is_pinned() == torch.cuda.is_available()
    assert "pinned" in repr(host)


def test_copy_blocks_refuses_bad_input_and_changes_nothing() -> None:
    a = PagedKVCache(2, 4, 1, 2, device="cpu")
    b = PagedKVCache(2, 4, 1, 2, device="cpu")
    a.key.fill_(1.0)
    with pytest.raises(ValueError, match="dst block 2"):
        copy_blocks(a, b, [(0, 0), (1, 2)])
    assert not b.key.any()
    with pytest.raises(ValueError, match="block_size"):
        copy_blocks(a, PagedKVCache(2, 2, 1, 2, device="cpu"), [(0, 0)])
    with pytest.raises(TypeError, match="src block"):
        copy_blocks(a, b, [(0.5, 0)])


@pytest.mark.parametrize("mode", ["swap", "recompute"])
@pytest.mark.parametrize("chunked", [False, True])
def test_scheduler_keeps_every_sequences_kv_exact(mode: str, chunked: bool) -> None:
    device = PagedKVCache(14, 4, 2, 4, device="cpu")
    store = SwappingKV(device, HostPool.like(device))
    s = Scheduler(
        BlockAllocator(14, 4),
        SchedulerConfig(mode=mode, token_budget=16 if chunked else None, chunked_prefill=chunked),
        host=store.host.allocator,
        kv=store,
    )
    for name, prompt, output, samples in [
        ("A", 10, 14, 1),
        ("B", 6, 10, 2),
        ("C", 14, 8, 1),
        ("D", 5, 12, 1),
        ("E", 8, 9, 1),
    ]:
        s.add(Request(name, prompt, output, samples))
    checked = 0
    while not s.done:
        s.step()
        s.check_invariants()
        checked += store.verify(s.running)
    assert s.preemptions > 0 and checked > 50


def test_verify_names_the_wrong_position() -> None:
    device = PagedKVCache(4, 2, 1, 2, device="cpu")
    store = SwappingKV(device, HostPool.like(device))
    s = Scheduler(BlockAllocator(4, 2), host=store.host.allocator, kv=store)
    group = s.add(Request("A", 3, 2))
    s.step()
    block, offset = group.tables[0].slot(2)
    device.value[block, offset] += 1
    with pytest.raises(AssertionError, match="position 2"):
        store.verify(s.running)


def test_measured_swap_moves_the_same_bytes_in_more_blocks() -> None:
    """What the measurement compares; its seconds are printed by benchmarks, never asserted."""
    timings = measure_swap(block_sizes=(1, 64), num_tokens=1024, repeats=1)
    assert [t.num_blocks for t in timings] == [1024, 16]
    assert timings[0].nbytes == timings[1].nbytes
    assert all(t.swap_out_s > 0 and t.swap_in_s > 0 for t in timings)
    with pytest.raises(ValueError, match="does not divide"):
        measure_swap(block_sizes=(3,), num_tokens=64)


def test_cost_model_reproduces_fig_19_shape() -> None:
    model, tokens = CostModel(), 1024
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    swap = [model.swap_s(tokens, b) * 2 for b in sizes]  # out + in
    recompute = model.recompute_s(tokens)
    assert swap == sorted(swap, reverse=True)  # swap falls with the block size
    assert swap[0] > 4 * recompute  # small blocks: swapping is far slower
    assert all(recompute <= 1.2 * s for s in swap)  # recompute never > 20 % slower (§7.3)
    for b, s in zip(sizes, swap, strict=True):
        if 16 <= b <= 64:
            assert 0.5 < recompute / s < 1.5  # comparable from 16 to 64
    assert model.kv_bytes_per_token == 819_200  # OPT-13B: 800 KB per token (§3)


# --- a swap has an owner and is validated before anything is allocated ----------------------


def _pools_and_kv(*things: object) -> tuple[object, ...]:
    """Ref counts, free lists and K/V of allocators, host pools and caches, by value."""
    seen: list[object] = []
    for thing in things:
        if isinstance(thing, BlockAllocator):
            seen += [thing.refcounts(), thing.free_list()]
        elif isinstance(thing, HostPool):
            seen += [thing.allocator.refcounts(), thing.allocator.free_list()]
            seen += [thing.cache.key.tolist(), thing.cache.value.tolist()]
        elif isinstance(thing, PagedKVCache):
            seen += [thing.key.tolist(), thing.value.tolist()]
    return tuple(seen)


def test_a_swapped_sequence_comes_back_once() -> None:
    """A swap handle comes back once: a second swap_in of A, whose host blocks B now holds,
    would hand B's K/V to a table "as A"; it is refused, changing nothing."""
    a = BlockAllocator(8, 2)
    dev = PagedKVCache(8, 2, 1, 2)
    host = HostPool.like(dev, 2)
    first = BlockTable(a)
    first.append_tokens(4)
    sw_a = swap_out(first, dev, host)
    back = swap_in(sw_a, host, dev, a)
    assert sw_a.swapped_in and not back.freed
    second = BlockTable(a)
    second.append_tokens(4)
    k, v = token_kv("B", 0, torch.arange(4), 1, 2)
    dev.write(second.slot_mapping(), k, v)
    sw_b = swap_out(second, dev, host)
    assert set(sw_b.blocks) == set(sw_a.blocks)  # the host blocks A had are B's now
    refuses(
        lambda: swap_in(sw_a, host, dev, a),
        match="swapped in already",
        state=lambda: _pools_and_kv(a, host, dev),
    )
    again = swap_in(sw_b, host, dev, a)  # B's K/V is still there, and comes back once
    assert torch.equal(dev.gather(again.blocks, 4)[0], k)
    with pytest.raises(ValueError, match="swapped in already"):
        swap_in(sw_b, host, dev, a)


def test_a_host_block_freed_behind_its_back_is_refused() -> None:
    pool = BlockAllocator(4, 2)
    dev = PagedKVCache(4, 2, 1, 2)
    host = HostPool.like(dev)
    table = BlockTable(pool)
    table.append_tokens(3)
    swapped = swap_out(table, dev, host)
    host.allocator.free(swapped.blocks[0])
    refuses(
        lambda: swap_in(swapped, host, dev, pool),
        match="freed behind its back",
        state=lambda: _pools_and_kv(pool, host, dev),
    )


def test_swaps_validate_before_they_allocate() -> None:
    """Caches that do not match, the wrong host pool, wrong kinds: nothing allocated or freed."""
    pool = BlockAllocator(4, 2)
    dev = PagedKVCache(4, 2, 1, 2)
    host = HostPool.like(dev)
    other_host = HostPool.like(dev)
    table = BlockTable(pool)
    table.append_tokens(3)
    refusals = [
        (lambda: swap_out(table, dev, HostPool(4, 2, 1, 4)), ValueError, "head_dim"),
        (
            lambda: swap_out(table, PagedKVCache(1, 2, 1, 2), host),
            ValueError,
            "more than the cache",
        ),
        (lambda: swap_out(table, dev, host.allocator), TypeError, "host must be a HostPool"),
        (lambda: swap_out(table.blocks, dev, host), TypeError, "table must be a BlockTable"),
        (lambda: swap_out(table, host.cache.key, host), TypeError, "device must be a PagedKVCache"),
    ]
    for call, kind, words in refusals:
        refuses(call, kind, match=words, state=lambda: _pools_and_kv(pool, host, dev))
        assert not table.freed
    swapped = swap_out(table, dev, host)
    refusals = [
        (lambda: swap_in(swapped, other_host, dev, pool), ValueError, "different host pool"),
        (
            lambda: swap_in(swapped, host, PagedKVCache(4, 2, 2, 2), pool),
            ValueError,
            "num_kv_heads",
        ),
        (lambda: swap_in(swapped, host, dev, BlockAllocator(8, 2)), ValueError, "more than the"),
        (lambda: swap_in(swapped, host, dev, BlockAllocator(4, 1)), ValueError, "block_size"),
        (lambda: swap_in(swapped.blocks, host, dev, pool), TypeError, "SwappedSequence"),
        (lambda: swap_in(swapped, host, dev, "pool"), TypeError, "allocator must be"),
    ]
    for call, kind, words in refusals:
        refuses(call, kind, match=words, state=lambda: _pools_and_kv(pool, host, other_host, dev))
    assert not swapped.swapped_in
    swap_in(swapped, host, dev, pool)


def test_a_freed_table_is_refused_by_swap_out() -> None:
    pool = BlockAllocator(4, 2)
    dev = PagedKVCache(4, 2, 1, 2)
    host = HostPool.like(dev)
    table = BlockTable(pool)
    table.append_tokens(2)
    table.free()
    with pytest.raises(ValueError, match="already freed"):
        swap_out(table, dev, host)
    assert host.allocator.num_free == 4


def test_hooks_that_do_not_fit_the_pools_are_refused_when_built() -> None:
    small = PagedKVCache(4, 2, 1, 2)
    store = SwappingKV(small, HostPool.like(small))
    with pytest.raises(ValueError, match="allocator has 8 blocks, more than the cache's 4"):
        Scheduler(BlockAllocator(8, 2), host=store.host.allocator, kv=store)
    with pytest.raises(ValueError, match="block_size"):
        Scheduler(BlockAllocator(4, 1), host=BlockAllocator(4, 1), kv=store)
    with pytest.raises(ValueError, match="host=store.host.allocator"):
        Scheduler(BlockAllocator(4, 2), kv=store)  # a host pool of its own: not the store's
    with pytest.raises(TypeError, match="lacks swap_out, swap_in, copy, forward"):
        Scheduler(BlockAllocator(4, 2), kv=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="host must be a HostPool"):
        SwappingKV(small, small)  # type: ignore[arg-type]


def test_hooks_replaced_after_build_are_refused_before_the_step() -> None:
    device = PagedKVCache(8, 2, 1, 2)
    store = SwappingKV(device, HostPool.like(device))
    s = Scheduler(
        BlockAllocator(8, 2), SchedulerConfig(mode="swap"), host=store.host.allocator, kv=store
    )
    s.add(Request("A", 3, 4))
    s.step()
    small = PagedKVCache(4, 2, 1, 2)
    s.kv = SwappingKV(small, HostPool.like(small))
    with pytest.raises(ValueError, match="more than the cache's 4"):
        s.step()
    assert s.steps == 1 and s.running[0].tables[0].num_tokens == 3
    s.kv = store
    s.run()
    assert s.done and store.verify(s.finished) == 0


def _cache() -> PagedKVCache:
    return PagedKVCache(4, 2, 1, 2)


BAD_CALLS = [
    (lambda: HostPool.like("cache"), TypeError, "cache must be a PagedKVCache"),
    (lambda: copy_blocks(_cache(), _cache(), 5), TypeError, "pairs must be a sequence"),
    (lambda: copy_blocks(_cache(), _cache(), None), TypeError, "pairs must be a sequence"),
    (lambda: copy_blocks(_cache(), _cache(), [(1,)]), TypeError, r"each of pairs .* got \(1,\)"),
    (lambda: copy_blocks("src", _cache(), []), TypeError, "src must be a PagedKVCache"),
    (lambda: token_kv(5, 0, torch.arange(3), 1, 2), TypeError, "name must be a str"),
    (lambda: token_kv("a", 0, [1, 2], 1, 2), TypeError, "positions must be an integer"),
    (lambda: token_kv("a", 0, torch.arange(3), -1, 2), ValueError, "num_kv_heads must be >= 1"),
    (lambda: token_kv("a", "x", torch.arange(3), 1, 2), TypeError, "stream must be an integer"),
    (lambda: SwappingKV(_cache(), HostPool.like(_cache())).verify(None), TypeError, "groups"),
    (lambda: SwappingKV(_cache(), HostPool.like(_cache())).verify([1]), TypeError, "Groups"),
    (lambda: CostModel(pcie_bytes_per_s=0), ValueError, "pcie_bytes_per_s must be finite and > 0"),
    (lambda: CostModel(num_layers="a"), TypeError, "num_layers must be an integer"),
    (lambda: CostModel(transfer_latency_s=float("nan")), ValueError, "transfer_latency_s"),
    (lambda: CostModel().swap_s(-10, 4), ValueError, "num_tokens must be >= 0, got -10"),
    (lambda: CostModel().swap_s(10, 0), ValueError, "block_size must be >= 1, got 0"),
    (lambda: CostModel().recompute_s(-5), ValueError, "num_tokens must be >= 0, got -5"),
    (lambda: measure_swap(block_sizes=5, num_tokens=8), TypeError, "block_sizes must be a seq"),
]


@pytest.mark.parametrize(("call", "kind", "words"), BAD_CALLS, ids=[c[2][:30] for c in BAD_CALLS])
def test_swap_entry_points_name_bad_input(call, kind: type[Exception], words: str) -> None:
    """Before: AttributeError, ZeroDivisionError, unnamed TypeErrors or silent negatives."""
    with pytest.raises(kind, match=words):
        call()
