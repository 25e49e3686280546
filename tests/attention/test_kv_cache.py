"""PagedKVCache: write by slot mapping, gather in logical order, copy a block; bad input
changes nothing. The Triton write path is checked against plain torch indexing.

Bad calls (the table at the end, checked by ``tests.attention.bad_calls.refused``): a wrong kind
is a ``TypeError`` naming the argument, a wrong value a ``ValueError`` (not a ``TypeError``)
naming the argument and the value, and the cache's bytes and its inputs' bytes are unchanged.
Numpy and 0-d torch integers, strided views and tensors that need grad are not errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import block_tables_tensor, paged_attention, reference_attention
from tests.attention.bad_calls import HUGE, KIND, VALUE, BadCalls, World, refused, world


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


# -- bad calls: PagedKVCache(num_blocks, block_size, num_kv_heads, head_dim, dtype, device) ---
BAD = BadCalls()
SIZES = {"num_blocks": 6, "block_size": 4, "num_kv_heads": 2, "head_dim": 3}
for _name in SIZES:

    def _make(w: World, x: object, name: str = _name) -> object:
        return PagedKVCache(**{**SIZES, name: x})  # type: ignore[arg-type]

    BAD.ints(f"cache {_name}", _name, _make, [0, -1], value_says="{name} must be >= 1, got {x}")
    BAD.ints(f"cache {_name}", _name, _make, [HUGE], kinds=False)
BAD.case("cache int32 block ids", lambda w: PagedKVCache(2**31, 1, 1, 1), VALUE, "num_blocks")
BAD.case("cache too big", lambda w: PagedKVCache(2**31 - 1, 2**20, 8, 128), VALUE, "GiB")
for _dtype in ["float32", torch.int32, torch.float64, torch.complex64, torch.bool, None]:
    BAD.case(
        f"cache dtype {_dtype}",
        lambda w, d=_dtype: PagedKVCache(2, 2, 1, 1, dtype=d),
        KIND,
        "dtype",
        str(_dtype),
    )
for _device in ["banana", "meta", "cuda:7"] + ([] if torch.cuda.is_available() else ["cuda"]):
    BAD.case(
        f"cache device {_device}",
        lambda w, d=_device: PagedKVCache(2, 2, 1, 1, device=d),
        VALUE,
        _device,
    )
BAD.case("cache device int", lambda w: PagedKVCache(2, 2, 1, 1, device=3), KIND, "device")

# -- write(slot_mapping, k, v) --------------------------------------------------------------
for _slots, _kind in [
    ([1.5, 2, 3], KIND),
    ([True, 2, 3], KIND),
    ([1, True, 3], KIND),
    ([np.bool_(False), 2, 3], KIND),
    ([torch.tensor(1.0), 2, 3], KIND),
    (torch.tensor([1.0, 2.0, 3.0]), KIND),
    (torch.tensor([True, False, True]), KIND),
    (np.array([1.5, 2.5, 3.5]), KIND),
    ("123", KIND),
    ({1, 2, 3}, KIND),
    (7, KIND),
    (None, KIND),
    (torch.tensor([1, 2, 3]).to_sparse(), KIND),
    ([-1, 2, 3], VALUE),
    ([1, 2, 24], VALUE),
    ([1, 2, HUGE], VALUE),
    ([3, 3, 4], VALUE),
    ([[1], [2], [3]], VALUE),
    (torch.tensor([[1, 2, 3]]), VALUE),
    (torch.tensor([1, 2, 24]), VALUE),
    (torch.tensor([1, 2, 3], device="meta"), VALUE),
]:
    BAD.case(
        f"write slots {_slots!r}", lambda w, s=_slots: w.cache.write(s, w.k, w.v), _kind, "slot"
    )
for _label, _make_k, _kind in [
    ("list", lambda k: k.tolist(), KIND),
    ("numpy", lambda k: k.numpy(), KIND),
    ("sparse", lambda k: k.to_sparse(), KIND),
    ("float16", lambda k: k.half(), KIND),
    ("float64", lambda k: k.double(), KIND),
    ("int32", lambda k: k.int(), KIND),
    ("complex", lambda k: k.cfloat(), KIND),
    ("quantized", lambda k: torch.quantize_per_tensor(k, 0.1, 0, torch.qint8), KIND),
    ("meta", lambda k: k.to("meta"), VALUE),
    ("shape", lambda k: k[:, :1], VALUE),
    ("count", lambda k: k[:2], VALUE),
]:
    for _which in ("k", "v"):

        def _write(w: World, make=_make_k, which=_which) -> None:
            k, v = (make(w.k), w.v) if which == "k" else (w.k, make(w.v))
            w.cache.write([1, 2, 3], k, v)

        BAD.case(f"write {_which} {_label}", _write, _kind, _which)
for _label, _call, _kind, _words in [
    ("slot 24", lambda c, k, v: c.write([0, 24], k[:2], v[:2]), VALUE, ["slot_mapping[1] = 24"]),
    ("slot negative", lambda c, k, v: c.write([-1], k[:1], v[:1]), VALUE, ["slot_mapping[0] = -1"]),
    ("slot twice", lambda c, k, v: c.write([3, 3], k[:2], v[:2]), VALUE, ["slot 3 more than once"]),
    ("float slots", lambda c, k, v: c.write(torch.tensor([1.0]), k[:1], v[:1]), KIND, ["integers"]),
    ("2-D slots", lambda c, k, v: c.write([[1]], k[:1], v[:1]), VALUE, ["1-D"]),
    ("k 3", lambda c, k, v: c.write([1, 2], k[:3], v[:2]), VALUE, ["k must be", "got [3, 2, 3]"]),
    ("v heads", lambda c, k, v: c.write([1], k[:1], v[:1, :1]), VALUE, ["v must be"]),
    ("k dtype", lambda c, k, v: c.write([1], k[:1].half(), v[:1]), KIND, ["k dtype torch.float16"]),
    ("k list", lambda c, k, v: c.write([1], [[0.0]], v[:1]), KIND, ["k must be a torch.Tensor"]),
    ("gather capacity", lambda c, k, v: c.gather([0], 5), VALUE, ["num_tokens = 5 exceeds"]),
    ("gather block", lambda c, k, v: c.gather([0, 9], 5), VALUE, ["blocks[1] = 9"]),
    ("gather negative", lambda c, k, v: c.gather([0], -1), VALUE, ["num_tokens must be"]),
]:  # fmt: skip
    BAD.case(_label, lambda w, call=_call: call(w.cache, w.k, w.v), _kind, *_words)

# -- gather(blocks, num_tokens), copy_block(src, dst) ---------------------------------------
for _blocks, _kind, _word in [
    ([1.7, 2.2], KIND, "1.7"),
    ([True, False], KIND, "True"),
    ([np.float32(1.0), 2], KIND, "blocks[0]"),
    (torch.tensor([1.0, 2.0]), KIND, "float32"),
    (torch.tensor([True, False]), KIND, "bool"),
    (np.array([1.5, 2.5]), KIND, "float64"),
    ("12", KIND, "'12'"),
    (3, KIND, "3"),
    ([9, 1], VALUE, "9"),
    ([-1, 1], VALUE, "-1"),
    ([HUGE, 1], VALUE, str(HUGE)),
    ([[1, 2]], VALUE, "1-D"),
]:
    BAD.case(
        f"gather blocks {_blocks!r}",
        lambda w, b=_blocks: w.cache.gather(b, 5),
        _kind,
        "blocks",
        _word,
    )
BAD.ints("gather num_tokens", "num_tokens", lambda w, x: w.cache.gather([1, 2], x), [-1, 9, HUGE])
BAD.ints(
    "copy src", "src", lambda w, x: w.cache.copy_block(x, 0), [-1, 6, HUGE], value_says="src = {x}"
)
BAD.ints(
    "copy dst", "dst", lambda w, x: w.cache.copy_block(0, x), [-1, 6, HUGE], value_says="dst = {x}"
)


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor")  # torch deprecates qint8 tensors
@pytest.mark.parametrize("bad", BAD, ids=BAD.ids())
def test_bad_call_raises_a_clear_error_and_changes_nothing(bad):
    refused(bad)


def test_every_public_cache_method_has_bad_call_rows():
    """The table covers the constructor and each public method (add rows for a new one)."""
    labels = BAD.labels()
    for name in ("cache ", "write ", "gather ", "copy "):
        assert name in labels


# -- what is not an error -------------------------------------------------------------------
def test_gather_takes_numpy_and_torch_integers():
    w = world()
    expected = w.cache.gather([4, 1], 5)
    for blocks, n in [
        (np.array([4, 1]), np.int64(5)),
        (torch.tensor([4, 1], dtype=torch.int32), torch.tensor(5)),
        ((np.int32(4), torch.tensor(1)), 5),
    ]:
        got = w.cache.gather(blocks, n)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_write_reads_views_and_drops_autograd():
    w = world()
    reference = world()
    source = w.cache.key[0, :3].clone(), w.cache.value[0, :3].clone()  # slots 0..2's K/V
    w.cache.write([1, 2, 0], w.cache.key[0, :3], w.cache.value[0, :3])  # a view of the cache
    reference.cache.write([1, 2, 0], *source)
    assert torch.equal(w.cache.key, reference.cache.key)
    k = w.k.transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()  # strided, grad
    assert not k.is_contiguous()
    w.cache.write([5, 6, 7], k, w.v)
    assert not w.cache.key.requires_grad and w.cache.key.grad_fn is None
    assert torch.equal(w.cache.gather([1, 1], 8)[0][5:], w.k)


def test_cache_shape_cannot_be_replaced():
    w = world()
    for name in ("key", "value", "num_blocks", "block_size", "dtype", "device"):
        with pytest.raises(AttributeError):
            setattr(w.cache, name, None)
