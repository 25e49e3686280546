"""Decode attention over a paged KV cache: a plain-torch reference and the Triton kernel.

Every function takes the same arguments (the public contract, ARCHITECTURE.md)::

    query        [num_seqs, num_heads, head_dim]            float16 / bfloat16 / float32
    key_cache    [num_blocks, block_size, num_kv_heads, head_dim]   same dtype and device
    value_cache  same shape, dtype and device as key_cache
    block_tables int32 [num_seqs, max_blocks_per_seq]
    seq_lens     int32 [num_seqs], 1 <= seq_len <= max_blocks_per_seq * block_size
    scale        optional float > 0, default head_dim ** -0.5

and returns ``out[s, h] = softmax(scale * q[s, h] . K_s^T) V_s`` in the query's dtype (math in
fp32). Position ``p`` of sequence ``s`` lives in block ``block_tables[s, p // block_size]`` at
offset ``p % block_size``; query head ``h`` reads kv head ``h // (num_heads // num_kv_heads)``
(grouped-query attention, as vLLM and torch's ``enable_gqa``). Only the first
``ceil(seq_len / block_size)`` entries of a row are read: the rest is padding, never checked.

:func:`~pagedlab.attention.validate.validate_paged_inputs` is the one validation they share: a
``ValueError`` naming the value before any computation (``ArgumentTypeError`` for a wrong kind),
vectorised so sliders can call it on every move. NaN or inf stored in the tensors is data.
``paged_attention`` also refuses tiles above Triton's largest tensor (2**20 elements). Under the
CPU interpreter bfloat16 is upcast to float32 (exact) and cast back: older interpreters cannot
hold bfloat16. Not handled: prefill, sliding windows, ALiBi, fp8 caches, float64.
"""

from __future__ import annotations

from typing import Any

import torch

from pagedlab.attention import backend, tuning
from pagedlab.attention.validate import (
    INT32_MAX,
    PagedShapes,
    check_device,
    check_one_page_kernel_fits,
    int_list,
    validate_paged_inputs,
)
from pagedlab.ground.checks import ArgumentTypeError, ceil_div, check_int

__all__ = [
    "PagedShapes",
    "attend_pages",
    "block_tables_tensor",
    "paged_attention",
    "paged_attention_one_page",
    "reference_attention",
    "torch_paged_attention",
    "validate_paged_inputs",
]


