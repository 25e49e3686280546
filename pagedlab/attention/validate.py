"""Input checks for the data plane: one named function per rule of the attention contract.

:func:`validate_paged_inputs` is the one validation the attention functions and
``paged_attention_steps`` share: it applies the rules below in order and returns the sizes
(:class:`PagedShapes`). A wrong *kind* raises :class:`~pagedlab.ground.checks.ArgumentTypeError` (a
``TypeError`` that is also a ``ValueError``), a wrong *value* ``ValueError``; every message
names the argument and the value, and nothing has run yet. NaN or inf stored in K, V or the
query is data, not an error. The table rule is a few vectorised ops and one three-flag
device-to-host copy, so sliders can validate on every move.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from pagedlab.ground.checks import ArgumentTypeError, check_int

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# fp32's normal range: the kernel multiplies the query by the scale in fp32, so a larger
# scale is inf there (every output NaN) and a smaller one loses its digits or is 0.
FP32_MAX = float(torch.finfo(torch.float32).max)
FP32_TINY = float(torch.finfo(torch.float32).tiny)


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


# -- rules on single tensors ---------------------------------------------------------------


def require_tensor(name: str, value: object) -> torch.Tensor:
    """Rule: a dense (strided) tensor that holds data: not sparse, meta, quantized or nested."""
    if not isinstance(value, torch.Tensor):
        raise ArgumentTypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise ArgumentTypeError(
            f"{name} must be a dense (strided) tensor, got layout {value.layout}"
        )
    if value.is_nested or value.is_quantized:
        kind = "nested" if value.is_nested else "quantized"
        raise ArgumentTypeError(f"{name} must be a plain dense tensor, got a {kind} tensor")
    if value.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape but no data to read")
    return value


def require_int_dtype(name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    """Rule: index tensors (block tables, sequence lengths) have one of ``dtypes``."""
    if t.dtype not in dtypes:
        wanted = " or ".join(str(d) for d in dtypes)
        raise ArgumentTypeError(f"{name} dtype must be {wanted}, got {t.dtype}")


def require_integers(name: str, t: torch.Tensor) -> None:
    """Rule: an index tensor holds integers (not bools, floats or complex numbers)."""
    if t.dtype == torch.bool or t.dtype.is_floating_point or t.dtype.is_complex:
        raise ArgumentTypeError(f"{name} must hold integers, got dtype {t.dtype}")


# -- the rules of the attention contract, in the order validate_paged_inputs applies them ---


def check_float_dtypes(q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor) -> None:
    """Rule: the query is fp16, bf16 or fp32, and both caches have the query's dtype."""
    if q.dtype not in SUPPORTED_DTYPES:
        raise ArgumentTypeError(
            f"query dtype must be float16, bfloat16 or float32, got {q.dtype} (integer, "
            "complex and float64 tensors are not supported)"
        )
    for name, t in (("key_cache", kc), ("value_cache", vc)):
        if t.dtype != q.dtype:
            raise ArgumentTypeError(f"{name} dtype {t.dtype} != query dtype {q.dtype}")


def check_same_device(first_name: str, first: torch.Tensor, **others: torch.Tensor) -> None:
    """Rule: every tensor lives on the first one's device (the query's, for attention)."""
    for name, t in others.items():
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {first_name} is on {first.device}")


def check_attention_shapes(
    q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor
) -> tuple[int, int, int, int, int, int]:
    """Rule: query ``[S, H, D]``, caches ``[B, T, KVH, D]`` alike, sizes >= 1, ``H % KVH == 0``;
    returns ``(S, H, D, B, T, KVH)``."""
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
    num_seqs, num_heads, head_dim = q.shape
    num_blocks, block_size, num_kv_heads, kv_head_dim = kc.shape
    sizes = {
        "num_heads": num_heads,
        "head_dim": head_dim,
        "num_blocks": num_blocks,
        "block_size": block_size,
        "num_kv_heads": num_kv_heads,
    }
    for name, size in sizes.items():
        if size < 1:
            raise ValueError(f"{name} must be >= 1, got {size}")
    if num_blocks > INT32_MAX:
        raise ValueError(
            f"num_blocks must be <= {INT32_MAX} (block ids are int32), got {num_blocks}"
        )
    if kv_head_dim != head_dim:
        raise ValueError(f"key_cache head_dim {kv_head_dim} != query head_dim {head_dim}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
        )
    return num_seqs, num_heads, head_dim, num_blocks, block_size, num_kv_heads


