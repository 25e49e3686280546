"""The Triton kernels: paged decode attention, twice, and reshape-and-cache (writing K/V by slot).

Read these as teaching material first, in file order. All kernels take raw tensors (plus
strides, for the tuned ones) and trust their inputs: every check lives in
:mod:`pagedlab.attention.validate` (called by :mod:`pagedlab.attention.ops` and
:mod:`pagedlab.attention.kv_cache`, which validate and then call the ``launch_*`` functions
below); the tuned kernel's tile sizes, pages per step, warps and splits are chosen in
:mod:`pagedlab.attention.tuning`.

The teaching kernel (``paged_attention_one_page_kernel``)
    PagedAttention in one loop: one program per (sequence, query head), one page (block) per
    loop step. Each step loads the page's physical block id from the block table, loads its
    K and V rows of the program's kv head (slots past ``seq_len`` masked: never read), scores
    them and folds them into an online softmax (running max ``m``, running sum ``l``,
    accumulator ``acc``, the last two rescaled by ``exp(m - m_new)`` when the max grows).
    One loop step is one row of :func:`pagedlab.paged_attention_steps`. It is the Triton
    puzzle's solution (notebook 04) and :func:`pagedlab.attention.ops.paged_attention_one_page`
    launches it. Its simplifications: contiguous tensors (offsets computed from the shapes),
    ``block_size`` and ``head_dim`` powers of two (``tl.arange`` needs them; no padding),
    int32 offsets, and each K/V page loaded once per query head, not once per group.

Paged decode attention, tuned (``paged_attention_kernel``)
    The same loop, several pages a step, split across programs. One program per (sequence,
    kv head) owns the ``GROUP = num_heads // num_kv_heads`` query heads that share that kv
    head (grouped-query attention), so each K/V page is loaded once for the whole group. It
    walks the sequence's logical blocks in order, ``PAGES`` blocks per step; for each it
    loads the *physical* block id from the block table (an integer load: table entries past
    the sequence's last block are padding and are masked off, never read), loads that
    page's K tile, scores it, and folds it into an online softmax: a running max ``m``, a
    running sum ``l_sum`` and an accumulator ``acc`` that is rescaled by
    ``exp(m_old - m_new)`` whenever the max grows.
    All arithmetic is fp32 whatever the storage dtype; the output is cast back.

    Optionally (``SPLITS > 1``, flash-decoding) a sequence's pages are cut into slices, one
    program each; each stores its unnormalised ``(acc, m, l_sum)`` and
    :func:`merge_splits` combines them in torch with the same rescaling rule. On a GPU this
    gives small batches enough programs; in the interpreter it is off unless asked for.

    Any ``block_size >= 1`` and ``head_dim >= 1`` work: tiles are padded to the next power
    of two (Triton's ``tl.arange`` needs one) and the padding is masked on load and store.

The interpreter's launch of the tuned loop (``paged_attention_lanes_kernel``)
    The same loop, the same arithmetic, for ``LANES`` (sequence, kv head) pairs at once:
    every tile gains a leading lane axis, each lane reads its own sequence's block-table
    row and its own kv head's K/V, and lanes that finish early (or lanes past the last,
    which repeat it and are not stored) only add masked slots. Under the interpreter a
    program costs a few ms whatever its tiles hold, so :mod:`pagedlab.attention.tuning`
    gives one program all the lanes of a small batch (``lanes_per_program``); compiled, or
    split, launches always use ``paged_attention_kernel``. Its output equals the one-lane
    kernel's bit for bit (``tests/attention/test_kernel_grid.py``).

Reshape-and-cache (``reshape_and_cache_kernel``)
    Each new token reads its flat slot ``s`` from the slot mapping, splits it into
    (physical block ``s // block_size``, offset ``s % block_size``) and stores its
    ``[num_kv_heads, head_dim]`` key and value there. A program handles ``BLOCK_N`` tokens
    (a few on a GPU, the whole batch in the interpreter, which pays per program).

Dtypes: fp32 and fp16 everywhere; bf16 natively where compiled. Older Triton interpreters
have no bf16, so under the interpreter :mod:`pagedlab.attention.ops` upcasts bf16 inputs to
fp32 (exact) before launching and casts the result back; documented there.

Interpreter note: the interpreter executes every ``tl`` call as numpy work, for every
program of the grid, so its cost is (programs) x (loop steps) x (tl calls per step), nearly
independent of the tiles' sizes. The interpreter's launch keeps the grid at one program for
a small batch (the lanes kernel) and the loop body short; see
``benchmarks/bench_kernel_cpu.py`` for the measured cost of the example call.
"""

