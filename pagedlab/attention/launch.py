"""Launching the kernels of :mod:`pagedlab.attention.kernels`, and the interpreter's form of the
tuned one.

Each ``launch_*`` takes inputs already validated (:mod:`pagedlab.attention.validate`), picks
the plan of :mod:`pagedlab.attention.tuning` and launches once. ``paged_attention_lanes_kernel``
runs the tuned loop (``kernels.fold_pages``) for ``LANES`` (sequence, kv head) pairs at once:
the interpreter costs a few ms per program whatever its tiles hold, so one program for a small
batch costs about what one lane does (``benchmarks/bench_kernel_cpu.py``); lanes past the last
repeat it and are not stored. Its outputs equal the tuned kernel's bit for bit
(``tests/attention/test_kernel_grid.py``).
"""

from __future__ import annotations

from pagedlab.attention import backend, tuning  # backend first: sets TRITON_INTERPRET

backend.require_triton()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pagedlab.attention.kernels import (  # noqa: E402
    fold_pages,
    paged_attention_kernel,
    paged_attention_one_page_kernel,
    reshape_and_cache_kernel,
)
from pagedlab.attention.tuning import next_power_of_two  # noqa: E402


@triton.jit
def paged_attention_lanes_kernel(
    out_ptr,  # [num_seqs, num_heads, head_dim]
    q_ptr,  # [num_seqs, num_heads, head_dim]
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache_ptr,  # same shape as k_cache
    block_tables_ptr,  # int32 [num_seqs, max_blocks_per_seq]
    seq_lens_ptr,  # int32 [num_seqs]
    part_acc_ptr,  # unused: the tuned kernel's arguments, so that one launch serves both
    part_ml_ptr,  # unused
    scale,  # float: softmax scale
    max_pages,  # int: the largest ceil(seq_len / block_size) of the batch
    stride_qs, stride_qh, stride_qd,
    stride_kb, stride_kt, stride_kh, stride_kd,
    stride_vb, stride_vt, stride_vh, stride_vd,
    stride_bts,
    stride_os, stride_oh, stride_od,
    num_lanes,  # int: num_seqs * num_kv_heads
    NUM_KV_HEADS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # positions per page (any value >= 1)
    HEAD_DIM: tl.constexpr,  # any value >= 1
    GROUP: tl.constexpr,  # query heads per kv head
    PAGES: tl.constexpr,  # pages folded in per loop step
    BLOCK_T: tl.constexpr,  # next power of two >= BLOCK_SIZE
    BLOCK_D: tl.constexpr,  # next power of two >= HEAD_DIM
    BLOCK_G: tl.constexpr,  # next power of two >= GROUP
    LANES: tl.constexpr,  # (sequence, kv head) pairs per program, a power of two
):  # fmt: skip
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
    q_offs = seq[:, None, None] * stride_qs + head[:, :, None] * stride_qh + offs_d * stride_qd
    q = tl.load(q_ptr + q_offs, mask=gd_mask, other=0.0).to(tl.float32) * scale

    _, l_sum, acc = fold_pages(
        q, seq_len[:, None], max_pages, (block_tables_ptr + seq * stride_bts)[:, None],
        kv_head[:, None], 0, max_pages, k_cache_ptr, v_cache_ptr,
        stride_kb, stride_kt, stride_kh, stride_kd, stride_vb, stride_vt, stride_vh, stride_vd,
        BLOCK_SIZE, HEAD_DIM, PAGES, BLOCK_T, BLOCK_D,
    )  # fmt: skip
    out = (acc / l_sum[:, :, None]).to(out_ptr.dtype.element_ty)
    o_offs = seq[:, None, None] * stride_os + head[:, :, None] * stride_oh + offs_d * stride_od
    tl.store(out_ptr + o_offs, out, mask=live[:, None, None] & gd_mask)