def check_index_shapes(bt: torch.Tensor, sl: torch.Tensor, num_seqs: int) -> int:
    """Rule: block_tables int32 ``[num_seqs, width]``, seq_lens int32 ``[num_seqs]``: its width."""
    require_int_dtype("block_tables", bt, (torch.int32,))
    require_int_dtype("seq_lens", sl, (torch.int32,))
    if bt.dim() != 2 or bt.shape[0] != num_seqs:
        raise ValueError(
            f"block_tables must be [num_seqs={num_seqs}, max_blocks_per_seq], "
            f"got shape {tuple(bt.shape)}"
        )
    if sl.dim() != 1 or sl.shape[0] != num_seqs:
        raise ValueError(f"seq_lens must be [num_seqs={num_seqs}], got shape {tuple(sl.shape)}")
    return int(bt.shape[1])


def check_scale(scale: object, head_dim: int) -> float:
    """Rule: ``scale`` is None (``head_dim ** -0.5``) or a real number (not a bool) in fp32's
    normal range. Positive: it is the softmax temperature (0 ignores the query, < 0 attends to
    the least similar keys); fp32: the kernel computes there, where a larger one is inf."""
    if scale is None:
        return float(head_dim**-0.5)
    value = _real_number(scale)
    if value is None:
        raise ArgumentTypeError(f"scale must be a real number, got {scale!r}")
    if not math.isfinite(value):
        raise ValueError(f"scale must be finite, got {scale!r}")
    if value <= 0:
        raise ValueError(f"scale must be > 0 (a softmax temperature), got {scale!r}")
    if not FP32_TINY <= value <= FP32_MAX:
        raise ValueError(
            f"scale must lie in fp32's normal range [{FP32_TINY:.1e}, {FP32_MAX:.1e}] "
            f"(the kernel computes in fp32), got {scale!r}"
        )
    return value


def _real_number(value: object) -> float | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.dtype == torch.bool or value.dtype.is_complex:
            return None
        if value.layout != torch.strided or value.device.type == "meta":
            return None
        return float(value.item())
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def check_seq_lens_and_tables(
    bt: torch.Tensor, sl: torch.Tensor, num_blocks: int, block_size: int
) -> int:
    """Rule: ``1 <= seq_len <= width * block_size``, and every *used* table entry is a block id
    (padding is never checked). Returns the batch's largest page count (0 if empty)."""
    num_seqs, width = bt.shape
    if num_seqs == 0:
        return 0
    lens = sl.to(torch.int64)
    pages = (lens + block_size - 1) // block_size  # ceil(seq_len / block_size)
    used = torch.arange(width, device=bt.device)[None, :] < pages[:, None]
    bad_id = used & ((bt < 0) | (bt >= num_blocks))
    too_short = lens < 1
    too_long = lens > width * block_size
    flags = torch.stack([too_short.any(), too_long.any(), bad_id.any()]).tolist()
    if flags[0]:
        s = int(too_short.nonzero()[0, 0])
        raise ValueError(f"seq_lens[{s}] = {int(lens[s])} must be >= 1")
    if flags[1]:
        s = int(too_long.nonzero()[0, 0])
        raise ValueError(
            f"seq_lens[{s}] = {int(lens[s])} exceeds the table's capacity "
            f"{width} blocks x block_size {block_size} = {width * block_size}"
        )
    if flags[2]:
        s, i = (int(x) for x in bad_id.nonzero()[0])
        raise ValueError(
            f"block_tables[{s}, {i}] = {int(bt[s, i])} is not a block id in [0, {num_blocks}) "
            f"(sequence {s} uses its first {int(pages[s])} entries)"
        )
    return int(pages.max())