from __future__ import annotations

from pagedlab.attention import backend  # sets TRITON_INTERPRET before triton is imported

backend.require_triton()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pagedlab.attention import tuning  # noqa: E402
from pagedlab.attention.tuning import next_power_of_two  # noqa: E402


@triton.jit
def paged_attention_one_page_kernel(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, seq_lens_ptr,
                                    scale, max_blocks,
                                    NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr,
                                    BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):  # fmt: skip
    """PagedAttention, one page per loop step: out[seq, head] = softmax(scale q.K) V."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // (NUM_HEADS // NUM_KV_HEADS)  # grouped-query attention
    seq_len = tl.load(seq_lens_ptr + seq)
    offs_t = tl.arange(0, BLOCK_SIZE)  # the slots of one page
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d).to(tl.float32) * scale
    m = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)  # running max
    l = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)  # noqa: E741  (running sum)
    acc = tl.zeros([HEAD_DIM], tl.float32)  # running sum of p * v
    for b in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):  # logical blocks, in order
        physical = tl.load(table_ptr + seq * max_blocks + b)  # logical b -> physical
        valid = b * BLOCK_SIZE + offs_t < seq_len  # the last block may be partly filled
        slot = (physical * BLOCK_SIZE + offs_t[:, None]) * NUM_KV_HEADS + kv_head
        offs = slot * HEAD_DIM + offs_d[None, :]
        k = tl.load(k_ptr + offs, mask=valid[:, None], other=0.0).to(tl.float32)
        v = tl.load(v_ptr + offs, mask=valid[:, None], other=0.0).to(tl.float32)
        scores = tl.where(valid, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=0))
        alpha = tl.exp(m - m_new)  # 0 on the first block, < 1 when the max grows
        p = tl.exp(scores - m_new)
        l = l * alpha + tl.sum(p, axis=0)  # noqa: E741
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, acc / l)


# The tuned kernel: the same loop, several pages a step, split across programs. One program
# serves a kv head's whole group of query heads (each page loaded once for the group), any
# block_size and head_dim (tiles padded to powers of two and masked), int64 offsets, strides.


@triton.jit
def paged_attention_kernel(
    out_ptr,  # [num_seqs, num_heads, head_dim]
    q_ptr,  # [num_seqs, num_heads, head_dim]
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache_ptr,  # same shape as k_cache
    block_tables_ptr,  # int32 [num_seqs, max_blocks_per_seq]
    seq_lens_ptr,  # int32 [num_seqs]
    part_acc_ptr,  # fp32 [num_seqs, num_heads, SPLITS, head_dim]; used only when SPLITS > 1
    part_ml_ptr,  # fp32 [num_seqs, num_heads, SPLITS, 2]: running max, running sum
    scale,  # float: softmax scale, usually head_dim ** -0.5
    pages_per_split,  # int: pages each split handles (>= every sequence's pages if SPLITS == 1)
    stride_qs,
    stride_qh,
    stride_qd,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_kd,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_vd,
    stride_bts,
    stride_os,
    stride_oh,
    stride_od,
    BLOCK_SIZE: tl.constexpr,  # positions per page (any value >= 1)
    HEAD_DIM: tl.constexpr,  # any value >= 1
    GROUP: tl.constexpr,  # query heads per kv head
    PAGES: tl.constexpr,  # pages folded in per loop step (tuning.pages_per_step)
    BLOCK_T: tl.constexpr,  # next power of two >= BLOCK_SIZE
    BLOCK_D: tl.constexpr,  # next power of two >= HEAD_DIM
    BLOCK_G: tl.constexpr,  # next power of two >= GROUP
    SPLITS: tl.constexpr,  # slices of each sequence's pages, one program each (flash-decoding)
):
    # Index arithmetic is int64: offsets into a large cache overflow int32, and (a bonus
    # under the interpreter) int64 math skips the interpreter's per-op overflow checks.
    seq = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2).to(tl.int64)  # 0 unless the pages are split across programs
    seq_len = tl.load(seq_lens_ptr + seq).to(tl.int64)  # int64: seq_len + BLOCK_SIZE fits

    # The group of query heads that read this kv head: [BLOCK_G, BLOCK_D], fp32, pre-scaled.
    offs_g = tl.arange(0, BLOCK_G).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)
    head = kv_head * GROUP + offs_g
    gd_mask = (offs_g < GROUP)[:, None] & (offs_d < HEAD_DIM)[None, :]
    q = tl.load(
        q_ptr + seq * stride_qs + head[:, None] * stride_qh + offs_d[None, :] * stride_qd,
        mask=gd_mask,
        other=0.0,
    ).to(tl.float32)
    q = q * scale

    # One step covers PAGES pages laid side by side: tile row j is (page j // BLOCK_T,
    # offset j % BLOCK_T). Offsets >= BLOCK_SIZE are power-of-two padding, masked off.
    # Everything that does not depend on the step is computed once, before the loop.
    offs_j = tl.arange(0, PAGES * BLOCK_T).to(tl.int64)
    page_in_step = offs_j // BLOCK_T
    offset = offs_j % BLOCK_T
    in_page = offset < BLOCK_SIZE
    d_mask = (offs_d < HEAD_DIM)[None, :]
    table_row = block_tables_ptr + seq * stride_bts
    k_in_page = kv_head * stride_kh + offset[:, None] * stride_kt + offs_d[None, :] * stride_kd
    v_in_page = kv_head * stride_vh + offset[:, None] * stride_vt + offs_d[None, :] * stride_vd

    m = tl.full([BLOCK_G], float("-inf"), tl.float32)  # running max of the scores
    l_sum = tl.full([BLOCK_G], 0.0, tl.float32)  # running sum of exp(score - m)
    acc = tl.full([BLOCK_G, BLOCK_D], 0.0, tl.float32)  # running sum of exp(score - m) * v

    num_pages = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE  # ceil: the last page may be partial
    first_page = split * pages_per_split  # this program's slice: [first_page, end_page)
    end_page = tl.minimum(num_pages, first_page + pages_per_split)
    for first in range(first_page, end_page, PAGES):
        logical = first + page_in_step  # logical block of each tile row
        valid = in_page & (logical < end_page) & (logical * BLOCK_SIZE + offset < seq_len)
        # The one indirection of PagedAttention: logical block -> physical block.
        # Masked: table entries past the last page (padding, e.g. -1) are never read.
        physical = tl.load(table_row + logical, mask=valid, other=0).to(tl.int64)[:, None]
        tile_mask = valid[:, None] & d_mask

        k = tl.load(k_cache_ptr + physical * stride_kb + k_in_page, mask=tile_mask, other=0.0)
        k = k.to(tl.float32)  # [PAGES * BLOCK_T, BLOCK_D]
        # scores[g, j] = q[g] . k[j]; masked rows get -inf so that exp() gives 0.
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [BLOCK_G, PAGES * BLOCK_T]
        scores = tl.where(valid[None, :], scores, float("-inf"))

        m_new = tl.maximum(m, tl.max(scores, axis=1))
        alpha = tl.exp(m - m_new)  # rescales everything summed under the old max
        p = tl.exp(scores - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, axis=1)

        v = tl.load(v_cache_ptr + physical * stride_vb + v_in_page, mask=tile_mask, other=0.0)
        v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new

    if SPLITS == 1:
        out = acc / l_sum[:, None]
        tl.store(
            out_ptr + seq * stride_os + head[:, None] * stride_oh + offs_d[None, :] * stride_od,
            out.to(out_ptr.dtype.element_ty),
            mask=gd_mask,
        )
    else:
        # Flash-decoding: store this slice's unnormalised (acc, m, l_sum); the launcher
        # merges the slices with the same rescaling rule the loop uses.
        row = (seq * tl.num_programs(1) * GROUP + head) * SPLITS + split  # [BLOCK_G]
        tl.store(part_acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=gd_mask)
        g_mask = offs_g < GROUP
        tl.store(part_ml_ptr + row * 2, m, mask=g_mask)
        tl.store(part_ml_ptr + row * 2 + 1, l_sum, mask=g_mask)


# The interpreter's launch of the same loop: several (sequence, kv head) lanes per program.
# The interpreter pays per program and per tl call, hardly per element, so one program
# that walks every lane of the batch at once costs about what one lane alone costs.


@triton.jit
def paged_attention_lanes_kernel(
    out_ptr,  # [num_seqs, num_heads, head_dim]
    q_ptr,  # [num_seqs, num_heads, head_dim]
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache_ptr,  # same shape as k_cache
    block_tables_ptr,  # int32 [num_seqs, max_blocks_per_seq]
    seq_lens_ptr,  # int32 [num_seqs]
    scale,  # float: softmax scale
    num_lanes,  # int: num_seqs * num_kv_heads
    max_pages,  # int: the largest ceil(seq_len / block_size) of the batch
    stride_qs,
    stride_qh,
    stride_qd,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_kd,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_vd,
    stride_bts,
    stride_os,
    stride_oh,
    stride_od,
    NUM_KV_HEADS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # positions per page (any value >= 1)
    HEAD_DIM: tl.constexpr,  # any value >= 1
    GROUP: tl.constexpr,  # query heads per kv head
    PAGES: tl.constexpr,  # pages folded in per loop step
    BLOCK_T: tl.constexpr,  # next power of two >= BLOCK_SIZE
    BLOCK_D: tl.constexpr,  # next power of two >= HEAD_DIM
    BLOCK_G: tl.constexpr,  # next power of two >= GROUP
    LANES: tl.constexpr,  # (sequence, kv head) pairs per program, a power of two
):
    # This program's lanes; lane i is (sequence i // NUM_KV_HEADS, kv head i % NUM_KV_HEADS),
    # one program of paged_attention_kernel each. Lanes past the last repeat the last one
    # (so no row is ever empty) and are not stored.
    first_lane = tl.program_id(0).to(tl.int64) * LANES + tl.arange(0, LANES).to(tl.int64)
    live = first_lane < num_lanes  # [LANES]
    lane = tl.minimum(first_lane, num_lanes - 1)
    seq = lane // NUM_KV_HEADS
    kv_head = lane % NUM_KV_HEADS
    seq_len = tl.load(seq_lens_ptr + seq).to(tl.int64)  # [LANES]

    # Each lane's group of query heads: q is [LANES, BLOCK_G, BLOCK_D], fp32, pre-scaled.
    offs_g = tl.arange(0, BLOCK_G).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)
    head = kv_head[:, None] * GROUP + offs_g[None, :]  # [LANES, BLOCK_G]
    gd_mask = ((offs_g < GROUP)[:, None] & (offs_d < HEAD_DIM)[None, :])[None, :, :]
    q_offs = seq[:, None, None] * stride_qs + head[:, :, None] * stride_qh
    q = tl.load(q_ptr + q_offs + offs_d[None, None, :] * stride_qd, mask=gd_mask, other=0.0)
    q = q.to(tl.float32) * scale

    # Tile row j of a step is (page j // BLOCK_T, offset j % BLOCK_T), as in the tuned kernel.
    offs_j = tl.arange(0, PAGES * BLOCK_T).to(tl.int64)
    page_in_step = offs_j // BLOCK_T
    offset = offs_j % BLOCK_T
    in_page = (offset < BLOCK_SIZE)[None, :]
    d_mask = (offs_d < HEAD_DIM)[None, None, :]
    table_row = (block_tables_ptr + seq * stride_bts)[:, None]  # [LANES, 1]
    k_in_page = (kv_head[:, None] * stride_kh + offset[None, :] * stride_kt)[:, :, None]
    k_in_page += offs_d[None, None, :] * stride_kd  # [LANES, PAGES * BLOCK_T, BLOCK_D]
    v_in_page = (kv_head[:, None] * stride_vh + offset[None, :] * stride_vt)[:, :, None]
    v_in_page += offs_d[None, None, :] * stride_vd

    m = tl.full([LANES, BLOCK_G], float("-inf"), tl.float32)  # running max
    l_sum = tl.full([LANES, BLOCK_G], 0.0, tl.float32)  # running sum of exp(score - m)
    acc = tl.full([LANES, BLOCK_G, BLOCK_D], 0.0, tl.float32)  # running sum of exp() * v
    for first in range(0, max_pages, PAGES):
        logical = (first + page_in_step)[None, :]  # [1, PAGES * BLOCK_T]
        valid = in_page & (logical * BLOCK_SIZE + offset[None, :] < seq_len[:, None])
        # The one indirection, per lane: logical block -> physical block (masked: padding
        # entries past a sequence's last page are never read).
        physical = tl.load(table_row + logical, mask=valid, other=0).to(tl.int64)[:, :, None]
        tile_mask = valid[:, :, None] & d_mask

        k = tl.load(k_cache_ptr + physical * stride_kb + k_in_page, mask=tile_mask, other=0.0)
        k = k.to(tl.float32)  # [LANES, PAGES * BLOCK_T, BLOCK_D]
        scores = tl.sum(q[:, :, None, :] * k[:, None, :, :], axis=3)  # [LANES, G, T]
        scores = tl.where(valid[:, None, :], scores, float("-inf"))

        m_new = tl.maximum(m, tl.max(scores, axis=2))  # finite: step 0 has a valid slot
        alpha = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, :, None])
        l_sum = l_sum * alpha + tl.sum(p, axis=2)

        v = tl.load(v_cache_ptr + physical * stride_vb + v_in_page, mask=tile_mask, other=0.0)
        v = v.to(tl.float32)
        acc = acc * alpha[:, :, None] + tl.sum(p[:, :, :, None] * v[:, None, :, :], axis=2)
        m = m_new

    out = acc / l_sum[:, :, None]
    o_offs = seq[:, None, None] * stride_os + head[:, :, None] * stride_oh
    tl.store(
        out_ptr + o_offs + offs_d[None, None, :] * stride_od,
        out.to(out_ptr.dtype.element_ty),
        mask=live[:, None, None] & gd_mask,
    )


@triton.jit
def reshape_and_cache_kernel(
    key_ptr,  # [num_tokens, num_kv_heads, head_dim], the new tokens' keys
    value_ptr,  # same shape, their values
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache_ptr,
    slot_mapping_ptr,  # int64 [num_tokens]: block * block_size + offset
    num_tokens,
    stride_kn,
    stride_kh,
    stride_kd,
    stride_vn,
    stride_vh,
    stride_vd,
    stride_ckb,
    stride_ckt,
    stride_ckh,
    stride_ckd,
    stride_cvb,
    stride_cvt,
    stride_cvh,
    stride_cvd,
    BLOCK_SIZE: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,  # tokens per program
    BLOCK_H: tl.constexpr,  # next power of two >= NUM_KV_HEADS
    BLOCK_D: tl.constexpr,  # next power of two >= HEAD_DIM
):
    # Tokens of this program, as [BLOCK_N, 1, 1]; heads [1, BLOCK_H, 1]; dims [1, 1, BLOCK_D].
    token = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)
    in_batch = token < num_tokens
    slot = tl.load(slot_mapping_ptr + token, mask=in_batch, other=0).to(tl.int64)
    block = (slot // BLOCK_SIZE)[:, None, None]  # physical block of each token
    offset = (slot % BLOCK_SIZE)[:, None, None]  # its position inside that block
    n = token[:, None, None]
    h = tl.arange(0, BLOCK_H).to(tl.int64)[None, :, None]
    d = tl.arange(0, BLOCK_D).to(tl.int64)[None, None, :]
    mask = in_batch[:, None, None] & (h < NUM_KV_HEADS) & (d < HEAD_DIM)

    k = tl.load(key_ptr + n * stride_kn + h * stride_kh + d * stride_kd, mask=mask)
    v = tl.load(value_ptr + n * stride_vn + h * stride_vh + d * stride_vd, mask=mask)
    k_dst = block * stride_ckb + offset * stride_ckt + h * stride_ckh + d * stride_ckd
    v_dst = block * stride_cvb + offset * stride_cvt + h * stride_cvh + d * stride_cvd
    tl.store(k_cache_ptr + k_dst, k, mask=mask)
    tl.store(v_cache_ptr + v_dst, v, mask=mask)


def launch_paged_attention_one_page(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Launch the teaching kernel on validated, contiguous inputs; returns a new output tensor.

    One program per (sequence, query head); ``block_size`` and ``head_dim`` must be powers of
    two and every tensor small enough for int32 offsets
    (:func:`pagedlab.attention.validate.check_one_page_kernel_fits`).
    """
    num_seqs, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    out = torch.empty_like(query)
    if num_seqs == 0:
        return out
    paged_attention_one_page_kernel[(num_seqs, num_heads)](
        out,
        query,
        key_cache,
        value_cache,
        block_tables,
        seq_lens,
        float(scale),
        block_tables.shape[1],
        NUM_HEADS=num_heads,
        NUM_KV_HEADS=num_kv_heads,
        BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim,
    )
    return out