def reference_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Ground truth in plain torch, one sequence at a time: for checking, not for speed."""
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    group = shapes.num_heads // shapes.num_kv_heads
    out = torch.empty_like(query)
    for s, seq_len in enumerate(seq_lens.tolist()):
        pages = ceil_div(seq_len, shapes.block_size)
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


def torch_paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """The same contract in batched torch (:func:`attend_pages`, validated): the CPU path."""
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    return attend_pages(query, key_cache, value_cache, block_tables, seq_lens, shapes.scale)


def attend_pages(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Decode attention through the block tables, batched, **unvalidated** (the engine built
    them). Padding entries read block 0 and are masked; grouped-query by a view, no K/V copy."""
    seqs, heads, d = query.shape
    scale = d**-0.5 if scale is None else scale
    kv_heads, block_size = key_cache.shape[2], key_cache.shape[1]
    pages = (seq_lens.long() + block_size - 1) // block_size  # entries each row uses
    used = torch.arange(block_tables.shape[1], device=query.device)[None, :] < pages[:, None]
    tables = torch.where(used, block_tables.long(), 0)
    keys = key_cache[tables].flatten(1, 2).float()  # [seqs, positions, kv_heads, d]
    values = value_cache[tables].flatten(1, 2).float()
    q = query.float().view(seqs, kv_heads, heads // kv_heads, d)
    scores = torch.einsum("skgd,stkd->skgt", q, keys) * scale
    past = torch.arange(keys.shape[1], device=query.device)[None, :] >= seq_lens.long()[:, None]
    scores = scores.masked_fill(past[:, None, None, :], float("-inf"))
    out = torch.einsum("skgt,stkd->skgd", torch.softmax(scores, dim=-1), values)
    return out.reshape(seqs, heads, d).to(query.dtype)


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Validate, then run the tuned Triton kernel (compiled on CUDA, interpreted on the CPU);
    RuntimeError where Triton is unavailable (reference_attention works there)."""
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    group = shapes.num_heads // shapes.num_kv_heads
    tuning.check_kernel_fits(shapes.block_size, shapes.head_dim, group)
    tensors = (query, key_cache, value_cache, block_tables, seq_lens)
    return _run_triton(False, tensors, shapes.scale, shapes.max_pages)


def paged_attention_one_page(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """The teaching kernel, ``paged_attention``'s contract: one program per (sequence, head)
    whose loop step ``b`` is row ``b`` of :func:`pagedlab.paged_attention_steps`. Also needs
    ``block_size`` and ``head_dim`` powers of two and tensors under 2**31 elements."""
    shapes = validate_paged_inputs(query, key_cache, value_cache, block_tables, seq_lens, scale)
    check_one_page_kernel_fits(shapes, query, key_cache, value_cache, block_tables)
    tuning.check_kernel_fits(shapes.block_size, shapes.head_dim, 1)
    tensors = (query, key_cache, value_cache, block_tables, seq_lens)
    contiguous = tuple(t.contiguous() for t in tensors)  # it computes offsets, not strides
    return _run_triton(True, contiguous, shapes.scale)


def _run_triton(one_page: bool, tensors: tuple[torch.Tensor, ...], *args: Any) -> torch.Tensor:
    """What every Triton entry point does after validating: the backend and device checks,
    bf16 upcast under the interpreter, the teaching (``one_page``) or tuned kernel's launch on
    ``(q, kc, vc, bt, sl, *args)`` with ``bt`` and ``sl`` contiguous, the cast back."""
    query, key_cache, value_cache, block_tables, seq_lens = tensors
    backend.require_triton()  # after validation: bad input is a ValueError on every platform
    if not backend.runs_on(query.device):
        raise ValueError(
            f"the tensors are on {query.device}, but the Triton kernel runs on "
            f"{backend.device()} here ({backend.BACKEND}): move them with "
            ".to(pagedlab.attention.backend.device()), or use reference_attention"
        )
    from pagedlab.attention import launch  # imports triton, after backend

    out_dtype = query.dtype
    if backend.BACKEND == "interpreter" and out_dtype == torch.bfloat16:
        # The interpreter has no bfloat16 arithmetic; bf16 -> fp32 is exact.
        query, key_cache, value_cache = query.float(), key_cache.float(), value_cache.float()
    indices = (block_tables.contiguous(), seq_lens.contiguous())
    with backend.on_device(query.device):
        run = launch.launch_paged_attention_one_page if one_page else launch.launch_paged_attention
        out = run(query, key_cache, value_cache, *indices, *args)
    return out.to(out_dtype)


def block_tables_tensor(
    tables: list[list[int]], pad: int = -1, device: torch.device | str | None = None
) -> torch.Tensor:
    """Pack per-sequence block lists (ints or 1-D integer tensors) into an int32 tensor, short
    rows padded with ``pad``. Entries must fit int32; floats and bools are refused."""
    if isinstance(tables, (str, bytes, torch.Tensor)) or not isinstance(tables, (list, tuple)):
        raise ArgumentTypeError(
            f"tables must be a list of per-sequence block lists, got {type(tables).__name__}"
        )
    if not tables:
        raise ValueError("tables must hold at least one sequence's block list, got []")
    pad = check_int(pad, "pad", minimum=-INT32_MAX - 1, maximum=INT32_MAX)
    where = check_device(device)
    rows = [
        int_list(f"tables[{s}]", row, -INT32_MAX - 1, INT32_MAX) for s, row in enumerate(tables)
    ]
    width = max(1, max(len(row) for row in rows))
    padded = [row + [pad] * (width - len(row)) for row in rows]
    return torch.tensor(padded, dtype=torch.int32, device=where)
