"""Decode attention over a paged KV cache: a plain-torch reference and the Triton kernel.

Both functions take the same arguments (the public contract, DESIGN.md section 2)::

    query        [num_seqs, num_heads, head_dim]            float16 / bfloat16 / float32
    key_cache    [num_blocks, block_size, num_kv_heads, head_dim]   same dtype and device
    value_cache  same shape, dtype and device as key_cache
    block_tables int32 [num_seqs, max_blocks_per_seq]
    seq_lens     int32 [num_seqs], 1 <= seq_len <= max_blocks_per_seq * block_size
    scale        optional float, default head_dim ** -0.5

and return ``out[s, h] = softmax(scale * q[s, h] . K_s^T) V_s`` in the query's dtype, where
``K_s``/``V_s`` are the first ``seq_lens[s]`` positions of sequence ``s`` read page by page:
position ``p`` lives in physical block ``block_tables[s, p // block_size]`` at offset
``p % block_size``. Query head ``h`` reads kv head ``h // (num_heads // num_kv_heads)``
(grouped-query attention, the same convention as vLLM and torch's ``enable_gqa``).

Invariants and what is handled:

- Only the first ``ceil(seq_len / block_size)`` entries of a table row are read; the rest is
  padding with any value (``-1`` is customary) and is never validated or dereferenced.
- :func:`validate_paged_inputs` is the one validation both functions share. Every contract
  violation raises ``ValueError`` naming the offending value before any computation runs.
  It is vectorised torch (a handful of tensor ops, no Python loop over the table) so
  sliders can call it on every move.
- All math is fp32; the result is cast to the query's dtype.
- bfloat16: compiled on a GPU the kernel reads it natively. Under Triton's CPU interpreter
  :func:`paged_attention` upcasts bfloat16 inputs to float32 before the launch (exact, and
  the kernel does its math in fp32 anyway) and casts the output back: the interpreters of
  older Triton 3.x releases cannot hold bfloat16 at all, and this keeps one behaviour on
  every release we allow.
- Not handled: prefill (several query positions per sequence), sliding windows, ALiBi,
  quantised (fp8) caches, float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pagedlab.attention import backend

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class PagedShapes:
    """Sizes read off validated inputs."""

    num_seqs: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    max_blocks_per_seq: int
    max_pages: int  # the largest ceil(seq_len / block_size) in the batch (0 if no seqs)
    scale: float


def _require_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def validate_paged_inputs(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> PagedShapes:
    """Check every input against the contract; return the sizes or raise ValueError.

    Reads nothing past a sequence's last used table entry. Costs a few vectorised tensor
    ops and one device-to-host copy of three small results.
    """
    q = _require_tensor("query", query)
    kc = _require_tensor("key_cache", key_cache)
    vc = _require_tensor("value_cache", value_cache)
    bt = _require_tensor("block_tables", block_tables)
    sl = _require_tensor("seq_lens", seq_lens)

    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"query dtype must be float16, bfloat16 or float32, got {q.dtype} (non-float queries "
            "and float64 are not supported)"
        )
    if q.dim() != 3:
        raise ValueError(
            f"query must be [num_seqs, num_heads, head_dim], got shape {tuple(q.shape)}"
        )
    if kc.dim() != 4:
        raise ValueError(
            "key_cache must be [num_blocks, block_size, num_kv_heads, head_dim], "
            f"got shape {tuple(kc.shape)}"
        )
    if vc.shape != kc.shape:
        raise ValueError(
            f"value_cache shape {tuple(vc.shape)} != key_cache shape {tuple(kc.shape)}"
        )
    for name, t in (("key_cache", kc), ("value_cache", vc)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name} dtype {t.dtype} != query dtype {q.dtype}")
    for name, t in (("key_cache", kc), ("value_cache", vc), ("block_tables", bt), ("seq_lens", sl)):
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but query is on {q.device}")

    num_seqs, num_heads, head_dim = q.shape
    num_blocks, block_size, num_kv_heads, kv_head_dim = kc.shape
    for name, size in (
        ("num_heads", num_heads),
        ("head_dim", head_dim),
        ("num_blocks", num_blocks),
        ("block_size", block_size),
        ("num_kv_heads", num_kv_heads),
    ):
        if size < 1:
            raise ValueError(f"{name} must be >= 1, got {size}")
    if kv_head_dim != head_dim:
        raise ValueError(f"key_cache head_dim {kv_head_dim} != query head_dim {head_dim}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
        )

    if bt.dtype != torch.int32:
        raise ValueError(f"block_tables dtype must be torch.int32, got {bt.dtype}")
    if sl.dtype != torch.int32:
        raise ValueError(f"seq_lens dtype must be torch.int32, got {sl.dtype}")
    if bt.dim() != 2 or bt.shape[0] != num_seqs:
        raise ValueError(
            f"block_tables must be [num_seqs={num_seqs}, max_blocks_per_seq], "
            f"got shape {tuple(bt.shape)}"
        )
    if sl.dim() != 1 or sl.shape[0] != num_seqs:
        raise ValueError(f"seq_lens must be [num_seqs={num_seqs}], got shape {tuple(sl.shape)}")
    max_blocks = bt.shape[1]

    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise ValueError(f"scale must be a real number, got {scale!r}")
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale!r}")
    final_scale = float(head_dim**-0.5 if scale is None else scale)

    if num_seqs == 0:
        return PagedShapes(
            0, num_heads, num_kv_heads, head_dim, num_blocks, block_size, max_blocks, 0, final_scale
        )

    # Vectorised checks: seq_len range, then block ids of the used part of each row only.
    lens = sl.to(torch.int64)
    pages = (lens + block_size - 1) // block_size  # ceil(seq_len / block_size)
    used = torch.arange(max_blocks, device=bt.device)[None, :] < pages[:, None]
    bad_id = used & ((bt < 0) | (bt >= num_blocks))
    too_short = lens < 1
    too_long = lens > max_blocks * block_size
    flags = torch.stack([too_short.any(), too_long.any(), bad_id.any()]).tolist()

    if flags[0]:
        s = int(too_short.nonzero()[0, 0])
        raise ValueError(f"seq_lens[{s}] = {int(lens[s])} must be >= 1")
    if flags[1]:
        s = int(too_long.nonzero()[0, 0])
        raise ValueError(
            f"seq_lens[{s}] = {int(lens[s])} exceeds the table's capacity "
            f"{max_blocks} blocks x block_size {block_size} = {max_blocks * block_size}"
        )
    if flags[2]:
        s, i = (int(x) for x in bad_id.nonzero()[0])
        raise ValueError(
            f"block_tables[{s}, {i}] = {int(bt[s, i])} is not a block id in [0, {num_blocks}) "
            f"(sequence {s} uses its first {int(pages[s])} entries)"
        )
    return PagedShapes(
        num_seqs,
        num_heads,
        num_kv_heads,
        head_dim,
        num_blocks,
        block_size,
        max_blocks,
        int(pages.max()),
        final_scale,
    )


def reference_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Ground truth in plain torch: gather each sequence's pages, then softmax attention.

    Works on any device and platform (no Triton). One Python iteration per sequence, so
    it is meant for checking, not for speed.
    """
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    group = shapes.num_heads // shapes.num_kv_heads
    out = torch.empty_like(query)
    for s, seq_len in enumerate(seq_lens.tolist()):
        pages = -(-seq_len // shapes.block_size)
        blocks = block_tables[s, :pages].long()
        # [pages, block_size, kv_heads, d] -> [positions, kv_heads, d], logical order.
        k = key_cache[blocks].flatten(0, 1)[:seq_len].float()
        v = value_cache[blocks].flatten(0, 1)[:seq_len].float()
        k = k.repeat_interleave(group, dim=1)  # kv head h // group serves query head h
        v = v.repeat_interleave(group, dim=1)
        q = query[s].float()  # [heads, d]
        scores = torch.einsum("hd,thd->ht", q, k) * shapes.scale
        weights = torch.softmax(scores, dim=-1)
        out[s] = torch.einsum("ht,thd->hd", weights, v).to(query.dtype)
    return out


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Validate, then run the Triton paged-attention decode kernel (see pagedlab.attention.kernels).

    Compiled on a CUDA device, in Triton's interpreter on the CPU. Raises RuntimeError
    where Triton is unavailable (pagedlab.reference_attention works there).
    """
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    backend.require_triton()  # after validation: bad input is a ValueError on every platform
    if not backend.runs_on(query.device):
        raise ValueError(
            f"the tensors are on {query.device}, but the Triton kernel runs on "
            f"{backend.device()} here ({backend.BACKEND}): move them with "
            ".to(pagedlab.attention.backend.device()), or use reference_attention"
        )
    from pagedlab.attention import (
        kernels,  # imports triton; backend has set TRITON_INTERPRET already
    )

    out_dtype = query.dtype
    if backend.BACKEND == "interpreter" and out_dtype == torch.bfloat16:
        # The interpreter has no bfloat16 arithmetic; bf16 -> fp32 is exact.
        query, key_cache, value_cache = query.float(), key_cache.float(), value_cache.float()
    out = kernels.launch_paged_attention(
        query,
        key_cache,
        value_cache,
        block_tables.contiguous(),
        seq_lens.contiguous(),
        shapes.scale,
        shapes.max_pages,
    )
    return out.to(out_dtype)


def block_tables_tensor(
    tables: list[list[int]], pad: int = -1, device: torch.device | str | None = None
) -> torch.Tensor:
    """Pack per-sequence block lists (e.g. ``BlockTable.blocks``) into an int32 tensor.

    Rows shorter than the longest are padded with ``pad``; padding is never read.
    """
    if not tables:
        raise ValueError("tables must hold at least one sequence's block list, got []")
    width = max(1, max(len(row) for row in tables))
    rows = [list(row) + [pad] * (width - len(row)) for row in tables]
    return torch.tensor(rows, dtype=torch.int32, device=device)
