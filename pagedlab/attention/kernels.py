"""The Triton kernels: paged decode attention, twice, and reshape-and-cache (writing K/V by slot).

Read them in file order. They take raw tensors (plus strides, for the tuned ones) and trust
their inputs: every check lives in :mod:`pagedlab.attention.validate`; they are launched by
:mod:`pagedlab.attention.launch` (with the tile sizes, pages per step, warps and splits of
:mod:`pagedlab.attention.tuning`).

- ``paged_attention_one_page_kernel``, the teaching kernel: one program per (sequence, query
  head), one page (block) per step, folded into an online softmax; one step is one row of
  :func:`pagedlab.paged_attention_steps` (notebook 04's puzzle). Contiguous tensors,
  ``block_size`` and ``head_dim`` powers of two, int32 offsets.
- ``paged_attention_kernel``, tuned: the same loop (``fold_pages``), ``PAGES`` pages a step,
  one program per (sequence, kv head) for its whole group of query heads; any ``block_size``
  and ``head_dim`` (tiles padded, masked), int64 offsets, fp32 arithmetic. ``SPLITS > 1``
  (flash-decoding): one program per slice of pages, merged by ``launch.merge_splits``.
- ``reshape_and_cache_kernel``: flat slot ``s`` is (block ``s // block_size``, offset
  ``s % block_size``); each new token's key and value are stored there.
"""

from __future__ import annotations

from pagedlab.attention import backend  # sets TRITON_INTERPRET before triton is imported

backend.require_triton()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


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


