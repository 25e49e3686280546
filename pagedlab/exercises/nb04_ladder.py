"""Notebook 04's Triton ladder: ``masked_copy``, ``gather_rows`` (a load through an index
table, as the paged kernel's through the block table) and ``block_softmax``. Expected answers
are torch's; a miss draws what each program touched (:mod:`pagedlab.grade.tensors`). Needs
triton (``pagedlab.exercises`` registers them where the backend has it).
"""

from __future__ import annotations

from typing import Any

import torch

from pagedlab.attention import backend
from pagedlab.exercises.nb04 import NB04
from pagedlab.grade.cases import Case, cases, seed_of
from pagedlab.grade.core import Kernel
from pagedlab.grade.kernel_drivers import SENTINEL
from pagedlab.grade.tensors import copy_where, gather_where, masked_equal, softmax_where

HEADER = "import triton\nimport triton.language as tl\n\n\n"

COPY_STUB = f'''{HEADER}@triton.jit
def my_masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i] for i < n; program p handles elements p * BLOCK .. p * BLOCK + BLOCK - 1."""
    p = tl.program_id(0)
    # Your code: the offsets this program handles, a mask of those below n, a masked load
    # and a masked store (tl.load(ptr, mask=...), tl.store(ptr, value, mask=...)).
    raise NotImplementedError("write the masked load and store")
'''

GATHER_STUB = f'''{HEADER}@triton.jit
def my_gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):
    """out[i, :] = x[index[i], :] (rows of D contiguous floats); program i copies row i."""
    i = tl.program_id(0)
    offs_d = tl.arange(0, D)
    # Your code: read which row of x to copy from the index table, load it, store it.
    raise NotImplementedError("write the gather")
'''

SOFTMAX_STUB = f'''{HEADER}@triton.jit
def my_block_softmax(q_ptr, k_ptr, out_ptr, n, scale,
                     BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    """One block: k is [BLOCK_SIZE, HEAD_DIM], its first n slots hold keys. Store the softmax
    of scores[t] = sum(q * k[t]) * scale over t < n into out[t] (0 for t >= n)."""
    offs_t = tl.arange(0, BLOCK_SIZE)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + offs_d)
    # Your code: a mask of the slots below n, a masked load of k, the scores (masked: -inf),
    # their softmax (subtract the max first), and the store of all BLOCK_SIZE weights.
    raise NotImplementedError("write the block's scores and softmax")
'''


def _solutions() -> tuple[Any, Any, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        p = tl.program_id(0)
        offs = p * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=inside), mask=inside)

    @triton.jit
    def gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):
        i = tl.program_id(0)
        offs_d = tl.arange(0, D)
        row = tl.load(index_ptr + i)
        tl.store(out_ptr + i * D + offs_d, tl.load(x_ptr + row * D + offs_d))

    @triton.jit
    def block_softmax(q_ptr, k_ptr, out_ptr, n, scale,
                      BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):  # fmt: skip
        offs_t = tl.arange(0, BLOCK_SIZE)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + offs_d)
        valid = offs_t < n
        k = tl.load(k_ptr + offs_t[:, None] * HEAD_DIM + offs_d[None, :], mask=valid[:, None],
                    other=0.0)  # fmt: skip
        scores = tl.where(valid, tl.sum(k * q[None, :], axis=1) * scale, float("-inf"))
        p = tl.exp(scores - tl.max(scores, axis=0))
        tl.store(out_ptr + offs_t, p / tl.sum(p, axis=0))

    return masked_copy, gather_rows, block_softmax


# --- rung 1 ------------------------------------------------------------------------------------
COPIES = [  # (n, BLOCK, why): x holds seeded values, never its own offsets
    (5, 4, "5 elements in programs of 4: the second program's last 3 lanes are past n"),
    (8, 8, "8 elements, one full program: nothing to mask"),
    (1, 16, "1 element in a program of 16: 15 lanes masked"),
    (37, 16, "37 elements in 3 programs of 16"),
]


def _values(shape: tuple[int, ...], *key: int) -> torch.Tensor:
    """Seeded values (held back: salted) that no index equals: 100.5 .. 999.5."""
    generator = torch.Generator().manual_seed(seed_of(hash(key) % 1_000_003))
    return torch.randint(100, 1000, shape, generator=generator).float() + 0.5


def _copy_cases() -> list[Case]:
    def given(n: int, block: int) -> tuple[Any, ...]:
        return _values((n,), 401, n, block), n, block

    def expect(n: int, block: int) -> torch.Tensor:
        out = torch.full((n + block,), SENTINEL)  # past n: untouched
        out[:n] = given(n, block)[0]
        return out

    def label(n: int, block: int) -> str:
        x = given(n, block)[0].tolist()
        return f"x = {x[:8]}{' ...' if n > 8 else ''} (n={n}), BLOCK={block}"

    def generate(rng: Any) -> tuple[int, int]:
        return rng.randint(1, 70), rng.choice((4, 8, 16, 32))

    return cases(COPIES, generate, 4, 4010, expect=expect, label=label, given=given)


