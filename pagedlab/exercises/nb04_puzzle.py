"""Notebook 04's Triton puzzle: the loop body of a paged kernel, against
:func:`pagedlab.reference_attention`. Every cache slot no sequence owns holds NaN (vLLM's CUDA
kernel zeroes exactly those V values "since they may contain NaNs"), so an unmasked load, a
padding entry followed or a block too far reads NaN. ``BLOCK_SIZE``, ``HEAD_DIM``: powers of 2.
"""

from __future__ import annotations

from typing import Any

import torch

from pagedlab.attention import backend
from pagedlab.attention.ops import block_tables_tensor, reference_attention
from pagedlab.exercises.nb04 import NB04
from pagedlab.grade.cases import Case, Mistake, cases, seed_of
from pagedlab.grade.core import Kernel
from pagedlab.grade.tensors import paged_where, tensors_equal
from pagedlab.ground.checks import ceil_div

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
        ("2 blocks, the second holds 3 of 4 tokens: a slot's position is b * BLOCK_SIZE + its "
         "offset, so the mask counts from the block's first position",
         _one_sequence([1, 3], 7, 4, 4, seed=50, big=(5, 4.0))),
        ("a score of 100 after scaling in the first block, small ones after it: without the "
         "running max (exp of a raw score, or of a gap to a block's own max) exp overflows "
         "float32", _one_sequence([1, 4, 2], 12, 4, 4, seed=43, big=(1, 100.0))),
        ("a score of 100 after scaling in the last block: the same overflow, the other way",
         _one_sequence([2, 0], 7, 4, 4, seed=44, big=(6, 100.0))),
        ("2 sequences, one head each: sequence s reads row s of the block table (max_blocks "
         "entries a row)", _batch([6, 5], 4, 1, 1, 4, seed=51)),
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
    _mistake("the factor applied to the old l and acc is inverted, or p subtracts the old max: "
             "on the first block, where m is -inf, either is infinite. p = exp(scores - m_new), "
             "and the factor exp(m - m_new) is at most 1 (0 on the first block).", "inverted",
             inverted=True),
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
           4: ("block_max", "inverted"), 7: ("groups",)}  # fmt: skip


def make_puzzle() -> Kernel:
    return Kernel(_solution_kernel(), NB04, name="paged_kernel",
        task="The Triton puzzle: complete the loop body of my_paged_kernel (table lookup, masked "
        "K/V loads, scores, online-softmax update); checked against reference_attention.",
        params=("query", "key_cache", "value_cache", "block_tables", "seq_lens"), cases=_cases,
        compare=tensors_equal, budget_s=60.0, diagnose=paged_where, driver="paged",
        isolate=backend.device().type == "cpu",  # in a child on a CPU; CUDA does not fork
        mistakes=MISTAKES, todo="Write the loop body", stub_code=PUZZLE_STUB)  # fmt: skip