def validate_paged_inputs(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> PagedShapes:
    """Check every input against the contract (the rules above, in order); return the sizes."""
    names = ("query", "key_cache", "value_cache", "block_tables", "seq_lens")
    given = (query, key_cache, value_cache, block_tables, seq_lens)
    q, kc, vc, bt, sl = (require_tensor(name, t) for name, t in zip(names, given, strict=True))
    check_float_dtypes(q, kc, vc)
    check_same_device("query", q, key_cache=kc, value_cache=vc, block_tables=bt, seq_lens=sl)
    num_seqs, num_heads, head_dim, num_blocks, block_size, num_kv_heads = check_attention_shapes(
        q, kc, vc
    )
    width = check_index_shapes(bt, sl, num_seqs)
    final_scale = check_scale(scale, head_dim)
    max_pages = check_seq_lens_and_tables(bt, sl, num_blocks, block_size)
    sizes = (num_seqs, num_heads, num_kv_heads, head_dim, num_blocks, block_size, width)
    return PagedShapes(*sizes, max_pages, final_scale)


def check_one_page_kernel_fits(shapes: PagedShapes, *tensors: torch.Tensor) -> None:
    """ValueError unless the teaching kernel can run this shape: ``block_size`` and ``head_dim``
    are ``tl.arange`` lengths (powers of two) and its offsets int32 (<= INT32_MAX elements)."""
    for name, size in (("block_size", shapes.block_size), ("head_dim", shapes.head_dim)):
        if size & (size - 1):
            raise ValueError(
                f"{name} {size} is not a power of two: the one-page teaching kernel needs "
                "one (tl.arange); use paged_attention, which pads its tiles"
            )
    for t in tensors:
        if t.numel() > INT32_MAX:
            raise ValueError(
                f"a tensor of {t.numel()} elements ({tuple(t.shape)}) overflows the one-page "
                "teaching kernel's int32 offsets; use paged_attention"
            )


# -- index lists and devices (the KV cache, block_tables_tensor, the kernel steps) ----------------


def int_list(
    name: str, values: object, minimum: int = INT64_MIN, maximum: int = INT64_MAX
) -> list[int]:
    """``values`` (a sequence of integers, or a 1-D integer tensor or array) as ints in
    ``[minimum, maximum]``. Floats and bools are refused, never truncated."""
    if isinstance(values, torch.Tensor):
        t = require_tensor(name, values)
        require_integers(name, t)
        if t.dim() != 1:
            raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
        items: list[int] = t.tolist()
    elif isinstance(values, np.ndarray):
        if values.dtype.kind not in "iu":
            raise ArgumentTypeError(f"{name} must hold integers, got dtype {values.dtype}")
        if values.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {values.shape}")
        items = values.tolist()
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        items = list(values)
        for i, x in enumerate(items):
            if type(x) is not int:  # fast path for plain ints; check_int refuses bools
                nested = isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim > 0
                if nested or isinstance(x, (list, tuple)):
                    raise ValueError(f"{name} must be 1-D, got {name}[{i}] = {x!r}")
                items[i] = check_int(x, f"{name}[{i}]")
    else:
        raise ArgumentTypeError(
            f"{name} must be a list of ints or a 1-D integer tensor, got {values!r}"
        )
    if items and (min(items) < minimum or max(items) > maximum):
        i, x = next((i, x) for i, x in enumerate(items) if not minimum <= x <= maximum)
        raise ValueError(f"{name}[{i}] = {x} is outside [{minimum}, {maximum}]")
    return items


def check_device(device: object) -> torch.device | None:
    """``device`` as a usable torch.device (cpu, or cuda where a CUDA device exists), or None."""
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)):
        raise ArgumentTypeError(f"device must be a str or torch.device, got {device!r}")
    try:
        where = torch.device(device)
    except RuntimeError:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}") from None
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {device!r}: no CUDA device is visible here; use 'cpu'")
        if where.index is not None and where.index >= count:
            raise ValueError(f"device {device!r}: only {count} CUDA device(s) are visible")
    elif where.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return where
