"""The Triton kernels against plain torch over a covering grid of shapes, and the backend.

The grid. Axes: number of sequences 1-5; (heads, kv heads) (1,1) (4,1) (4,2) (8,8) (6,3);
head_dim 1 8 12 16 64; every block size 1-16; dtype fp32 / fp16; padding 0 / -1;
loop width (pages folded per step) default / 1; splits of each sequence's pages across
programs (flash-decoding) 1 / 2 / 3. The full product is 96,000 launches, far
too slow for the interpreter, so we take a seeded covering set instead: ``CASES`` cases
where case ``i`` takes value ``i mod len(axis)`` of each axis after that axis has been
shuffled once with ``random.Random(2023)``. With ``CASES >= 16`` every value of every axis
appears; the shuffles vary which values meet. Inside every case, sequence 0's length is a
multiple of the block size and the others are random lengths that mostly are not, and
each sequence's pages sit at randomly permuted physical blocks with spare blocks around,
and every slot no sequence owns (spare blocks, the empty tail of each last block) holds NaN:
a kernel that reads one unmasked returns NaN. fp32 must match to 1e-5, fp16 to 2e-3 (the
reference also rounds its output to fp16).

Both decode kernels run on the grid: the tuned one (``paged_attention``, or its launcher for
the loop-width and split axes) and the teaching one (``paged_attention_one_page``, one page
per step; those axes do not apply to it). In the interpreter, splits 1 runs the tuned loop
as ``paged_attention_lanes_kernel`` (every (sequence, kv head) pair in one program), splits
2 / 3 as ``paged_attention_kernel``. The teaching kernel refuses a block size or
head_dim that is not a power of two with a ValueError, checked on the cases that have one.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

from pagedlab.attention import backend
from pagedlab.attention import launch as kernels
from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.ops import (
    block_tables_tensor,
    paged_attention,
    paged_attention_one_page,
    reference_attention,
)
from tests.attention.test_kernel_steps import paged_batch

AXES: dict[str, list] = {
    "num_seqs": [1, 2, 3, 4, 5],
    "heads": [(1, 1), (4, 1), (4, 2), (8, 8), (6, 3)],
    "head_dim": [1, 8, 12, 16, 64],
    "block_size": list(range(1, 17)),
    "dtype": [torch.float32, torch.float16],
    "pad": [-1, 0],
    "pages_per_step": [None, 1],
    "splits": [1, 2, 3],
}
CASES = 32


def store_by_indexing(cache, slots, k, v) -> None:
    """The reshape-and-cache oracle in plain torch: slot s of ``[num_slots, heads, dim]``."""
    slots = torch.as_tensor(slots, dtype=torch.int64)
    cache.key.view(cache.num_slots, cache.num_kv_heads, cache.head_dim)[slots] = k
    cache.value.view(cache.num_slots, cache.num_kv_heads, cache.head_dim)[slots] = v


def covering_set(cases: int, seed: int = 2023) -> list[dict]:
    rng = random.Random(seed)
    shuffled = {name: rng.sample(values, len(values)) for name, values in AXES.items()}
    return [{name: vals[i % len(vals)] for name, vals in shuffled.items()} for i in range(cases)]


GRID = covering_set(CASES)


def test_covering_set_covers_every_value():
    for name, values in AXES.items():
        assert {repr(case[name]) for case in GRID} == {repr(v) for v in values}, name


def build(case: dict, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    bs, (heads, kv_heads), dim = case["block_size"], case["heads"], case["head_dim"]
    # Positions per sequence: keep the interpreter's work small for tiny blocks.
    max_len = min(4 * bs + 3, 20) if case["pages_per_step"] == 1 else 4 * bs + 3
    lens = [bs * int(torch.randint(1, 4, (1,), generator=gen))]  # a multiple of bs
    lens += [
        int(torch.randint(1, max_len + 1, (1,), generator=gen)) for _ in range(1, case["num_seqs"])
    ]
    pages = [-(-n // bs) for n in lens]
    num_blocks = sum(pages) + 2
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables, start = [], 0
    for p in pages:
        tables.append(perm[start : start + p])
        start += p
    shape = (num_blocks, bs, kv_heads, dim)
    dtype = case["dtype"]
    key, value = (torch.randn(shape, generator=gen).to(dtype) for _ in "kv")
    owned = torch.zeros(num_blocks, bs, dtype=torch.bool)
    for row, n in zip(tables, lens, strict=True):
        owned.view(-1)[(torch.tensor(row)[:, None] * bs + torch.arange(bs)).flatten()[:n]] = True
    key[~owned], value[~owned] = float("nan"), float("nan")  # never to be read
    inputs = (
        torch.randn(len(lens), heads, dim, generator=gen).to(dtype),
        key,
        value,
        block_tables_tensor(tables, pad=case["pad"]),
        torch.tensor(lens, dtype=torch.int32),
    )
    return inputs


def is_power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


@pytest.mark.parametrize("kernel", ["tuned", "one_page"])
@pytest.mark.parametrize("i", range(CASES), ids=lambda i: f"case{i}")
def test_kernel_matches_reference_on_the_grid(i, kernel):
    case = GRID[i]
    inputs = build(case, seed=i)
    ref = reference_attention(*inputs)
    if kernel == "one_page":
        if not (is_power_of_two(case["block_size"]) and is_power_of_two(case["head_dim"])):
            with pytest.raises(ValueError, match="is not a power of two"):
                paged_attention_one_page(*inputs)
            return
        out = paged_attention_one_page(*inputs)
    elif case["pages_per_step"] is None and case["splits"] == 1:
        out = paged_attention(*inputs)
    else:  # one page per loop step (rescaling at every page) and/or split pages
        q, kc, vc, bt, sl = inputs
        max_pages = int(((sl + kc.shape[1] - 1) // kc.shape[1]).max())
        out = kernels.launch_paged_attention(
            q,
            kc,
            vc,
            bt,
            sl,
            q.shape[-1] ** -0.5,
            max_pages,
            pages_per_step=case["pages_per_step"],
            splits=case["splits"],
        )
    tol = 1e-5 if case["dtype"] == torch.float32 else 2e-3
    assert out.dtype == case["dtype"]
    torch.testing.assert_close(
        out.float(), ref.float(), rtol=tol, atol=tol, msg=lambda m: f"{case}\n{m}"
    )


def test_the_grid_runs_the_teaching_kernel_where_it_matters():
    """GQA, blocks of 1 and 16, fp16, partial last blocks: each met by a power-of-two case."""
    runs = [c for c in GRID if is_power_of_two(c["block_size"]) and is_power_of_two(c["head_dim"])]
    assert {c["block_size"] for c in runs} == {1, 2, 4, 8, 16}
    assert any(c["heads"][0] > c["heads"][1] for c in runs)  # grouped-query attention
    assert {c["dtype"] for c in runs} == {torch.float32, torch.float16}
    assert len(runs) < len(GRID)  # and some cases check the refusal


@pytest.mark.parametrize(
    ("pages_per_step", "splits"), [(1, 1), (2, 1), (4, 1), (8, 1), (1, 4), (2, 3), (1, 6), (1, 9)]
)
def test_loop_width_and_splits_do_not_change_the_answer(pages_per_step, splits):
    """A long sequence with a late large score: the running max must rescale correctly."""
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(1, 2, 4, generator=gen)
    kc = torch.randn(8, 2, 1, 4, generator=gen)
    kc[5, 1] = 8 * q[0, 0]  # the last position's score dwarfs the earlier ones
    vc = torch.randn(8, 2, 1, 4, generator=gen)
    bt = torch.tensor([[0, 3, 1, 7, 2, 5, -1]], dtype=torch.int32)
    sl = torch.tensor([12], dtype=torch.int32)
    out = kernels.launch_paged_attention(
        q, kc, vc, bt, sl, 0.5, 6, pages_per_step=pages_per_step, splits=splits
    )
    torch.testing.assert_close(out, reference_attention(q, kc, vc, bt, sl, scale=0.5))


@pytest.mark.parametrize("lanes", [2, 4, 8, 16])
@pytest.mark.parametrize(("block_size", "heads", "dim"), [(1, (4, 2), 8), (3, (6, 2), 12)])
def test_lanes_kernel_equals_one_lane_per_program(lanes, block_size, heads, dim):
    """Several (sequence, kv head) lanes per program, sequences of different lengths (lanes
    that finish early, padding lanes past the last): the one-lane kernel's output, exactly."""
    lengths = [1, 9, 4, 17, 2]
    q, kc, vc, tables, sl = paged_batch(lengths, block_size, *heads, head_dim=dim, seed=lanes)
    bt = block_tables_tensor(tables)
    max_pages = max(-(-n // block_size) for n in lengths)
    one = kernels.launch_paged_attention(q, kc, vc, bt, sl, dim**-0.5, max_pages, lanes=1)
    out = kernels.launch_paged_attention(q, kc, vc, bt, sl, dim**-0.5, max_pages, lanes=lanes)
    torch.testing.assert_close(out, one, rtol=0, atol=0)
    torch.testing.assert_close(out, reference_attention(q, kc, vc, bt, sl))


@pytest.mark.parametrize(
    ("block_size", "heads", "dim", "dtype"),
    [
        (1, 1, 1, torch.float32),
        (3, 3, 12, torch.float16),
        (16, 2, 64, torch.float32),
        (5, 4, 7, torch.float32),
    ],
)
def test_reshape_and_cache_matches_torch_indexing(block_size, heads, dim, dtype):
    gen = torch.Generator().manual_seed(block_size)
    cache_a = PagedKVCache(6, block_size, heads, dim, dtype=dtype)
    cache_b = PagedKVCache(6, block_size, heads, dim, dtype=dtype)
    slots = torch.randperm(6 * block_size, generator=gen)[: 2 * block_size + 1]
    k = torch.randn(len(slots), heads, dim, generator=gen).to(dtype)
    v = torch.randn(len(slots), heads, dim, generator=gen).to(dtype)
    kernels.launch_reshape_and_cache(k, v, cache_a.key, cache_a.value, slots)
    store_by_indexing(cache_b, slots, k, v)
    assert torch.equal(cache_a.key, cache_b.key) and torch.equal(cache_a.value, cache_b.value)


no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")


@no_cuda
def test_backend_is_the_interpreter_here():
    assert backend.BACKEND == "interpreter"
    assert os.environ["TRITON_INTERPRET"] == "1"
    assert backend.device() == torch.device("cpu")
    assert "interpreter" in backend.describe()


def run_fresh(code: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@no_cuda
def test_import_torch_does_not_import_triton_and_backend_sets_the_variable_first():
    out = run_fresh(
        """
        import os, sys
        import torch
        print("triton" in sys.modules)
        import pagedlab.attention.backend as b
        print("triton" in sys.modules, os.environ.get("TRITON_INTERPRET"), b.BACKEND)
        """
    )
    assert out.splitlines() == ["False", "False 1 interpreter"]


KERNEL_CELLS = """
import warnings
{first}
import triton
import triton.language as tl

@triton.jit
def early(x_ptr):
    tl.store(x_ptr, 1.0)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import pagedlab.attention.backend as b
print([str(w.message)[:35] for w in caught if w.category is RuntimeWarning])

@triton.jit
def late(x_ptr):
    tl.store(x_ptr, 1.0)

print(b.stale_kernel(early))
print(b.stale_kernel(late), b.stale_kernel(print))

from pagedlab.exercises import EXERCISES  # notebook 04's check on the early kernel

print(EXERCISES["masked_copy"].check(early))
"""


@no_cuda
@pytest.mark.parametrize("first", ["", "import pagedlab"])
def test_a_kernel_defined_before_import_pagedlab_is_explained_not_left_to_0_active_drivers(
    first, tmp_path
):
    """Notebook 04 after a restart: a kernel cell run before `import pagedlab` (@triton.jit
    needs its source in a file, so the cells are one)."""
    cells = tmp_path / "cells.py"
    cells.write_text(KERNEL_CELLS.format(first=first))
    out = run_fresh(f"import runpy; runpy.run_path({str(cells)!r})")
    warned, early, late, *checked = out.splitlines()
    assert late == "None None"
    if first:  # pagedlab first: every kernel runs in the interpreter, nothing to say
        assert (warned, early) == ("[]", "None") and "0 active drivers" not in out
        return
    assert early in "\n".join(checked)  # notebook 04's check says it too, whole
    assert warned == "['triton was imported before pagedlab']"
    assert early.startswith("early was defined before import pagedlab set TRITON_INTERPRET=1")
    assert "'0 active drivers'" in early and early.endswith("run its cell again")


def test_user_choice_of_interpreter_is_respected():
    out = run_fresh(
        "import pagedlab.attention.backend as b; print(b.BACKEND, b.REASON)", TRITON_INTERPRET="1"
    )
    assert out == "interpreter TRITON_INTERPRET=1 was set by the user"


@no_cuda
def test_forcing_compiled_mode_without_cuda_is_reported_not_crashed():
    out = run_fresh(
        """
        import pagedlab.attention.backend as b
        print(b.BACKEND)
        try:
            b.require_triton()
        except RuntimeError as e:
            print("reference_attention" in str(e))
        """,
        TRITON_INTERPRET="0",
    )
    assert out.splitlines() == ["unavailable", "True"]


@pytest.mark.parametrize("value", ["yes", " 1", "2", ""])
def test_spellings_triton_ignores_count_as_unset(value, monkeypatch):
    """Triton reads only 1/true/on and 0/false/off: anything else must not be taken as a choice."""
    monkeypatch.setenv("TRITON_INTERPRET", value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert backend._decide() == ("compiled", "CUDA device found")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    decided, reason = backend._decide()
    assert decided == "interpreter" and repr(value) in reason
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_reshape_and_cache_spans_several_programs():
    """More tokens than one program holds (64 at 16 heads x 64 dims): the grid has two."""
    gen = torch.Generator().manual_seed(9)
    slots = torch.randperm(128, generator=gen)[:100]
    k = torch.randn(100, 16, 64, generator=gen)
    v = torch.randn(100, 16, 64, generator=gen)
    cache_a, cache_b = PagedKVCache(16, 8, 16, 64), PagedKVCache(16, 8, 16, 64)
    kernels.launch_reshape_and_cache(k, v, cache_a.key, cache_a.value, slots)
    store_by_indexing(cache_b, slots, k, v)
    assert torch.equal(cache_a.key, cache_b.key) and torch.equal(cache_a.value, cache_b.value)


def test_without_triton_pagedlab_still_imports_and_points_to_the_reference():
    """What macOS and Windows users get: no triton package at all."""
    out = run_fresh(
        """
        import sys
        sys.modules["triton"] = None  # as if it were not installed
        import torch
        import pagedlab
        from pagedlab.attention import backend
        print(backend.BACKEND)
        q, kc, vc = torch.ones(1, 1, 1), torch.zeros(2, 4, 1, 1), torch.ones(2, 4, 1, 1)
        i32 = torch.int32
        args = (q, kc, vc, torch.tensor([[1]], dtype=i32), torch.tensor([3], dtype=i32))
        print(pagedlab.reference_attention(*args).item())
        try:
            pagedlab.paged_attention(*args)
        except RuntimeError as e:
            print("Linux" in str(e), "reference_attention" in str(e))
        cache = pagedlab.PagedKVCache(2, 4, 1, 1)
        cache.write([5], torch.ones(1, 1, 1), torch.ones(1, 1, 1))
        print(cache.key[1, 1].item())
        """
    )
    assert out.splitlines() == ["unavailable", "1.0", "True True", "1.0"]


def test_merge_splits_equals_one_softmax():
    """Two halves softmaxed separately and merged == softmax over the whole (plus -inf slice)."""
    gen = torch.Generator().manual_seed(3)
    scores, values = torch.randn(10, generator=gen), torch.randn(10, 4, generator=gen)
    parts = [(scores[:6], values[:6]), (scores[6:], values[6:])]
    acc = torch.stack(
        [(torch.exp(s - s.max())[:, None] * v).sum(0) for s, v in parts] + [torch.zeros(4)]
    )
    m = torch.stack([s.max() for s, _ in parts] + [torch.tensor(float("-inf"))])
    l_sum = torch.stack([torch.exp(s - s.max()).sum() for s, _ in parts] + [torch.tensor(0.0)])
    merged = kernels.merge_splits(acc, m, l_sum)
    torch.testing.assert_close(merged, torch.softmax(scores, 0) @ values)