def launch_paged_attention_one_page(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Launch the teaching kernel, one program per (sequence, query head), on validated
    contiguous inputs that fit it (``validate.check_one_page_kernel_fits``); a new output."""
    num_seqs, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    out = torch.empty_like(query)
    if num_seqs == 0:
        return out
    tensors = (out, query, key_cache, value_cache, block_tables, seq_lens)
    paged_attention_one_page_kernel[(num_seqs, num_heads)](
        *tensors, float(scale), block_tables.shape[1], NUM_HEADS=num_heads,
        NUM_KV_HEADS=num_kv_heads, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip
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
    """Launch the decode kernel on validated inputs; returns a new output tensor.

    ``max_pages`` is the batch's largest ``ceil(seq_len / block_size)``; the plan's other
    sizes default to :mod:`pagedlab.attention.tuning`'s heuristics (``pages_per_step=1``: the
    steps :func:`pagedlab.paged_attention_steps` records). ``lanes > 1`` (the interpreter's
    default, never compiled) runs :func:`paged_attention_lanes_kernel`.
    """
    num_seqs, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    group, compiled = num_heads // num_kv_heads, backend.BACKEND == "compiled"
    sms = torch.cuda.get_device_properties(query.device).multi_processor_count if compiled else 0
    plan = tuning.plan_attention(
        interpreter=not compiled, sms=sms, num_seqs=num_seqs, num_kv_heads=num_kv_heads,
        block_size=block_size, head_dim=head_dim, group=group, max_pages=max_pages,
        pages=pages_per_step, warps=num_warps, splits=splits, lanes=lanes,
    )  # fmt: skip
    out = torch.empty_like(query)
    if num_seqs == 0:
        return out
    part = (num_seqs, num_heads, plan.splits) if plan.splits > 1 else (1,)  # (1,): not read
    part_acc = torch.empty(*part, head_dim, device=query.device, dtype=torch.float32)
    part_ml = torch.empty(*part, 2, device=query.device, dtype=torch.float32)
    grid: tuple[int, ...]
    extra: tuple[int, ...]
    if plan.lanes > 1:  # the interpreter: one program walks several (sequence, kv head) lanes
        num_lanes = num_seqs * num_kv_heads
        kernel, grid = paged_attention_lanes_kernel, (triton.cdiv(num_lanes, plan.lanes),)
        extra, meta = (num_lanes,), {"NUM_KV_HEADS": num_kv_heads, "LANES": plan.lanes}
    else:
        kernel, grid = paged_attention_kernel, (num_seqs, num_kv_heads, plan.splits)
        extra, meta = (), {"SPLITS": plan.splits}
    tensors = (out, query, key_cache, value_cache, block_tables, seq_lens, part_acc, part_ml)
    strides = (*query.stride(), *key_cache.stride(), *value_cache.stride(), block_tables.stride(0))
    kernel[grid](
        *tensors, float(scale), plan.pages_per_split, *strides, *out.stride(), *extra,
        BLOCK_SIZE=block_size, HEAD_DIM=head_dim, GROUP=group, PAGES=plan.pages_per_step,
        BLOCK_T=plan.block_t, BLOCK_D=plan.block_d, BLOCK_G=plan.block_g,
        num_warps=plan.num_warps, **meta,
    )  # fmt: skip
    if plan.splits > 1:
        out.copy_(merge_splits(part_acc, part_ml[..., 0], part_ml[..., 1]))
    return out


def merge_splits(acc: torch.Tensor, m: torch.Tensor, l_sum: torch.Tensor) -> torch.Tensor:
    """Combine per-slice softmax partials ``[..., splits(, head_dim)]`` into the output: each
    slice's ``acc`` and ``l_sum`` were summed under its own max ``m``; rescale all to the
    overall max, then divide (the loop's rule). A slice with no pages (``m = -inf``) weighs 0."""
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
    """Write ``key[i]``/``value[i]`` into slot ``slot_mapping[i]`` of the caches, in place;
    inputs validated (slots in range and distinct) by ``PagedKVCache.write``."""
    num_tokens, num_kv_heads, head_dim = key.shape
    if num_tokens == 0:
        return
    block_h, block_d = next_power_of_two(num_kv_heads), next_power_of_two(head_dim)
    interpreter = backend.BACKEND == "interpreter"
    block_n = tuning.reshape_and_cache_block_n(interpreter, num_tokens, block_h, block_d)
    grid = (triton.cdiv(num_tokens, block_n),)
    caches = (key_cache, value_cache)
    strides = (*key.stride(), *value.stride(), *key_cache.stride(), *value_cache.stride())
    reshape_and_cache_kernel[grid](
        key, value, *caches, slot_mapping, num_tokens, *strides, BLOCK_SIZE=key_cache.shape[1],
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, BLOCK_N=block_n, BLOCK_H=block_h,
        BLOCK_D=block_d,
    )  # fmt: skip