# --- rung 2 ------------------------------------------------------------------------------------
GATHERS = [  # (rows of x, D, index, why): x holds seeded values, never its own offsets
    (6, 4, [4, 1], "rows [4, 1] (the example's blocks): row 0 of out is row 4 of x"),
    (4, 4, [0, 1, 2, 3], "the identity: every row where it was"),
    (8, 16, [7, 0, 5], "rows of 16 floats: the row stride is D"),
    (5, 2, [3, 3, 1], "the same row twice"),
]


def _gather_cases() -> list[Case]:
    def given(rows: int, d: int, index: list[int]) -> tuple[Any, ...]:
        return _values((rows, d), 402, rows, d, *index), index

    def generate(rng: Any) -> tuple[int, int, list[int]]:
        rows, d = rng.randint(1, 12), rng.choice((2, 4, 8, 16))
        return rows, d, [rng.randrange(rows) for _ in range(rng.randint(1, 6))]

    return cases(
        GATHERS, generate, 4, 4020,
        expect=lambda rows, d, index: given(rows, d, index)[0][index],
        label=lambda rows, d, index: f"x: {rows} rows of D={d} seeded values, index={index}",
        given=given,
    )  # fmt: skip


# --- rung 3 ------------------------------------------------------------------------------------
def _softmax_expected(q: torch.Tensor, k: torch.Tensor, n: int, scale: float) -> torch.Tensor:
    weights = torch.zeros(k.shape[0])
    weights[:n] = torch.softmax((k[:n] @ q) * scale, dim=0)
    return weights


SOFTMAXES = [  # (BLOCK_SIZE, HEAD_DIM, n, scale (None: 1/sqrt(HEAD_DIM)), one big score, why)
    (4, 4, 4, None, None, "a full block of 4, small scores"),
    (4, 4, 3, None, None, "3 of 4 slots hold keys; the fourth holds NaN: mask it (score -inf)"),
    (8, 16, 5, None, None, "blocks of 8, head_dim 16, 5 keys"),
    (4, 4, 4, None, 100.0, "one score of 100 after scaling: exp(100) overflows float32 unless "
     "the max is subtracted first"),
    (1, 4, 1, None, None, "a block of 1: its weight is 1"),
    (4, 4, 4, 2.0, None, "scale=2.0, not 1/sqrt(HEAD_DIM): the kernel multiplies by its scale "
     "argument"),
]  # fmt: skip


def _softmax_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(seed_of(404))  # drawn from in the cases' order
    fixed = []
    for block, dim, n, scale, big, why in SOFTMAXES:
        q = torch.randn(dim, generator=generator)
        k = torch.randn(block, dim, generator=generator)
        if big is not None:  # q . k[0] * scale = big
            q = torch.ones(dim)
            k[0] = big / (dim * dim**-0.5)
        k[n:] = float("nan")
        fixed.append((q, k, n, dim**-0.5 if scale is None else scale, why))

    def label(q: torch.Tensor, k: torch.Tensor, n: int, scale: float) -> str:
        return f"q of {len(q)}, k {list(k.shape)} (slots {n}.. hold NaN), n={n}, scale={scale:g}"

    return cases(fixed, expect=_softmax_expected, label=label)


RUNGS = [  # (name, driver, task, params, cases, diagnosis, starter cell)
    ("masked_copy", "copy", "Ladder, rung 1: a masked load and store. Complete my_masked_copy: "
     "program p copies x[p * BLOCK + j] to out for the lanes j whose element is below n, and "
     "touches nothing past n.", ("x", "n", "BLOCK"), _copy_cases, copy_where, COPY_STUB),
    ("gather_rows", "gather", "Ladder, rung 2: a gather through an index table. Complete "
     "my_gather_rows: program i copies row index[i] of x into row i of out.", ("x", "index"),
     _gather_cases, gather_where, GATHER_STUB),
    ("block_softmax", "softmax", "Ladder, rung 3: one block's scores and softmax. Complete "
     "my_block_softmax: the softmax of the scores of the first n slots (scaled), 0 for the "
     "others.", ("q", "k", "n", "scale"), _softmax_cases, softmax_where, SOFTMAX_STUB),
]  # fmt: skip


def make_ladder() -> list[Kernel]:
    on_cpu = backend.device().type == "cpu"  # in a child on a CPU; CUDA does not survive a fork
    return [
        Kernel(solution, NB04, task, build, params=params, compare=masked_equal, isolate=on_cpu,
               driver=driver, diagnose=where, stub_code=stub, entry=f"my_{name}",
               todo="Write the kernel's body")
        for (name, driver, task, params, build, where, stub), solution
        in zip(RUNGS, _solutions(), strict=True)
    ]  # fmt: skip
