"""PagedKVCache: write by slot mapping, gather in logical order, copy a block; bad input
changes nothing. The Triton write path is checked against plain torch indexing."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor, paged_attention, reference_attention


class FakeTable:
    """What kv_cache needs of a BlockTable: blocks, num_tokens, slot_mapping()."""

    def __init__(self, blocks: list[int], num_tokens: int, block_size: int) -> None:
        self.blocks, self.num_tokens, self.block_size = blocks, num_tokens, block_size

    def slot_mapping(self) -> list[int]:
        bs = self.block_size
        return [self.blocks[p // bs] * bs + p % bs for p in range(self.num_tokens)]


def store_by_indexing(cache, slots, k, v) -> None:
    """The reshape-and-cache oracle in plain torch: slot s of ``[num_slots, heads, dim]``."""
    slots = torch.as_tensor(slots, dtype=torch.int64)
    cache.key.view(cache.num_slots, cache.num_kv_heads, cache.head_dim)[slots] = k
    cache.value.view(cache.num_slots, cache.num_kv_heads, cache.head_dim)[slots] = v


def tokens(n: int, heads: int = 2, dim: int = 3, start: float = 0.0, dtype=torch.float32):
    """Distinct, recognisable K/V: k[i] is filled with start + i, v[i] with -(start + i)."""
    base = (start + torch.arange(n, dtype=torch.float32))[:, None, None].expand(n, heads, dim)
    return base.to(dtype).clone(), (-base).to(dtype).clone()


def test_shapes_and_zeroed_storage():
    cache = PagedKVCache(5, 4, 2, 3)
    assert cache.key.shape == cache.value.shape == (5, 4, 2, 3)
    assert cache.num_slots == 20 and cache.nbytes == 2 * 5 * 4 * 2 * 3 * 4
    assert not cache.key.any() and not cache.value.any()
    assert "num_blocks=5" in repr(cache)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_write_then_gather_in_logical_order(dtype):
    table = FakeTable([4, 1], num_tokens=5, block_size=4)  # the example layout
    cache = PagedKVCache(6, 4, 2, 3, dtype=dtype)
    k, v = tokens(5, dtype=dtype)
    cache.write(table.slot_mapping(), k, v)
    assert torch.equal(cache.key[4, :, 0, 0].float(), torch.tensor([0.0, 1, 2, 3]))
    assert cache.key[1, 0, 0, 0].item() == 4 and not cache.key[1, 1:].any()
    got_k, got_v = cache.gather(table.blocks, table.num_tokens)
    assert torch.equal(got_k, k) and torch.equal(got_v, v)


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_triton_write_equals_torch_indexing(block_size):
    gen = torch.Generator().manual_seed(block_size)
    slots = torch.randperm(7 * block_size, generator=gen)[: 3 * block_size]
    k = torch.randn(len(slots), 3, 5, generator=gen)
    v = torch.randn(len(slots), 3, 5, generator=gen)
    by_kernel, by_torch = PagedKVCache(7, block_size, 3, 5), PagedKVCache(7, block_size, 3, 5)
    by_kernel.write(slots, k, v)
    store_by_indexing(by_torch, slots, k, v)
    assert torch.equal(by_kernel.key, by_torch.key)
    assert torch.equal(by_kernel.value, by_torch.value)


def test_appending_moves_nothing_already_written():
    """The 4 -> 5 transition: a new block is used, the prefix stays where it is."""
    cache = PagedKVCache(6, 4, 1, 1)
    k, v = tokens(4, heads=1, dim=1, start=1)
    cache.write([16, 17, 18, 19], k, v)  # block 4
    before = cache.key.clone()
    k5, v5 = tokens(1, heads=1, dim=1, start=5)
    cache.write([4], k5, v5)  # block 1, offset 0
    changed = (cache.key != before).nonzero().tolist()
    assert changed == [[1, 0, 0, 0]]


def test_copy_block_for_copy_on_write():
    cache = PagedKVCache(4, 2, 1, 2)
    k, v = tokens(2, heads=1, dim=2, start=7)
    cache.write([2, 3], k, v)  # block 1
    cache.copy_block(1, 3)
    assert torch.equal(cache.key[3], cache.key[1]) and torch.equal(cache.value[3], cache.value[1])
    k2, v2 = tokens(1, heads=1, dim=2, start=100)
    cache.write([7], k2, v2)  # the copy diverges; the original is untouched
    assert cache.key[1, 1, 0, 0].item() == 8 and cache.key[3, 1, 0, 0].item() == 100
    cache.copy_block(2, 2)  # a no-op, allowed


def test_cache_feeds_paged_attention():
    """Write the example sequence through the cache; the kernel reads it back: output 3."""
    cache = PagedKVCache(6, 4, 1, 1)
    table = FakeTable([4, 1], 5, 4)
    keys = torch.zeros(5, 1, 1)
    values = torch.arange(1.0, 6.0)[:, None, None]
    cache.write(table.slot_mapping(), keys, values)
    args = (
        torch.ones(1, 1, 1),
        cache.key,
        cache.value,
        block_tables_tensor([table.blocks]),
        torch.tensor([5], dtype=torch.int32),
    )
    assert paged_attention(*args).item() == 3.0
    assert reference_attention(*args).item() == 3.0


BAD_CALLS = {
    "slot too big": (lambda c, k, v: c.write([0, 24], k[:2], v[:2]), r"slot_mapping\[1\] = 24"),
    "slot negative": (lambda c, k, v: c.write([-1], k[:1], v[:1]), r"slot_mapping\[0\] = -1"),
    "duplicate slot": (lambda c, k, v: c.write([3, 3], k[:2], v[:2]), "slot 3 more than once"),
    "float slots": (lambda c, k, v: c.write(torch.tensor([1.0]), k[:1], v[:1]), "integers"),
    "2-D slots": (lambda c, k, v: c.write([[1]], k[:1], v[:1]), "1-D"),
    "k count": (lambda c, k, v: c.write([1, 2], k[:3], v[:2]), r"k must be .*got \[3, 2, 3\]"),
    "v heads": (lambda c, k, v: c.write([1], k[:1], v[:1, :1]), "v must be"),
    "k dtype": (lambda c, k, v: c.write([1], k[:1].half(), v[:1]), "k dtype torch.float16"),
    "k list": (lambda c, k, v: c.write([1], [[0.0]], v[:1]), "k must be a torch.Tensor"),
    "copy src": (lambda c, k, v: c.copy_block(6, 0), "src = 6"),
    "copy dst": (lambda c, k, v: c.copy_block(0, -1), "dst = -1"),
    "copy bool": (lambda c, k, v: c.copy_block(True, 0), "src must be an integer"),
    "gather capacity": (lambda c, k, v: c.gather([0], 5), "num_tokens = 5 exceeds"),
    "gather block": (lambda c, k, v: c.gather([0, 9], 5), r"blocks\[1\] = 9"),
    "gather negative": (lambda c, k, v: c.gather([0], -1), "num_tokens must be"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_raises_and_changes_nothing(case):
    cache = PagedKVCache(6, 4, 2, 3)
    k, v = tokens(3, start=1)
    cache.write([0, 5, 9], k, v)
    key, value = cache.key.clone(), cache.value.clone()
    call, message = BAD_CALLS[case]
    with pytest.raises(ValueError, match=message):
        call(cache, *tokens(3, start=50))
    assert torch.equal(cache.key, key) and torch.equal(cache.value, value)


@pytest.mark.parametrize(
    "args",
    [(0, 4, 1, 1), (4, 0, 1, 1), (4, 4, -1, 1), (4, 4, 1, 0), (4.0, 4, 1, 1), (True, 4, 1, 1)],
)
def test_bad_sizes(args):
    with pytest.raises(ValueError, match="must be (>= 1|an integer)"):
        PagedKVCache(*args)


def test_bad_dtype():
    with pytest.raises(ValueError, match="torch.int32"):
        PagedKVCache(2, 2, 1, 1, dtype=torch.int32)


def test_gather_ignores_padding_entries():
    cache = PagedKVCache(3, 2, 1, 1)
    k, v = tokens(3, heads=1, dim=1, start=1)
    cache.write([4, 5, 0], k, v)
    got_k, _ = cache.gather([2, 0, -1, 99], 3)  # entries past the second block: never read
    assert got_k.flatten().tolist() == [1.0, 2.0, 3.0]
    assert cache.gather([2], 0)[0].shape == (0, 1, 1)


@settings(max_examples=25, deadline=None)
@given(
    block_size=st.integers(1, 5),
    lengths=st.lists(st.integers(0, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_many_sequences_written_interleaved_gather_back(block_size, lengths, seed):
    """Sequences share one pool in shuffled blocks; each gathers back exactly its tokens."""
    pages = [-(-n // block_size) for n in lengths]
    num_blocks = max(1, sum(pages))
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
    cache = PagedKVCache(num_blocks, block_size, 1, 2)
    tables, start, expected = [], 0, []
    for s, (n, p) in enumerate(zip(lengths, pages, strict=True)):
        table = FakeTable(perm[start : start + p], n, block_size)
        start += p
        k, v = tokens(n, heads=1, dim=2, start=100 * s)
        cache.write(table.slot_mapping(), k, v)
        tables.append(table)
        expected.append((k, v))
    for table, (k, v) in zip(tables, expected, strict=True):
        got_k, got_v = cache.gather(table.blocks, table.num_tokens)
        assert torch.equal(got_k, k) and torch.equal(got_v, v)


def test_triton_runs_where_the_backend_can_read_the_tensors() -> None:
    from pagedlab.attention import backend

    if backend.BACKEND == "interpreter":
        assert backend.runs_on(torch.device("cpu")) and not backend.runs_on(torch.device("cuda"))
    elif backend.BACKEND == "compiled":
        assert backend.runs_on(torch.device("cuda")) and not backend.runs_on(torch.device("cpu"))
    else:
        assert not backend.runs_on(torch.device("cpu"))


def test_pinned_memory_needs_a_cpu_cache_on_a_cuda_machine() -> None:
    if torch.cuda.is_available():
        cache = PagedKVCache(2, 4, 1, 8, device="cpu", pin_memory=True)
        assert cache.key.is_pinned() and cache.value.is_pinned()
    else:
        with pytest.raises(ValueError, match="pin_memory=True needs a CPU cache on a CUDA"):
            PagedKVCache(2, 4, 1, 8, device="cpu", pin_memory=True)
    with pytest.raises(TypeError, match="pin_memory must be True or False, got 1"):
        PagedKVCache(2, 4, 1, 8, device="cpu", pin_memory=1)  # type: ignore[arg-type]
