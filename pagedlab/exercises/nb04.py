"""Notebook 04 (the kernel at work): the kernel's masks, grouped-query attention, the Triton
ladder and the Triton puzzle.

- ``valid_slots``, ``kv_head``: answers read off
  :func:`pagedlab.attention.kernel_steps.paged_attention_steps` and
  :func:`pagedlab.reference_attention`.
- The ladder (:func:`make_ladder`): ``masked_copy``, ``gather_rows`` (a load through an index
  table, as the paged kernel loads through the block table) and ``block_softmax``; each task
  and starter cell says what it computes. On a miss the ``where`` line draws what each
  program touched (:func:`draw_copy`, :func:`draw_gather`: one row per program).
- The puzzle (:func:`make_puzzle`): the loop body of a paged kernel, compared with
  :func:`pagedlab.reference_attention`. Every slot of the caches no sequence owns holds NaN
  (the empty tail of each last block included: vLLM's CUDA kernel zeroes exactly those V
  values "since they may contain NaNs"), so an unmasked load, a padding entry followed or a
  block too far reads NaN. On a miss the sequence is rerun cut after 1, 2, ... blocks to name
  the first block whose fold goes wrong. ``BLOCK_SIZE`` and ``HEAD_DIM`` are powers of two.

The kernels are :class:`~pagedlab.exercises.core.Kernel` exercises, launched in fenced, watched
buffers by :mod:`pagedlab.exercises.kernel_drivers`; they need triton (``pagedlab.exercises``
registers them where the backend has it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from pagedlab.attention import backend
from pagedlab.attention.kernel_steps import paged_attention_steps
from pagedlab.attention.ops import block_tables_tensor, reference_attention
from pagedlab.checks import ceil_div
from pagedlab.exercises.core import Case, Function, Kernel, Mistake, cases, seed_of
from pagedlab.exercises.kernel_drivers import SENTINEL
from pagedlab.exercises.nb03 import filled_cache, tensors_equal

NB04 = "04_kernel_at_work"


# --- 04 · the kernel's masks and grouped-query attention ------------------------------------------
def valid_slots(seq_len: int, logical: int, block_size: int) -> int:
    """Slots of logical block ``logical`` that hold a token (the rest are masked)."""
    return min(block_size, seq_len - logical * block_size)


def kv_head(head: int, num_heads: int, num_kv_heads: int) -> int:
    """The kv head that query head ``head`` reads under grouped-query attention."""
    return head // (num_heads // num_kv_heads)


_VALID_SPECS = [
    (5, 1, 4, "5 tokens, blocks of 4: the last block holds 1 token", ("forgot_last", "overfull")),
    (5, 0, 4, "the first block of the same sequence is full", ("overfull",)),
    (8, 1, 4, "a full last block: all 4 slots hold a token", ("full_zero",)),
    (1, 0, 16, "one token in a block of 16", ("forgot_last",)),
    (17, 1, 16, "17 tokens in blocks of 16", ("forgot_last",)),
    (10, 3, 3, "blocks of 3 (not a power of two)", ()),
    (6, 5, 1, "blocks of 1", ()),
]  # fmt: skip


def _valid(rng: random.Random) -> tuple[int, int, int]:
    size, seq_len = rng.choice([1, 2, 3, 4, 5, 8, 16]), rng.randint(1, 60)
    return seq_len, rng.randrange(ceil_div(seq_len, size)), size


def _masked_past(seq_len: int, logical: int, size: int) -> int:
    """The positions the kernel's own loop (in plain Python) reads from logical block
    ``logical``: the slots that hold a token."""
    pages = list(range(ceil_div(seq_len, size)))
    cache = filled_cache(pages, seq_len, size, 1, 1, seed=0)
    steps = paged_attention_steps(torch.ones(1, 1), cache.key, cache.value, pages, seq_len)
    return len(steps[logical].positions)


KV_GROUPS = [  # (num_heads, num_kv_heads, why, catches): one fixed case per query head
    (8, 2, "8 query heads on 2 kv heads: heads 0-3 read kv head 0, 4-7 kv head 1",
     ("interleaved", "by_kv_heads")),
    (4, 4, "as many kv heads as query heads: each reads its own", ()),
    (4, 1, "one kv head (multi-query attention): every head reads it", ()),
    (6, 3, "6 query heads on 3 kv heads (a group of 2)", ("interleaved", "by_kv_heads")),
    (32, 8, "Llama-style: 32 query heads on 8 kv heads", ("interleaved", "by_kv_heads")),
    (12, 4, "12 on 4: groups of 3 (not a power of two)", ()),
]  # fmt: skip


def _kv_read(head: int, num_heads: int, kv_heads: int) -> int:
    """The kv head query head ``head`` reads in reference_attention (kv head h holds h)."""
    value = torch.arange(kv_heads, dtype=torch.float32)[None, None, :, None]
    out = reference_attention(torch.ones(1, num_heads, 1), torch.zeros(1, 1, kv_heads, 1),
                              value.contiguous(), block_tables_tensor([[0]]),
                              torch.tensor([1], dtype=torch.int32))  # fmt: skip
    return int(out[0, head, 0])


def _kv_draw(rng: random.Random) -> tuple[int, int, int]:
    """A seeded grouping and one query head of it."""
    kv_heads = rng.choice([1, 2, 3, 4, 8])
    num_heads = kv_heads * rng.randint(1, 6)
    return rng.randrange(num_heads), num_heads, kv_heads


def _kv_head_cases() -> list[Case]:
    fixed = [(h, n, k, why, catches) for n, k, why, catches in KV_GROUPS for h in range(n)]
    return cases(fixed, _kv_draw, 6, 402, expect=_kv_read)


EXERCISES_04 = [
    Function(valid_slots, NB04,
        task="The kernel reads logical block `logical` of a sequence of seq_len tokens. How many "
        "of its block_size slots hold a token (the others are masked)?",
        cases=lambda: cases(_VALID_SPECS, _valid, 20, 401, expect=_masked_past),
        mistakes=[
            Mistake("forgot the partly filled last block: its slots past seq_len are masked.",
                    lambda n, i, b: b, "forgot_last"),
            Mistake("a full last block has block_size valid slots, not 0.",
                    lambda n, i, b: n % b if i == (n - 1) // b else b, "full_zero"),
            Mistake("no block holds more than block_size tokens.",
                    lambda n, i, b: n - i * b, "overfull"),
        ],
    ),
    Function(kv_head, NB04,
        task="Grouped-query attention: which kv head does query head `head` read, with num_heads "
        "query heads sharing num_kv_heads kv heads?",
        cases=_kv_head_cases,
        mistakes=[
            Mistake("groups are consecutive heads (0-3 share kv head 0), not interleaved.",
                    lambda h, n, k: h % k, "interleaved"),
            Mistake("that divides by the number of kv heads: heads are grouped by how many query "
                    "heads share one kv head.", lambda h, n, k: h // k, "by_kv_heads"),
        ],
    ),
]  # fmt: skip


# --- the Triton ladder ---------------------------------------------------------------------
HEADER = "import triton\nimport triton.language as tl\n\n\n"

COPY_STUB = (
    HEADER
    + '''@triton.jit
def my_masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i] for i < n; program p handles elements p * BLOCK .. p * BLOCK + BLOCK - 1."""
    p = tl.program_id(0)
    # Your code: the offsets this program handles, a mask of those below n, a masked load
    # and a masked store (tl.load(ptr, mask=...), tl.store(ptr, value, mask=...)).
    raise NotImplementedError("write the masked load and store")
