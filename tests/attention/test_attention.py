"""paged_attention and reference_attention: the example, layout independence,
the reference against dense softmax attention, and every contract violation.

Bad calls of every ops entry point (``paged_attention``, the one-page teaching kernel,
``reference_attention``, ``block_tables_tensor``) are a table checked by
``tests.attention.bad_calls.refused``: a wrong kind is a ``TypeError``, a wrong value a
``ValueError``, each naming the argument, and no input's bytes change. NaN stored in K/V is
data, not an error, and numpy and torch numbers are valid scales.

Runs on the CPU in Triton's interpreter (pagedlab.attention.backend decides it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.attention import backend
from pagedlab.attention import ops as attention
from pagedlab.attention.ops import (
    block_tables_tensor,
    paged_attention,
    paged_attention_one_page,
    reference_attention,
    validate_paged_inputs,
)
from tests.attention.bad_calls import KIND, VALUE, BadCalls, World, refused, world
from tests.refuses import refuses

BOTH = [paged_attention, reference_attention]


def example_inputs(
    length: int, blocks: list[int], num_blocks: int = 6, block_size: int = 4
) -> tuple[torch.Tensor, ...]:
    """The example's scalar head (ARCHITECTURE.md): keys 0, query 1, value of position p: p + 1."""
    key_cache = torch.zeros(num_blocks, block_size, 1, 1)
    value_cache = torch.zeros(num_blocks, block_size, 1, 1)
    for pos in range(length):
        value_cache[blocks[pos // block_size], pos % block_size, 0, 0] = pos + 1
    query = torch.ones(1, 1, 1)
    tables = torch.tensor([blocks], dtype=torch.int32)
    lens = torch.tensor([length], dtype=torch.int32)
    return query, key_cache, value_cache, tables, lens


@pytest.mark.parametrize("blocks", [[4, 1], [0, 1], [1, 4], [5, 3]])
@pytest.mark.parametrize("fn", BOTH)
def test_example_is_exactly_three(fn, blocks):
    out = fn(*example_inputs(5, blocks))
    assert out.shape == (1, 1, 1) and out.dtype == torch.float32
    assert out.item() == 3.0


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 7, 8, 9, 12])
def test_example_mean_of_values(length):
    pages = -(-length // 4)
    blocks = [5, 2, 0][:pages] + [-1] * (3 - pages)  # padding past the last page
    inputs = example_inputs(length, blocks)
    assert paged_attention(*inputs).item() == (length + 1) / 2  # exact: equal weights
    assert reference_attention(*inputs).item() == pytest.approx((length + 1) / 2, rel=1e-6)


def random_paged(
    seq_lens: list[int],
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 8,
    block_size: int = 4,
    spare_blocks: int = 3,
    dtype: torch.dtype = torch.float32,
    pad: int = -1,
    seed: int = 0,
) -> tuple[torch.Tensor, ...]:
    """Random q/K/V; each sequence's pages at randomly permuted physical blocks."""
    gen = torch.Generator().manual_seed(seed)
    pages = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(pages) + spare_blocks
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables, start = [], 0
    for p in pages:
        tables.append(perm[start : start + p])
        start += p
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    key_cache = torch.randn(shape, generator=gen).to(dtype)
    value_cache = torch.randn(shape, generator=gen).to(dtype)
    query = torch.randn(len(seq_lens), num_heads, head_dim, generator=gen).to(dtype)
    return (
        query,
        key_cache,
        value_cache,
        block_tables_tensor(tables, pad=pad),
        torch.tensor(seq_lens, dtype=torch.int32),
    )


def dense_attention(q, k, v, scale):
    """Plain softmax attention for one sequence: q [H, D], k/v [T, KVH, D]."""
    group = q.shape[0] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    weights = torch.softmax(torch.einsum("hd,thd->ht", q, k) * scale, dim=-1)
    return torch.einsum("ht,thd->hd", weights, v)


def test_reference_matches_dense_softmax_and_sdpa():
    lens = [1, 5, 9, 16]
    q, kc, vc, bt, sl = random_paged(lens, num_heads=6, num_kv_heads=3, head_dim=12, seed=1)
    ref = reference_attention(q, kc, vc, bt, sl)
    for s, n in enumerate(lens):
        pages = bt[s, : -(-n // 4)].long()
        k = kc[pages].flatten(0, 1)[:n]
        v = vc[pages].flatten(0, 1)[:n]
        by_hand = dense_attention(q[s].double(), k.double(), v.double(), 12**-0.5)
        torch.testing.assert_close(ref[s].double(), by_hand, rtol=1e-5, atol=1e-6)
        # torch's own kernel, on the contiguous (dense) layout: [1, heads, positions, dim]
        kk = k.repeat_interleave(2, dim=1).transpose(0, 1)[None]
        vv = v.repeat_interleave(2, dim=1).transpose(0, 1)[None]
        sdpa = F.scaled_dot_product_attention(q[s][None, :, None, :], kk, vv)[0, :, 0]
        torch.testing.assert_close(ref[s], sdpa, rtol=1e-5, atol=1e-5)


def test_custom_scale():
    q, kc, vc, bt, sl = random_paged([3, 6], seed=2)
    ref = reference_attention(q, kc, vc, bt, sl, scale=0.25)
    torch.testing.assert_close(paged_attention(q, kc, vc, bt, sl, scale=0.25), ref)
    assert not torch.allclose(reference_attention(q, kc, vc, bt, sl), ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_moving_every_block_changes_nothing(seed):
    """Relocate every physical block and rewrite the tables: same output, bit for bit."""
    q, kc, vc, bt, sl = random_paged([3, 8, 13], block_size=4, seed=seed)
    before = paged_attention(q, kc, vc, bt, sl)
    move = torch.randperm(kc.shape[0], generator=torch.Generator().manual_seed(seed + 10))
    new_kc, new_vc = torch.empty_like(kc), torch.empty_like(vc)
    new_kc[move], new_vc[move] = kc, vc  # old block b now lives at move[b]
    new_bt = torch.where(bt >= 0, move[bt.clamp(min=0).long()].int(), bt)
    assert not torch.equal(new_bt, bt)
    assert torch.equal(paged_attention(q, new_kc, new_vc, new_bt, sl), before)
    torch.testing.assert_close(
        reference_attention(q, new_kc, new_vc, new_bt, sl), reference_attention(q, kc, vc, bt, sl)
    )


@pytest.mark.parametrize("pad", [-1, 0, 10**9, -(2**31)])
def test_padding_is_never_read(pad):
    q, kc, vc, bt, sl = random_paged([2, 9], block_size=4, pad=pad, seed=3)
    assert bt[0, 1].item() == pad  # sequence 0 uses one page; the rest is padding
    torch.testing.assert_close(
        paged_attention(q, kc, vc, bt, sl), reference_attention(q, kc, vc, bt, sl)
    )


def test_float16_and_bfloat16_follow_the_reference():
    for dtype, tol in ((torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)):
        q, kc, vc, bt, sl = random_paged([4, 11], dtype=dtype, seed=4)
        out = paged_attention(q, kc, vc, bt, sl)
        assert out.dtype == dtype
        torch.testing.assert_close(
            out.float(), reference_attention(q, kc, vc, bt, sl).float(), rtol=tol, atol=tol
        )


def test_no_sequences_gives_an_empty_output():
    q, kc, vc, _, _ = random_paged([4])
    empty = (q[:0], kc, vc, torch.zeros(0, 2, dtype=torch.int32), torch.zeros(0, dtype=torch.int32))
    for fn in BOTH:
        assert fn(*empty).shape == (0, 4, 8)


# -- contract violations -------------------------------------------------------------------


def good() -> dict:
    q, kc, vc, bt, sl = random_paged([5, 3], num_heads=4, num_kv_heads=2, block_size=4, seed=5)
    return dict(query=q, key_cache=kc, value_cache=vc, block_tables=bt, seq_lens=sl)


def _bad_table_entry():
    d = good()
    d["block_tables"] = d["block_tables"].clone()
    d["block_tables"][0, 1] = 99
    return d


def _negative_used_entry():
    d = good()
    d["block_tables"] = d["block_tables"].clone()
    d["block_tables"][1, 0] = -1
    return d


BAD_INPUTS = {
    "query 2-D": (lambda d: {**d, "query": d["query"][0]}, r"query must be .*\(4, 8\)"),
    "cache 3-D": (lambda d: {**d, "key_cache": d["key_cache"][0]}, "key_cache must be"),
    "value shape": (lambda d: {**d, "value_cache": d["value_cache"][:, :2]}, "value_cache shape"),
    "cache dtype": (lambda d: {**d, "key_cache": d["key_cache"].half()}, "key_cache dtype"),
    "head_dim": (lambda d: {**d, "query": d["query"][..., :6]}, "head_dim 8 != query head_dim 6"),
    "gqa": (
        lambda d: {**d, "query": torch.randn(2, 3, 8)},
        r"num_heads \(3\) must be a multiple of num_kv_heads \(2\)",
    ),
    "tables rows": (lambda d: {**d, "block_tables": d["block_tables"][:1]}, "block_tables must"),
    "lens count": (
        lambda d: {**d, "seq_lens": torch.tensor([5, 3, 1], dtype=torch.int32)},
        "seq_lens must be",
    ),
    "seq_len 0": (
        lambda d: {**d, "seq_lens": torch.tensor([5, 0], dtype=torch.int32)},
        r"seq_lens\[1\] = 0 must be >= 1",
    ),
    "seq_len over capacity": (
        lambda d: {**d, "seq_lens": torch.tensor([5, 9], dtype=torch.int32)},
        r"seq_lens\[1\] = 9 exceeds the table's capacity",
    ),
    "block id too big": (lambda d: _bad_table_entry(), r"block_tables\[0, 1\] = 99"),
    "block id negative": (lambda d: _negative_used_entry(), r"block_tables\[1, 0\] = -1"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("fn", BOTH)
def test_bad_input_raises_value_error_naming_it(fn, case, monkeypatch):
    def kernel_must_not_run(*args, **kwargs):
        raise AssertionError("the kernel ran on invalid input")

    if fn is paged_attention:
        from pagedlab.attention import launch as kernels

        monkeypatch.setattr(kernels, "launch_paged_attention", kernel_must_not_run)
    make, message = BAD_INPUTS[case]
    args = make(good())
    inputs = lambda: [v.tolist() for v in args.values() if isinstance(v, torch.Tensor)]  # noqa: E731
    refuses(lambda: fn(**args), match=message, state=inputs)


def test_validation_reports_sizes():
    shapes = validate_paged_inputs(**good())
    assert (shapes.num_seqs, shapes.num_heads, shapes.num_kv_heads) == (2, 4, 2)
    assert (shapes.head_dim, shapes.block_size, shapes.max_pages) == (8, 4, 2)
    assert shapes.scale == 8**-0.5


def test_validation_is_vectorised_on_a_big_table():
    """10,000 sequences x 512 table entries: no per-element Python work (runs at once)."""
    num_seqs, width, block_size = 10_000, 512, 16
    tables = torch.randint(0, 4096, (num_seqs, width), dtype=torch.int32)
    lens = torch.randint(1, width * block_size, (num_seqs,), dtype=torch.int32)
    shapes = validate_paged_inputs(
        torch.zeros(num_seqs, 8, 4),
        torch.zeros(4096, block_size, 2, 4),
        torch.zeros(4096, block_size, 2, 4),
        tables,
        lens,
    )
    assert shapes.max_pages == int(((lens + 15) // 16).max())


def test_block_tables_tensor_pads():
    t = block_tables_tensor([[4, 1], [0]], pad=-1)
    assert t.dtype == torch.int32 and t.tolist() == [[4, 1], [0, -1]]
    with pytest.raises(ValueError, match="tables"):
        block_tables_tensor([])


def test_unavailable_backend_points_to_the_reference(monkeypatch):
    monkeypatch.setattr(backend, "BACKEND", "unavailable")
    monkeypatch.setattr(backend, "REASON", "the triton package is not installed")
    with pytest.raises(RuntimeError, match="reference_attention"):
        paged_attention(**good())
    assert reference_attention(**good()).shape == (2, 4, 8)
    assert "unavailable" in backend.describe()


def test_attention_module_never_imports_triton_at_import_time():
    assert "triton" not in attention.__dict__


@settings(max_examples=20, deadline=None)
@given(
    lens=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    block_size=st.integers(1, 5),
    heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]),
    head_dim=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_kernel_equals_reference_for_any_layout(lens, block_size, heads, head_dim, seed):
    """Invariant: for any shapes and any placement of pages, kernel == reference."""
    q, kc, vc, bt, sl = random_paged(
        lens, heads[0], heads[1], head_dim, block_size, spare_blocks=2, seed=seed
    )
    torch.testing.assert_close(
        paged_attention(q, kc, vc, bt, sl), reference_attention(q, kc, vc, bt, sl)
    )


def test_strided_views_are_read_through_their_strides():
    """vLLM-style combined cache kv[0]/kv[1], a head_dim slice and a transposed query."""
    gen = torch.Generator().manual_seed(11)
    kv = torch.randn(2, 7, 4, 2, 11, generator=gen)[..., :8]  # not contiguous in head_dim
    query = torch.randn(4, 3, 8, generator=gen).transpose(0, 1)  # [3 seqs, 4 heads, 8]
    tables = block_tables_tensor([[6, 0], [3], [1, 5, 2]])
    lens = torch.tensor([7, 2, 12], dtype=torch.int32)
    args = (query, kv[0], kv[1], tables, lens)
    assert not kv[0].is_contiguous() and not query.is_contiguous()
    dense = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
    torch.testing.assert_close(paged_attention(*args), reference_attention(*dense))


# -- bad calls: paged_attention / paged_attention_one_page / reference_attention -------------
BAD = BadCalls()
ATTENTION_TENSORS = ["query", "key_cache", "value_cache", "block_tables", "seq_lens"]
FLOAT_BAD = [torch.int32, torch.int64, torch.bool, torch.float64, torch.complex64]
INDEX_BAD = [torch.int64, torch.int16, torch.float32, torch.bool]
for _fn in (paged_attention, paged_attention_one_page, reference_attention):
    _f = _fn.__name__

    def _attend(w: World, fn=_fn, **change: object) -> object:
        return fn(**{**w.attention, **change})

    for _arg in ATTENTION_TENSORS:
        for _label, _bad, _kind, _says in [
            ("list", lambda t: t.tolist(), KIND, "must be a torch.Tensor"),
            ("numpy", lambda t: t.numpy(), KIND, "must be a torch.Tensor"),
            ("sparse", lambda t: t.to_sparse(), KIND, ""),
            ("meta", lambda t: t.to("meta"), VALUE, "is on the meta device"),
        ]:
            BAD.case(
                f"{_f} {_arg} {_label}",
                lambda w, a=_arg, bad=_bad, at=_attend: at(w, **{a: bad(w.attention[a])}),
                _kind,
                f"{_arg} {_says}".strip(),
            )
        for _dtype in FLOAT_BAD if _arg in ("query", "key_cache", "value_cache") else INDEX_BAD:
            BAD.case(
                f"{_f} {_arg} {_dtype}",
                lambda w, a=_arg, d=_dtype, at=_attend: at(w, **{a: w.attention[a].to(d)}),
                KIND,
                f"{_arg} dtype",
                str(_dtype),
            )
    for _scale in [True, np.bool_(True), "0.5", 1j, [0.5], torch.tensor([0.5, 0.5])]:
        _says = "scale must be a real number" if _scale == "0.5" else "scale"
        BAD.case(
            f"{_f} scale {_scale!r}", lambda w, s=_scale, at=_attend: at(w, scale=s), KIND, _says
        )
    for _scale in [math.nan, math.inf, -math.inf, 0.0, -0.5, 1e39, 1e-40, torch.tensor(math.nan)]:
        _says = "scale must be finite" if _scale is math.nan else "scale"
        BAD.case(
            f"{_f} scale {_scale!r}", lambda w, s=_scale, at=_attend: at(w, scale=s), VALUE, _says
        )
    BAD.case(
        f"{_f} used block -1",
        lambda w, at=_attend: at(
            w, block_tables=torch.tensor([[4, -1], [0, -1]], dtype=torch.int32)
        ),
        VALUE,
        "block_tables[0, 1] = -1",
    )
    BAD.case(
        f"{_f} seq_len huge",
        lambda w, at=_attend: at(w, seq_lens=torch.tensor([5, 2**31 - 1], dtype=torch.int32)),
        VALUE,
        "seq_lens[1] = 2147483647",
    )
_BIG = 2**21  # head_dim: one page's tile is beyond the largest Triton tensor
BAD.case(
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
BAD.case(
    "paged_attention_one_page head_dim 3",  # the world's head_dim: the teaching kernel needs 2**k
    lambda w: paged_attention_one_page(**w.attention),
    VALUE,
    "head_dim 3 is not a power of two",
    "paged_attention",
)
_HUGE_CACHE = torch.zeros(1, 1, 1, 1).expand(2**16, 16, 1, 2**12)  # 2**32 elements, no memory
BAD.case(
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
    BAD.case(
        f"block_tables_tensor {_tables!r}",
        lambda w, t=_tables: block_tables_tensor(t),
        _kind,
        "tables",
        _word,
    )
BAD.ints("block_tables_tensor pad", "pad", lambda w, x: block_tables_tensor([[1]], pad=x), [2**40])
BAD.case(
    "block_tables_tensor device",
    lambda w: block_tables_tensor([[1]], device="banana"),
    VALUE,
    "banana",
)


def _kernel_must_not_run(*args, **kwargs):
    raise AssertionError("a kernel ran on invalid input")


@pytest.mark.parametrize("bad", BAD, ids=BAD.ids())
def test_bad_call_raises_a_clear_error_and_changes_nothing(bad, monkeypatch):
    """... and no kernel is launched: the checks come first."""
    from pagedlab.attention import launch as kernels

    for launch in ("launch_paged_attention", "launch_paged_attention_one_page"):
        monkeypatch.setattr(kernels, launch, _kernel_must_not_run)
    refused(bad)


def test_every_public_ops_function_has_bad_call_rows():
    """The table covers each public entry point of ops (add rows for a new one)."""
    labels = BAD.labels()
    for name in (
        "paged_attention ",
        "paged_attention_one_page ",
        "reference_attention ",
        "block_tables_tensor ",
    ):
        assert name in labels


# -- what is not an error -------------------------------------------------------------------
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
