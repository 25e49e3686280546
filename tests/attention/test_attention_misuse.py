"""Misuse of every public data-plane function, table-driven: a clear error, nothing changed.

Each row is one bad call: wrong kinds (bools, floats, strings, numpy and torch scalars,
sparse, meta, quantized and integer tensors) must raise ``TypeError`` (``ArgumentTypeError``,
also a ``ValueError`` for the contract's sake); wrong values (negative, huge, NaN/inf, out of
range, duplicate) a ``ValueError`` that is *not* a ``TypeError``. Every message names the
argument and, for scalars, the value. After every bad call the cache's K/V bytes and every
input tensor's bytes are what they were. The last tests pin down what is *not* an error:
NaN stored in K/V (data), non-contiguous views, numpy and 0-d torch integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from pagedlab import (
    PagedKVCache,
    block_tables_tensor,
    paged_attention,
    paged_attention_steps,
    reference_attention,
)
from pagedlab.attention.batch import batch_slot_mapping
from pagedlab.attention.kernel_steps import steps_table
from pagedlab.attention.ops import paged_attention_one_page

KIND, VALUE = TypeError, ValueError
# Not an integer, whatever operator.index or torch.as_tensor would make of it.
NOT_INTS = [True, np.bool_(True), torch.tensor(True), 1.5, np.float64(2.0), torch.tensor(2.0)]
NOT_INTS += ["3", None, [1], 1 + 0j, math.nan]
HUGE = 2**70


@dataclass
class World:
    """A written cache and valid attention inputs over it (the example's layout, two sequences)."""

    cache: PagedKVCache
    k: torch.Tensor  # [3, 2, 3], three fresh tokens
    v: torch.Tensor
    attention: dict[str, torch.Tensor]

    def snapshot(self) -> list[bytes]:
        tensors = [self.cache.key, self.cache.value, self.k, self.v, *self.attention.values()]
        return [t.detach().contiguous().view(torch.uint8).numpy().tobytes() for t in tensors]


def world() -> World:
    gen = torch.Generator().manual_seed(0)
    cache = PagedKVCache(6, 4, 2, 3, device="cpu")
    cache.write(list(range(24)), *torch.randn(2, 24, 2, 3, generator=gen))
    k, v = torch.randn(2, 3, 2, 3, generator=gen)
    attention = {
        "query": torch.randn(2, 4, 3, generator=gen),
        "key_cache": cache.key.clone(),
        "value_cache": cache.value.clone(),
        "block_tables": torch.tensor([[4, 1], [0, -1]], dtype=torch.int32),
        "seq_lens": torch.tensor([5, 3], dtype=torch.int32),
    }
    return World(cache, k, v, attention)


Call = Callable[[World], object]
CASES: list[tuple[str, Call, type[Exception], tuple[str, ...]]] = []


def case(label: str, call: Call, kind: type[Exception], *words: str) -> None:
    CASES.append((label, call, kind, words))


def _int_cases(label: str, name: str, call: Callable[[World, object], object], bad_values):
    for x in NOT_INTS:
        case(f"{label} {x!r}", lambda w, x=x: call(w, x), KIND, name)
    for x in bad_values:
        case(f"{label} {x!r}", lambda w, x=x: call(w, x), VALUE, name, str(x))


# -- PagedKVCache(num_blocks, block_size, num_kv_heads, head_dim, dtype, device) -----------
SIZES = {"num_blocks": 6, "block_size": 4, "num_kv_heads": 2, "head_dim": 3}
for _name in SIZES:

    def _make(w: World, x: object, name: str = _name) -> object:
        return PagedKVCache(**{**SIZES, name: x})  # type: ignore[arg-type]

    _int_cases(f"cache {_name}", _name, _make, [0, -1, HUGE])
case("cache int32 block ids", lambda w: PagedKVCache(2**31, 1, 1, 1), VALUE, "num_blocks")
case("cache too big", lambda w: PagedKVCache(2**31 - 1, 2**20, 8, 128), VALUE, "GiB")
for _dtype in ["float32", torch.int32, torch.float64, torch.complex64, torch.bool, None]:
    case(
        f"cache dtype {_dtype}",
        lambda w, d=_dtype: PagedKVCache(2, 2, 1, 1, dtype=d),
        KIND,
        "dtype",
    )
for _device in ["banana", "meta", "cuda:7"] + ([] if torch.cuda.is_available() else ["cuda"]):
    case(
        f"cache device {_device}",
        lambda w, d=_device: PagedKVCache(2, 2, 1, 1, device=d),
        VALUE,
        _device,
    )
case("cache device int", lambda w: PagedKVCache(2, 2, 1, 1, device=3), KIND, "device")

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
    case(f"write slots {_slots!r}", lambda w, s=_slots: w.cache.write(s, w.k, w.v), _kind, "slot")
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

        case(f"write {_which} {_label}", _write, _kind, _which)

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
    case(
        f"gather blocks {_blocks!r}",
        lambda w, b=_blocks: w.cache.gather(b, 5),
        _kind,
        "blocks",
        _word,
    )
_int_cases("gather num_tokens", "num_tokens", lambda w, x: w.cache.gather([1, 2], x), [-1, 9, HUGE])
_int_cases("copy src", "src", lambda w, x: w.cache.copy_block(x, 0), [-1, 6, HUGE])
_int_cases("copy dst", "dst", lambda w, x: w.cache.copy_block(0, x), [-1, 6, HUGE])

# -- paged_attention / reference_attention ---------------------------------------------------
ATTENTION_TENSORS = ["query", "key_cache", "value_cache", "block_tables", "seq_lens"]
FLOAT_BAD = [torch.int32, torch.int64, torch.bool, torch.float64, torch.complex64]
INDEX_BAD = [torch.int64, torch.int16, torch.float32, torch.bool]
for _fn in (paged_attention, paged_attention_one_page, reference_attention):
    _f = _fn.__name__

    def _attend(w: World, fn=_fn, **change: object) -> object:
        return fn(**{**w.attention, **change})

    for _arg in ATTENTION_TENSORS:
        for _label, _bad, _kind in [
            ("list", lambda t: t.tolist(), KIND),
            ("numpy", lambda t: t.numpy(), KIND),
            ("sparse", lambda t: t.to_sparse(), KIND),
            ("meta", lambda t: t.to("meta"), VALUE),
        ]:
            case(
                f"{_f} {_arg} {_label}",
                lambda w, a=_arg, bad=_bad, at=_attend: at(w, **{a: bad(w.attention[a])}),
                _kind,
                _arg,
            )
        for _dtype in FLOAT_BAD if _arg in ("query", "key_cache", "value_cache") else INDEX_BAD:
            case(
                f"{_f} {_arg} {_dtype}",
                lambda w, a=_arg, d=_dtype, at=_attend: at(w, **{a: w.attention[a].to(d)}),
                KIND,
                "dtype",
            )
    for _scale in [True, np.bool_(True), "0.5", 1j, [0.5], torch.tensor([0.5, 0.5])]:
        case(
            f"{_f} scale {_scale!r}", lambda w, s=_scale, at=_attend: at(w, scale=s), KIND, "scale"
        )
    for _scale in [math.nan, math.inf, -math.inf, 0.0, -0.5, 1e39, 1e-40, torch.tensor(math.nan)]:
        case(
            f"{_f} scale {_scale!r}", lambda w, s=_scale, at=_attend: at(w, scale=s), VALUE, "scale"
        )
    case(
        f"{_f} used block -1",
        lambda w, at=_attend: at(
            w, block_tables=torch.tensor([[4, -1], [0, -1]], dtype=torch.int32)
        ),
        VALUE,
        "block_tables[0, 1] = -1",
    )
    case(
        f"{_f} seq_len huge",
        lambda w, at=_attend: at(w, seq_lens=torch.tensor([5, 2**31 - 1], dtype=torch.int32)),
        VALUE,
        "seq_lens[1] = 2147483647",
    )
_BIG = 2**21  # head_dim: one page's tile is beyond the largest Triton tensor
case(
    "paged_attention tile too big",
    lambda w: paged_attention(
        torch.ones(1, 1, _BIG),
        torch.zeros(1, 1, 1, _BIG),
        torch.zeros(1, 1, 1, _BIG),
        torch.zeros(1, 1, dtype=torch.int32),
        torch.ones(1, dtype=torch.int32),
    ),
    VALUE,
    "head_dim 2097152",
    "reference_attention",
)
case(
    "paged_attention_one_page head_dim 3",  # the world's head_dim: the teaching kernel needs 2**k
    lambda w: paged_attention_one_page(**w.attention),
    VALUE,
    "head_dim 3 is not a power of two",
    "paged_attention",
)
_HUGE_CACHE = torch.zeros(1, 1, 1, 1).expand(2**16, 16, 1, 2**12)  # 2**32 elements, no memory
case(
    "paged_attention_one_page int32 offsets",
    lambda w: paged_attention_one_page(
        torch.ones(1, 1, 2**12),
        _HUGE_CACHE,
        _HUGE_CACHE,
        torch.zeros(1, 1, dtype=torch.int32),
        torch.ones(1, dtype=torch.int32),
    ),
    VALUE,
    "4294967296 elements",
    "int32",
)

# -- block_tables_tensor(tables, pad, device) ----------------------------------------------
for _tables, _kind, _word in [
    (torch.tensor([[1, 2]]), KIND, "Tensor"),
    ("12", KIND, "str"),
    (None, KIND, "NoneType"),
    ([[1.7, 2]], KIND, "1.7"),
    ([[True]], KIND, "True"),
    ([np.array([1.5])], KIND, "float64"),
    ([[2**40]], VALUE, str(2**40)),
    ([[1, [2]]], VALUE, "1-D"),
    ([], VALUE, "[]"),
]:
    case(
        f"block_tables_tensor {_tables!r}",
        lambda w, t=_tables: block_tables_tensor(t),
        _kind,
        "tables",
        _word,
    )
_int_cases(
    "block_tables_tensor pad", "pad", lambda w, x: block_tables_tensor([[1]], pad=x), [2**40]
)
case(
    "block_tables_tensor device",
    lambda w: block_tables_tensor([[1]], device="banana"),
    VALUE,
    "banana",
)


# -- paged_attention_steps(query, key_cache, value_cache, row, seq_len, head, scale) -------
def _steps(w: World, **change: object) -> object:
    args = {
        "query": w.attention["query"][0],
        "key_cache": w.cache.key,
        "value_cache": w.cache.value,
        "block_table_row": [4, 1],
        "seq_len": 5,
        **change,
    }
    return paged_attention_steps(**args)  # type: ignore[arg-type]


case("steps query numpy", lambda w: _steps(w, query=w.attention["query"][0].numpy()), KIND, "query")
case(
    "steps query sparse",
    lambda w: _steps(w, query=w.attention["query"][0].to_sparse()),
    KIND,
    "query",
)
case(
    "steps row floats",
    lambda w: _steps(w, block_table_row=[4.7, 1.2]),
    KIND,
    "block_table_row",
    "4.7",
)
case(
    "steps row bools",
    lambda w: _steps(w, block_table_row=[True, 1]),
    KIND,
    "block_table_row",
    "True",
)
case("steps row huge", lambda w: _steps(w, block_table_row=[4, 2**40]), VALUE, "block_table_row")
_int_cases("steps seq_len", "seq_len", lambda w, x: _steps(w, seq_len=x), [0, -1, 9, HUGE])
_int_cases("steps head", "head", lambda w, x: _steps(w, head=x), [-1, 4, HUGE])
case("steps scale", lambda w: _steps(w, scale=1e39), VALUE, "scale")
case("steps_table str", lambda w: steps_table("steps"), KIND, "steps")
case("steps_table empty", lambda w: steps_table([]), VALUE, "steps")
case("steps_table ints", lambda w: steps_table([1, 2]), KIND, "steps[0]")
_int_cases("steps_table decimals", "decimals", lambda w, x: steps_table(_steps(w), x), [-1, 99])


# -- batch_slot_mapping(block_tables, seq_lens, block_size) --------------------------------
def _slots(w: World, **change: object) -> object:
    args = {k: w.attention[k] for k in ("block_tables", "seq_lens")}
    return batch_slot_mapping(**{**args, "block_size": 4, **change})  # type: ignore[arg-type]


case(
    "batch_slot_mapping tables float",
    lambda w: _slots(w, block_tables=w.attention["block_tables"].float()),
    KIND,
    "block_tables",
)
case("batch_slot_mapping lens list", lambda w: _slots(w, seq_lens=[5, 3]), KIND, "seq_lens")
case(
    "batch_slot_mapping lens 0",
    lambda w: _slots(w, seq_lens=torch.tensor([5, 0], dtype=torch.int32)),
    VALUE,
    "seq_lens[1] = 0",
)
case(
    "batch_slot_mapping used -1",
    lambda w: _slots(w, seq_lens=torch.tensor([5, 5], dtype=torch.int32)),
    VALUE,
    "block_tables[1, 1] = -1",
)
_int_cases(
    "batch_slot_mapping block_size", "block_size", lambda w, x: _slots(w, block_size=x), [0, -4]
)


IDS = [f"{i:03d} " + " ".join(c[0].split())[:70] for i, c in enumerate(CASES)]


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor")  # torch deprecates qint8 tensors
@pytest.mark.parametrize(("label", "call", "kind", "words"), CASES, ids=IDS)
def test_bad_call_raises_a_clear_error_and_changes_nothing(label, call, kind, words):
    w = world()
    before = w.snapshot()
    with pytest.raises(kind) as raised:
        call(w)
    error = raised.value
    if kind is VALUE:
        assert not isinstance(error, TypeError), f"a wrong value, reported as a wrong kind: {error}"
    assert type(error).__module__.startswith(("pagedlab", "builtins")), repr(error)
    for word in words:
        assert word in str(error), f"{word!r} not named in: {error}"
    assert w.snapshot() == before, "a call that raised changed the cache or its inputs"


def test_every_public_attention_function_has_bad_value_rows():
    """The table covers each public data-plane entry point (add a row for a new one)."""
    labels = " ".join(c[0] for c in CASES)
    for name in (
        "cache ",
        "write ",
        "gather ",
        "copy ",
        "paged_attention ",
        "paged_attention_one_page ",
        "reference_attention ",
        "block_tables_tensor ",
        "steps ",
        "steps_table ",
        "batch_slot_mapping ",
    ):
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


@pytest.mark.parametrize("fn", [paged_attention, reference_attention])
def test_nan_in_kv_is_data(fn):
    """NaN in a used slot makes that sequence's output NaN; in a slot nobody owns, nothing."""
    w = world()
    args = dict(w.attention)
    clean = fn(**args)
    args["value_cache"] = args["value_cache"].clone()
    args["value_cache"][1, 3] = math.nan  # block 1, offset 3: past sequence 0's 5 positions
    args["value_cache"][5] = math.nan  # a block no sequence owns
    torch.testing.assert_close(fn(**args), clean)
    args["key_cache"] = args["key_cache"].clone()
    args["key_cache"][0, 0] = math.nan  # sequence 1's first position
    out = fn(**args)
    assert out[1].isnan().all() and not out[0].isnan().any()


@pytest.mark.parametrize("fn", [paged_attention, reference_attention])
def test_scale_takes_numpy_and_torch_numbers(fn):
    w = world()
    expected = fn(**w.attention, scale=0.5)
    for scale in (np.float32(0.5), np.float64(0.5), torch.tensor(0.5), torch.tensor(0.5).half()):
        torch.testing.assert_close(fn(**w.attention, scale=scale), expected)