'''
)

GATHER_STUB = (
    HEADER
    + '''@triton.jit
def my_gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):
    """out[i, :] = x[index[i], :] (rows of D contiguous floats); program i copies row i."""
    i = tl.program_id(0)
    offs_d = tl.arange(0, D)
    # Your code: read which row of x to copy from the index table, load it, store it.
    raise NotImplementedError("write the gather")
'''
)

SOFTMAX_STUB = (
    HEADER
    + '''@triton.jit
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
)


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
COPIES = [  # (n, BLOCK, x's first value, why): x = first, first + 1, ...
    (5, 4, 0.0, "5 elements in programs of 4: the second program's last 3 lanes are past n"),
    (8, 8, 0.5, "8 elements, one full program: nothing to mask"),
    (1, 16, 1.0, "1 element in a program of 16: 15 lanes masked"),
    (37, 16, 1.5, "37 elements in 3 programs of 16"),
]


def _copy_cases() -> list[Case]:
    def given(n: int, block: int, first: float) -> tuple[Any, ...]:
        return torch.arange(n, dtype=torch.float32) + first, n, block

    def expect(n: int, block: int, first: float) -> torch.Tensor:
        out = torch.full((n + block,), SENTINEL)  # past n: untouched
        out[:n] = given(n, block, first)[0]
        return out

    def label(n: int, block: int, first: float) -> str:
        x = given(n, block, first)[0].tolist()
        return f"x = {x[:8]}{' ...' if n > 8 else ''} (n={n}), BLOCK={block}"

    return cases(COPIES, expect=expect, label=label, given=given)