@triton.jit
def fold_pages(q, seq_len, end_page, table_row, kv_head, start, stop, k_cache_ptr, v_cache_ptr,
               stride_kb, stride_kt, stride_kh, stride_kd,
               stride_vb, stride_vt, stride_vh, stride_vd,
               BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, PAGES: tl.constexpr,
               BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    """The tuned loop: pages ``[start, stop)``, ``PAGES`` a step, folded into an online softmax.

    ``q`` is ``[*, BLOCK_G, BLOCK_D]`` (fp32, pre-scaled); ``seq_len``, ``end_page`` (the
    first page not read), ``table_row`` (a pointer) and ``kv_head`` are scalars or ``[*, 1]``:
    ``*`` is no axis for the tuned kernel, a lane axis for the interpreter's lanes kernel.
    Returns the running max ``m`` and sum ``l_sum`` ``[*, BLOCK_G]``, and ``acc``
    ``[*, BLOCK_G, BLOCK_D]``, the sum of ``exp(score - m) * v``.
    """
    # One step covers PAGES pages laid side by side: tile row j is (page j // BLOCK_T,
    # offset j % BLOCK_T). Offsets >= BLOCK_SIZE are power-of-two padding, masked off.
    # Everything that does not depend on the step is computed once, before the loop.
    offs_j = tl.arange(0, PAGES * BLOCK_T).to(tl.int64)
    page_in_step = offs_j // BLOCK_T
    offset = offs_j % BLOCK_T
    in_page = offset < BLOCK_SIZE
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)
    d_mask = (offs_d < HEAD_DIM)[None, :]
    head = tl.expand_dims(kv_head, -1)  # broadcasts over the tile [PAGES * BLOCK_T, BLOCK_D]
    k_in_page = head * stride_kh + offset[:, None] * stride_kt + offs_d[None, :] * stride_kd
    v_in_page = head * stride_vh + offset[:, None] * stride_vt + offs_d[None, :] * stride_vd

    acc = tl.zeros_like(q)  # running sum of exp(score - m) * v
    l_sum = tl.sum(acc, axis=-1)  # running sum of exp(score - m): 0
    m = l_sum + float("-inf")  # running max of the scores
    for first in range(start, stop, PAGES):
        logical = first + page_in_step  # logical block of each tile row
        valid = in_page & (logical < end_page) & (logical * BLOCK_SIZE + offset < seq_len)
        # The one indirection of PagedAttention: logical block -> physical block.
        # Masked: table entries past the last page (padding, e.g. -1) are never read.
        physical = tl.expand_dims(tl.load(table_row + logical, mask=valid, other=0), -1)
        physical = physical.to(tl.int64)
        tile_mask = tl.expand_dims(valid, -1) & d_mask

        k = tl.load(k_cache_ptr + physical * stride_kb + k_in_page, mask=tile_mask, other=0.0)
        k = k.to(tl.float32)  # [*, PAGES * BLOCK_T, BLOCK_D]
        # scores[g, j] = q[g] . k[j]; masked rows get -inf so that exp() gives 0.
        scores = tl.sum(tl.expand_dims(q, -2) * tl.expand_dims(k, -3), axis=-1)  # [*, G, T]
        scores = tl.where(tl.expand_dims(valid, -2), scores, float("-inf"))

        m_new = tl.maximum(m, tl.max(scores, axis=-1))
        alpha = tl.exp(m - m_new)  # rescales everything summed under the old max
        p = tl.exp(scores - tl.expand_dims(m_new, -1))
        l_sum = l_sum * alpha + tl.sum(p, axis=-1)

        v = tl.load(v_cache_ptr + physical * stride_vb + v_in_page, mask=tile_mask, other=0.0)
        v = v.to(tl.float32)
        pv = tl.sum(tl.expand_dims(p, -1) * tl.expand_dims(v, -3), axis=-2)
        acc = acc * tl.expand_dims(alpha, -1) + pv
        m = m_new
    return m, l_sum, acc


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
    q_offs = seq * stride_qs + head[:, None] * stride_qh + offs_d[None, :] * stride_qd
    q = tl.load(q_ptr + q_offs, mask=gd_mask, other=0.0).to(tl.float32) * scale

    num_pages = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE  # ceil: the last page may be partial
    first_page = split * pages_per_split  # this program's slice: [first_page, end_page)
    end_page = tl.minimum(num_pages, first_page + pages_per_split)
    m, l_sum, acc = fold_pages(
        q, seq_len, end_page, block_tables_ptr + seq * stride_bts, kv_head, first_page, end_page,
        k_cache_ptr, v_cache_ptr, stride_kb, stride_kt, stride_kh, stride_kd,
        stride_vb, stride_vt, stride_vh, stride_vd, BLOCK_SIZE, HEAD_DIM, PAGES, BLOCK_T, BLOCK_D,
    )  # fmt: skip

    if SPLITS == 1:
        out = acc / l_sum[:, None]
        o_offs = seq * stride_os + head[:, None] * stride_oh + offs_d[None, :] * stride_od
        tl.store(out_ptr + o_offs, out.to(out_ptr.dtype.element_ty), mask=gd_mask)
    else:
        # Flash-decoding: store this slice's unnormalised (acc, m, l_sum); the launcher
        # merges the slices with the same rescaling rule the loop uses.
        row = (seq * tl.num_programs(1) * GROUP + head) * SPLITS + split  # [BLOCK_G]
        tl.store(part_acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=gd_mask)
        g_mask = offs_g < GROUP
        tl.store(part_ml_ptr + row * 2, m, mask=g_mask)
        tl.store(part_ml_ptr + row * 2 + 1, l_sum, mask=g_mask)


@triton.jit
def reshape_and_cache_kernel(
    key_ptr,  # [num_tokens, num_kv_heads, head_dim], the new tokens' keys
    value_ptr,  # same shape, their values
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache_ptr,
    slot_mapping_ptr,  # int64 [num_tokens]: block * block_size + offset
    num_tokens,
    stride_kn, stride_kh, stride_kd,  # key: token, kv head, dim
    stride_vn, stride_vh, stride_vd,  # value: the same
    stride_ckb, stride_ckt, stride_ckh, stride_ckd,  # key cache: block, slot, kv head, dim
    stride_cvb, stride_cvt, stride_cvh, stride_cvd,  # value cache: the same
    BLOCK_SIZE: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,  # tokens per program
    BLOCK_H: tl.constexpr,  # next power of two >= NUM_KV_HEADS
    BLOCK_D: tl.constexpr,  # next power of two >= HEAD_DIM
):  # fmt: skip
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