def launch_paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    max_pages: int,
    pages_per_step: int | None = None,
    num_warps: int | None = None,
    splits: int | None = None,
    lanes: int | None = None,
) -> torch.Tensor:
    """Launch the decode kernel on already validated inputs; returns a new output tensor.

    ``max_pages`` is the largest ``ceil(seq_len / block_size)`` of the batch.
    ``pages_per_step`` (a power of two: pages one loop step folds in), ``num_warps`` and
    ``splits`` (> 1: flash-decoding slices, one program each, merged afterwards) default to
    the heuristics of :mod:`pagedlab.attention.tuning`. Pass ``pages_per_step=1`` to run
    exactly the steps :func:`pagedlab.paged_attention_steps` records. ``lanes`` > 1
    (the interpreter's default) runs ``paged_attention_lanes_kernel``: the same loop,
    that many (sequence, kv head) lanes per program; 1 runs ``paged_attention_kernel``.
    The heuristics never pick lanes > 1 for a compiled launch (checked in the interpreter
    only: no GPU test covers the lanes kernel).
    """
    num_seqs, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    compiled = backend.BACKEND == "compiled"
    sms = torch.cuda.get_device_properties(query.device).multi_processor_count if compiled else 0
    plan = tuning.plan_attention(
        interpreter=not compiled,
        sms=sms,
        num_seqs=num_seqs,
        num_kv_heads=num_kv_heads,
        block_size=block_size,
        head_dim=head_dim,
        group=num_heads // num_kv_heads,
        max_pages=max_pages,
        pages=pages_per_step,
        warps=num_warps,
        splits=splits,
        lanes=lanes,
    )
    out = torch.empty_like(query)
    if num_seqs == 0:
        return out
    if plan.lanes > 1:
        num_lanes = num_seqs * num_kv_heads
        paged_attention_lanes_kernel[(triton.cdiv(num_lanes, plan.lanes),)](
            out,
            query,
            key_cache,
            value_cache,
            block_tables,
            seq_lens,
            float(scale),
            num_lanes,
            max_pages,
            *query.stride(),
            *key_cache.stride(),
            *value_cache.stride(),
            block_tables.stride(0),
            *out.stride(),
            NUM_KV_HEADS=num_kv_heads,
            BLOCK_SIZE=block_size,
            HEAD_DIM=head_dim,
            GROUP=num_heads // num_kv_heads,
            PAGES=plan.pages_per_step,
            BLOCK_T=plan.block_t,
            BLOCK_D=plan.block_d,
            BLOCK_G=plan.block_g,
            LANES=plan.lanes,
            num_warps=plan.num_warps,
        )
        return out
    if plan.splits == 1:
        part_acc = part_ml = torch.empty(1, device=query.device)  # not read
    else:
        part = (num_seqs, num_heads, plan.splits)
        part_acc = torch.empty(*part, head_dim, device=query.device, dtype=torch.float32)
        part_ml = torch.empty(*part, 2, device=query.device, dtype=torch.float32)
    grid = (num_seqs, num_kv_heads, plan.splits)
    paged_attention_kernel[grid](
        out,
        query,
        key_cache,
        value_cache,
        block_tables,
        seq_lens,
        part_acc,
        part_ml,
        float(scale),
        plan.pages_per_split,
        *query.stride(),
        *key_cache.stride(),
        *value_cache.stride(),
        block_tables.stride(0),
        *out.stride(),
        BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim,
        GROUP=num_heads // num_kv_heads,
        PAGES=plan.pages_per_step,
        BLOCK_T=plan.block_t,
        BLOCK_D=plan.block_d,
        BLOCK_G=plan.block_g,
        SPLITS=plan.splits,
        num_warps=plan.num_warps,
    )
    if plan.splits > 1:
        out.copy_(merge_splits(part_acc, part_ml[..., 0], part_ml[..., 1]))
    return out