# --- rung 2 ------------------------------------------------------------------------------------
GATHERS = [  # (rows of x, D, index, why): x's row r holds r*D .. r*D + D - 1
    (6, 4, [4, 1], "rows [4, 1] (the example's blocks): row 0 of out is row 4 of x"),
    (4, 4, [0, 1, 2, 3], "the identity: every row where it was"),
    (8, 16, [7, 0, 5], "rows of 16 floats: the row stride is D"),
    (5, 2, [3, 3, 1], "the same row twice"),
]


def _gather_x(rows: int, d: int) -> torch.Tensor:
    return torch.arange(rows * d, dtype=torch.float32).reshape(rows, d)


def _gather_cases() -> list[Case]:
    return cases(
        GATHERS,
        expect=lambda rows, d, index: _gather_x(rows, d)[index],
        label=lambda rows, d, index: (
            f"x: {rows} rows of D={d} (row r holds r*D .. r*D + D - 1), index={index}"
        ),
        given=lambda rows, d, index: (_gather_x(rows, d), index),
    )


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


def _copy_where(fn: Callable[..., Any], case: Case) -> str:
    """Which offsets the kernel stored to wrongly, program by program (read off ``out``)."""
    _x, n, block = case.args
    got = fn(*case.args)
    wrong = [i for i in range(len(got)) if not _same(float(got[i]), float(case.expected[i]))]
    if not wrong:
        return ""
    by_program: dict[int, list[int]] = {}
    for i in wrong:
        by_program.setdefault(i // block, []).append(i)
    parts = [
        f"program {p} stored wrongly at offsets {offs}"
        + (f" (past n={n}: it must not store there)" if min(offs) >= n else "")
        for p, offs in sorted(by_program.items())
    ]
    return "; ".join(parts) + "\n" + draw_copy(got, case.expected, n, block)


PAD = " " * 12  # a drawing's lines sit under the text of the ``where:`` line


def draw_copy(got: Any, expected: Any, n: int, block: int) -> str:
    """What each program stored at each of its offsets, one row per program of the launch.

    ``=`` the right value, ``x`` a wrong value, ``.`` not stored (and it should have been),
    ``!`` stored past n (it must not), blank: past n and untouched (right). Offsets past the
    launch's last program get a row of their own if anything was stored there.
    """

    def mark(i: int) -> str:
        g, e = float(got[i]), float(expected[i])
        if i >= n:
            return " " if g == SENTINEL else "!"
        if _same(g, e):
            return "="
        return "." if g == SENTINEL else "x"

    programs = ceil_div(n, block)
    rows = [f"{PAD}offset     " + "".join(str(i % 10) for i in range(programs * block))]
    for p in range(programs):
        lanes = "".join(mark(i) for i in range(p * block, (p + 1) * block))
        rows.append(f"{PAD}program {p:<3}" + " " * (p * block) + lanes)
    beyond = "".join(mark(i) for i in range(programs * block, len(got)))
    if beyond.strip():
        rows.append(f"{PAD}no program " + " " * (programs * block) + beyond)
    rows.append(
        f"{PAD}(row p: the offsets program p handles; = right  x wrong value  . not stored  "
        f"! stored past n={n})"
    )
    return "\n".join(row.rstrip() for row in rows)


def _gather_where(fn: Callable[..., Any], case: Case) -> str:
    """For each wrong row of ``out``, which row of ``x`` it holds (x's row r holds r*D ...)."""
    x, index = case.args
    got = fn(*case.args)
    d = x.shape[1]
    lines = []
    for i, want in enumerate(index):
        row = got[i]
        if bool(torch.equal(row, x[want])):
            continue
        held = [r for r in range(x.shape[0]) if bool(torch.equal(row, x[r]))]
        what = f"x's row {held[0]}" if held else f"values {row.tolist()[: min(d, 4)]} ..."
        lines.append(f"program {i} stored {what}, expected x's row {want}")
    return "; ".join(lines) + ("\n" + draw_gather(got, x, index) if lines else "")


def draw_gather(got: Any, x: Any, index: list[int]) -> str:
    """Which row of ``x`` each program copied into its row of out, against the one to copy.

    ``o`` the row it copied, and the right one; ``*`` the row it should have copied; ``#``
    the row it copied instead; a program whose row holds no row of x is said in words.
    """
    rows = [f"{PAD}x's row    " + " ".join(str(r % 10) for r in range(x.shape[0]))]
    for i, want in enumerate(index):
        held = [r for r in range(x.shape[0]) if bool(torch.equal(got[i], x[r]))]
        marks = [" "] * x.shape[0]
        marks[want] = "*"
        for r in held[:1]:
            marks[r] = "o" if r == want else "#"
        tail = "" if held else "   (its row holds no row of x)"
        rows.append(f"{PAD}program {i:<3}" + " ".join(marks) + tail)
    rows.append(f"{PAD}(o copied the right row  * the row to copy  # the row it copied)")
    return "\n".join(row.rstrip() for row in rows)


def _softmax_where(fn: Callable[..., Any], case: Case) -> str:
    """Which slots' weights are wrong, and whether any is NaN."""
    n = case.args[2]
    got = fn(*case.args)
    bad = [t for t in range(len(got)) if not _same(float(got[t]), float(case.expected[t]))]
    if not bad:
        return ""
    nan = [t for t in bad if got[t] != got[t]]
    text = f"wrong weights at slots {bad} (slots {n}.. hold no key)"
    text += f"; NaN at slots {nan}" if nan else ""
    marks = "".join("N" if t in nan else ("x" if t in bad else "=") for t in range(len(got)))
    return (
        f"{text}\n{PAD}slot       " + "".join(str(t % 10) for t in range(len(got)))
        + f"\n{PAD}weight     {marks}\n{PAD}key        " + "k" * n + "-" * (len(got) - n)
        + f"\n{PAD}(= right  x wrong  N NaN; k a key, - no key)"
    )  # fmt: skip


def _same(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-5 + 1e-4 * abs(b)


def _masked_equal(expected: Any, got: Any) -> bool:
    """Equal, NaN nowhere, and every sentinel the kernel must not touch still there."""
    return (
        isinstance(got, torch.Tensor)
        and tuple(got.shape) == tuple(expected.shape)
        and not bool(torch.isnan(got).any())
        and tensors_equal(expected, got)
    )


RUNGS = [  # (name, driver, task, params, cases, diagnosis, starter cell)
    ("masked_copy", "copy", "Ladder, rung 1: a masked load and store. Complete my_masked_copy: "
     "program p copies x[p * BLOCK + j] to out for the lanes j whose element is below n, and "
     "touches nothing past n.", ("x", "n", "BLOCK"), _copy_cases, _copy_where, COPY_STUB),
    ("gather_rows", "gather", "Ladder, rung 2: a gather through an index table. Complete "
     "my_gather_rows: program i copies row index[i] of x into row i of out.", ("x", "index"),
     _gather_cases, _gather_where, GATHER_STUB),
    ("block_softmax", "softmax", "Ladder, rung 3: one block's scores and softmax. Complete "
     "my_block_softmax: the softmax of the scores of the first n slots (scaled), 0 for the "
     "others.", ("q", "k", "n", "scale"), _softmax_cases, _softmax_where, SOFTMAX_STUB),
]  # fmt: skip


def make_ladder() -> list[Kernel]:
    on_cpu = backend.device().type == "cpu"  # in a child on a CPU; CUDA does not survive a fork
    return [
        Kernel(solution, NB04, task, build, params=params, compare=_masked_equal, isolate=on_cpu,
               driver=driver, diagnose=where, stub_code=stub, entry=f"my_{name}",
               todo="Write the kernel's body")
        for (name, driver, task, params, build, where, stub), solution
        in zip(RUNGS, _solutions(), strict=True)
    ]  # fmt: skip


# --- the Triton puzzle ---------------------------------------------------------------------
PUZZLE_STUB = """import triton
import triton.language as tl


@triton.jit
def my_paged_kernel(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, seq_lens_ptr, scale, max_blocks,
                    NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    seq = tl.program_id(0)      # one program per (sequence, query head): simpler than the real
    head = tl.program_id(1)     # kernel, which runs one per (sequence, kv head)
    kv_head = head // (NUM_HEADS // NUM_KV_HEADS)       # grouped-query attention
    seq_len = tl.load(seq_lens_ptr + seq)
    offs_t = tl.arange(0, BLOCK_SIZE)                   # slots of one block
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d) * scale
    m = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)   # running max
    l = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)                  # running sum
    acc = tl.zeros([HEAD_DIM], tl.float32)                                  # running sum of p * v
    for b in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):    # logical blocks, in order
        # Your code: 1. the physical block of logical block b (table row `seq`, max_blocks wide)
        #            2. which of its slots hold a token (b * BLOCK_SIZE + offs_t < seq_len)
        #            3. load K and V [BLOCK_SIZE, HEAD_DIM] of kv_head from that block, masked;
        #               element (block, slot, kv head, d) is at
        #               ((block * BLOCK_SIZE + slot) * NUM_KV_HEADS + kv_head) * HEAD_DIM + d
        #            4. scores = sum over d of q * k (masked slots: -inf)
        #            5. the online-softmax update of m, l and acc
        raise NotImplementedError("fill in the loop body")
    tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, acc / l)
"""


def _solution_kernel() -> Any:
    """The reference solution: pagedlab's teaching kernel, one page per loop step."""
    from pagedlab.attention import kernels  # imports triton, after backend set the mode

    return kernels.paged_attention_one_page_kernel


def _batch(lens: list[int], block_size: int, heads: int, kv_heads: int, dim: int,
           seed: int, spare: int = 2) -> tuple[Any, ...]:  # fmt: skip
    """A batch in scattered blocks (``spare`` blocks nobody owns); a large score late in each
    sequence, so the max grows; every slot no sequence owns holds NaN."""
    generator = torch.Generator().manual_seed(seed_of(seed))
    pages = [ceil_div(n, block_size) for n in lens]
    order = torch.randperm(sum(pages) + spare, generator=generator).tolist()
    rows, start = [], 0
    for p in pages:
        rows.append(order[start : start + p])
        start += p
    shape = (sum(pages) + spare, block_size, kv_heads, dim)
    key = torch.randn(shape, generator=generator)
    value = torch.randn(shape, generator=generator)
    for row, n in zip(rows, lens, strict=True):  # a large score late: the max must grow
        key[row[-1], (n - 1) % block_size] *= 4
    query = torch.randn(len(lens), heads, dim, generator=generator)
    tables = block_tables_tensor(rows)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    key, value = _poison(key, value, tables, seq_lens)
    return query, key, value, tables, seq_lens


def _one_sequence(blocks: list[int], n: int, block_size: int, dim: int, seed: int,
                  big: tuple[int, float] | None = None) -> tuple[Any, ...]:  # fmt: skip
    """One sequence of ``n`` tokens in ``blocks`` (one head); ``big = (position, score)`` gives
    one position that score after scaling, the others about 1 or less."""
    generator = torch.Generator().manual_seed(seed_of(seed))
    shape = (max(blocks) + 2, block_size, 1, dim)
    key = torch.randn(shape, generator=generator) * 0.5
    value = torch.randn(shape, generator=generator)
    query = torch.randn(1, 1, dim, generator=generator)
    if big is not None:
        pos, score = big
        query = torch.ones(1, 1, dim)
        slot = (blocks[pos // block_size], pos % block_size)
        key[slot] = score / (dim * dim**-0.5)  # q . k * scale = score
    tables = block_tables_tensor([blocks])
    seq_lens = torch.tensor([n], dtype=torch.int32)
    key, value = _poison(key, value, tables, seq_lens)
    return query, key, value, tables, seq_lens


def _example_batch() -> tuple[Any, ...]:
    key = torch.zeros(8, 4, 1, 1)
    value = torch.zeros(8, 4, 1, 1)
    for pos in range(5):  # the example: blocks [4, 1], values 1 .. 5, output 3
        value[[4, 1][pos // 4], pos % 4, 0, 0] = pos + 1.0
    tables = block_tables_tensor([[4, 1]])
    seq_lens = torch.tensor([5], dtype=torch.int32)
    key, value = _poison(key, value, tables, seq_lens)
    return torch.ones(1, 1, 1), key, value, tables, seq_lens


# (why it exists, its batch); every slot a batch does not own (the empty tail of each last
# block, spare blocks) holds NaN, and the caches sit between NaN guard blocks
def _case_specs() -> list[tuple[str, tuple[Any, ...]]]:
    return [
        ("one full block, in physical block 3 (not 0): the table lookup, the K/V offsets and "
         "the scores", _one_sequence([3], 4, 4, 4, seed=40)),
        ("one block with 3 of 4 slots filled; the empty slot holds NaN: K and V loads must "
         "be masked past seq_len", _one_sequence([2], 3, 4, 4, seed=41)),
        ("3 full blocks, the largest score in the last: l and acc are rescaled when the max "
         "grows, and m carries over to the next block", _one_sequence([5, 0, 3], 12, 4, 4,
                                                                     seed=42, big=(10, 6.0))),
        ("a score of 100 after scaling in the first block, small ones after it: without the "
         "running max (exp of a raw score, or of a gap to a block's own max) exp overflows "
         "float32", _one_sequence([1, 4, 2], 12, 4, 4, seed=43, big=(1, 100.0))),
        ("a score of 100 after scaling in the last block: the same overflow, the other way",
         _one_sequence([2, 0], 7, 4, 4, seed=44, big=(6, 100.0))),
        ("4 query heads on 2 kv heads: query heads 0-1 read kv head 0, 2-3 kv head 1",
         _batch([13, 6], 4, 4, 2, 8, seed=45)),
        ("the example of notebook 3: one scalar head, 5 tokens in blocks [4, 1], values 1..5",
         _example_batch()),
        ("blocks of 1: one slot per block, 3 sequences", _batch([3, 1, 6], 1, 2, 1, 4, seed=46)),
        ("the paper's blocks of 16 and head_dim 16; rows of 3, 1 and 2 blocks (the table is "
         "padded with -1)", _batch([40, 5, 17], 16, 2, 1, 16, seed=47)),
    ]  # fmt: skip


GENERATED = [([5, 8, 1], 4, 2, 1, 4, 48), ([3, 9, 16], 8, 2, 2, 2, 49)]  # _batch's, seeded


def _cases() -> list[Case]:
    fixed = [(*args, why, CATCHES.get(k, ())) for k, (why, args) in enumerate(_case_specs())]
    batches = (_batch(*spec) for spec in GENERATED)
    return cases(fixed, lambda _rng: next(batches), len(GENERATED), expect=reference_attention,
                 label=_label)  # fmt: skip


def _label(query: Any, key: Any, _value: Any, tables: Any, seq_lens: Any) -> str:
    heads, dim = query.shape[1], query.shape[2]
    return (
        f"{len(seq_lens)} sequence(s) of lengths {seq_lens.tolist()}, blocks {tables.tolist()} "
        f"of {key.shape[1]}, {heads} query head(s) on {key.shape[2]} kv head(s), head_dim {dim}"
    )


def _diagnose(fn: Any, case: Case) -> str:
    """Which sequence and head differ, and the first block whose fold goes wrong (facts only:
    the case's why says what it tests)."""
    query, key, value, tables, seq_lens = case.args
    got = fn(*case.args)
    bad = ~torch.isclose(got, case.expected, rtol=1e-4, atol=1e-4).all(dim=-1)
    if not bool(bad.any()):
        return ""
    seq, head = (int(x) for x in bad.nonzero()[0])
    block_size, n = key.shape[1], int(seq_lens[seq])
    text = (
        f"sequence {seq}, head {head} (of {int(bad.sum())} wrong (sequence, head) pairs): "
        f"expected {_vec(case.expected[seq, head])}, got {_vec(got[seq, head])}"
    )
    if bool(torch.isnan(got[seq, head]).any()):
        text += " (NaN)"
    pages = ceil_div(n, block_size)
    for k in range(1, pages + 1):
        cut = min(k * block_size, n)
        args = (
            query[seq : seq + 1],
            key,
            value,
            tables[seq : seq + 1],
            torch.tensor([cut], dtype=torch.int32),
        )
        if not torch.allclose(
            fn(*args)[0, head], reference_attention(*args)[0, head], rtol=1e-4, atol=1e-4
        ):
            physical, filled = int(tables[seq, k - 1]), cut - (k - 1) * block_size
            cut_at = f"after its first {k - 1} it is right" if k > 1 else "it is its first"
            text += (
                f"\n            cut after {k} block(s) it is wrong, {cut_at}: logical block "
                f"{k - 1} (physical {physical}, {filled} of {block_size} slots hold tokens) is the "
                "first that goes wrong."
            )
            break
    return text


def _poison(
    key: torch.Tensor, value: torch.Tensor, tables: torch.Tensor, seq_lens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of the caches with NaN in every slot that holds no token of the batch."""
    block_size = key.shape[1]
    used = torch.zeros(key.shape[:2], dtype=torch.bool)
    for row, n in zip(tables.tolist(), seq_lens.tolist(), strict=True):
        for pos in range(n):
            used[row[pos // block_size], pos % block_size] = True
    k, v = key.clone(), value.clone()
    k[~used], v[~used] = float("nan"), float("nan")
    return k, v


def _vec(t: torch.Tensor) -> str:
    return (
        "[" + ", ".join(f"{x:.4f}" for x in t.tolist()[:8]) + (", ...]" if t.numel() > 8 else "]")
    )


def _folded(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tables: torch.Tensor,
            seq_lens: torch.Tensor, inverted: bool = False, rescale: bool = True,
            keep_m: bool = True, block_max: bool = False, lookup: bool = True,
            groups: bool = True) -> torch.Tensor:  # fmt: skip
    """The kernel's fold, block by block, in torch: right with the defaults, else the mistake
    a switch names (what a learner's kernel with that mistake returns)."""
    heads, dim = query.shape[1], query.shape[2]
    size, kv_heads = key.shape[1], key.shape[2]
    out = torch.empty(query.shape, dtype=torch.float32)
    for s, n in enumerate(int(x) for x in seq_lens):
        for h in range(heads):
            kv = h // (heads // kv_heads) if groups else h % kv_heads
            q = query[s, h].float() * dim**-0.5
            m, l_sum, acc = torch.tensor(float("-inf")), torch.tensor(0.0), torch.zeros(dim)
            for b in range(ceil_div(n, size)):
                block = int(tables[s, b]) if lookup else b
                filled = min(size, n - b * size)
                k, v = key[block, :filled, kv].float(), value[block, :filled, kv].float()
                scores = k @ q
                m_new = scores.max() if block_max else torch.maximum(m, scores.max())
                alpha = torch.exp(m_new - m) if inverted else torch.exp(m - m_new)
                alpha = alpha if rescale else torch.tensor(1.0)
                p = torch.exp(scores - m_new)
                l_sum, acc = l_sum * alpha + p.sum(), acc * alpha + p @ v
                m = m_new if keep_m else m
            out[s, h] = acc / l_sum
    return out


def _mistake(hint: str, key: str, **switches: bool) -> Mistake:
    def answer(*args: torch.Tensor) -> torch.Tensor:
        query, key_cache, value_cache, tables, seq_lens = args
        return _folded(query, key_cache, value_cache, tables, seq_lens, **switches)

    return Mistake(hint, answer, key)


MISTAKES = [
    _mistake("the factor applied to the old l and acc is inverted: when the max grows the old "
             "terms must get smaller (a factor of at most 1), and on the first block, where m "
             "is -inf, the factor is 0, never infinite.", "inverted", inverted=True),
    _mistake("l and acc keep their old scale when a later block raises the max: the old terms "
             "stay too large next to the new ones.", "no_rescale", rescale=False),
    _mistake("m is not carried from one block to the next: each block compares with the "
             "initial max again.", "keep_m", keep_m=False),
    _mistake("m_new is the block's own max: it is the running max over every block so far.",
             "block_max", block_max=True),
    _mistake("logical block b is read from physical block b: read its physical block from the "
             "block table.", "no_lookup", lookup=False),
    _mistake("query heads share a kv head in consecutive groups (heads 0-1 on kv head 0 here), "
             "not interleaved.", "groups", groups=False),
]  # fmt: skip
CATCHES = {0: ("inverted", "no_lookup"), 2: ("no_rescale", "keep_m", "inverted"),
           3: ("block_max", "inverted"), 5: ("groups",)}  # fmt: skip


def make_puzzle() -> Kernel:
    return Kernel(
        name="paged_kernel",
        notebook=NB04,
        task="The Triton puzzle: complete the loop body of my_paged_kernel (table lookup, masked "
        "K/V loads, scores, online-softmax update); checked against reference_attention.",
        params=("query", "key_cache", "value_cache", "block_tables", "seq_lens"),
        cases=_cases,
        solution=_solution_kernel(),
        compare=tensors_equal,
        isolate=backend.device().type == "cpu",  # in a child on a CPU; CUDA does not fork
        budget_s=60.0,
        diagnose=_diagnose,
        driver="paged",
        mistakes=MISTAKES,
        todo="Write the loop body",
        stub_code=PUZZLE_STUB,
    )