def merge_splits(acc: torch.Tensor, m: torch.Tensor, l_sum: torch.Tensor) -> torch.Tensor:
    """Combine per-slice softmax partials ``[..., splits(, head_dim)]`` into the output.

    Each slice's ``acc`` and ``l_sum`` were summed under its own max ``m``; rescale all to
    the overall max, then divide: the same rule the kernel's loop applies step by step.
    A slice with no pages has ``m = -inf`` and weight 0.
    """
    weight = torch.exp(m - m.amax(dim=-1, keepdim=True))
    numerator = (acc * weight[..., None]).sum(dim=-2)
    return numerator / (l_sum * weight).sum(dim=-1)[..., None]


def launch_reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write ``key[i]``/``value[i]`` into slot ``slot_mapping[i]`` of the caches, in place.

    Inputs must already be validated (slots in range and distinct, shapes and dtypes
    matching); see :meth:`pagedlab.attention.kv_cache.PagedKVCache.write`.
    """
    num_tokens, num_kv_heads, head_dim = key.shape
    if num_tokens == 0:
        return
    block_h, block_d = next_power_of_two(num_kv_heads), next_power_of_two(head_dim)
    interpreter = backend.BACKEND == "interpreter"
    block_n = tuning.reshape_and_cache_block_n(interpreter, num_tokens, block_h, block_d)
    grid = (triton.cdiv(num_tokens, block_n),)
    reshape_and_cache_kernel[grid](
        key,
        value,
        key_cache,
        value_cache,
        slot_mapping,
        num_tokens,
        *key.stride(),
        *value.stride(),
        *key_cache.stride(),
        *value_cache.stride(),
        BLOCK_SIZE=key_cache.shape[1],
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_N=block_n,
        BLOCK_H=block_h,
        BLOCK_D=block_d,
    )
