"""Kernel drivers: launch a learner's ``@triton.jit`` kernel on one case's tensors.

The ladder's three rungs (``adapt_copy``, ``adapt_gather``, ``adapt_softmax``) and the
puzzle (``adapt_paged``, :func:`launch`): each allocates the output filled with a value the
kernel must overwrite (``SENTINEL`` or NaN), puts the inputs on the backend's device (NaN
past ``n``, NaN guard blocks around the caches, -1 rows around the block table), launches,
and returns the output on the CPU. Like :mod:`pagedlab.exercises.drivers` (whose
``ADAPTERS`` these join), it holds no case, no expected value and no solution, and imports
nothing of :mod:`pagedlab.exercises` but the drivers. Needs torch (and triton to launch).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from pagedlab.attention import backend
from pagedlab.exercises.drivers import ADAPTERS

SENTINEL = -7.0  # what ``out`` holds where the kernel must not store
GUARD = 2  # NaN blocks before and after each cache (and -1 rows around the table)


def _device() -> Any:
    return backend.device()


def _quiet(launch: Callable[[], None]) -> None:
    with warnings.catch_warnings():  # NaN read where it must not be: numpy warns, we report it
        warnings.simplefilter("ignore", RuntimeWarning)
        launch()


def _fenced(shape: tuple[int, ...], fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, out): ``out`` of ``shape`` filled with ``fill``, the middle of a buffer with
    GUARD more leading entries of ``fill`` on each side: the fence a stray store hits."""
    buffer = torch.full((shape[0] + 2 * GUARD, *shape[1:]), fill, device=_device())
    return buffer, buffer[GUARD : GUARD + shape[0]]


def _fence_intact(buffer: torch.Tensor, fill: float) -> None:
    """Raise if anything was stored in the fence around ``out`` (past its ends)."""
    fence = torch.cat([buffer[:GUARD], buffer[-GUARD:]]).cpu()
    kept = torch.isnan(fence) if fill != fill else fence == fill
    if not bool(kept.all()):
        raise RuntimeError(
            "the kernel stored outside out (before its start or past its end): each program "
            "stores only into its own part of out"
        )


def _kernel_of(kernel: Any) -> Any:
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"pass the @triton.jit kernel itself, got {type(kernel).__name__}")
    return kernel


def _named(kernel: Any, run: Callable[..., Any]) -> Callable[..., Any]:
    inner = getattr(kernel, "fn", kernel)
    run.__name__ = str(getattr(inner, "__name__", None) or type(kernel).__name__)
    return run


def adapt_copy(kernel: Any) -> Callable[..., Any]:
    def run(x: torch.Tensor, n: int, block: int) -> torch.Tensor:
        k = _kernel_of(kernel)
        padded = torch.full((len(x) + block,), float("nan"))  # NaN past n, a block of it
        padded[: len(x)] = x
        source = padded.to(_device())
        buffer, out = _fenced((len(x) + block,), SENTINEL)
        grid = (-(-n // block),)
        _quiet(lambda: k[grid](source, out, n, BLOCK=block))
        _fence_intact(buffer, SENTINEL)
        return out.cpu()

    return _named(kernel, run)


def adapt_gather(kernel: Any) -> Callable[..., Any]:
    def run(x: torch.Tensor, index: list[int]) -> torch.Tensor:
        k = _kernel_of(kernel)
        d = x.shape[1]
        buffer, out = _fenced((len(index), d), SENTINEL)
        table = torch.tensor(index, dtype=torch.int32, device=_device())
        source = x.to(_device()).contiguous()
        _quiet(lambda: k[(len(index),)](source, table, out, D=d))
        _fence_intact(buffer, SENTINEL)
        return out.cpu()

    return _named(kernel, run)


def adapt_softmax(kernel: Any) -> Callable[..., Any]:
    def run(q: torch.Tensor, k: torch.Tensor, n: int, scale: float) -> torch.Tensor:
        kern = _kernel_of(kernel)
        block, dim = k.shape
        buffer, out = _fenced((block,), SENTINEL)
        keys, query = k.to(_device()).contiguous(), q.to(_device()).contiguous()
        _quiet(lambda: kern[(1,)](query, keys, out, n, scale, BLOCK_SIZE=block, HEAD_DIM=dim))
        _fence_intact(buffer, SENTINEL)
        return out.cpu()

    return _named(kernel, run)


def _guarded(t: torch.Tensor, fill: float) -> torch.Tensor:
    """``t`` copied into the middle of a buffer with GUARD extra leading-dim entries each side."""
    shape = (t.shape[0] + 2 * GUARD, *t.shape[1:])
    buffer = torch.full(shape, fill, dtype=t.dtype, device=t.device)
    buffer[GUARD : GUARD + t.shape[0]] = t
    return buffer[GUARD : GUARD + t.shape[0]]


def launch(kernel: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Run the learner's kernel on one batch; returns ``out`` (NaN where nothing was stored)."""
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"pass the @triton.jit kernel itself, got {type(kernel).__name__}")
    device = backend.device()
    num_seqs, num_heads = query.shape[:2]
    q = query.to(device).contiguous()
    k, v = (_guarded(t.to(device).contiguous(), float("nan")) for t in (key, value))
    table = _guarded(tables.to(device).contiguous(), -1)
    lens = seq_lens.to(device).contiguous()
    buffer, out = _fenced(tuple(q.shape), float("nan"))
    with warnings.catch_warnings():  # NaN read from a guard block: numpy warns, we report it
        warnings.simplefilter("ignore", RuntimeWarning)
        _launch(kernel, (num_seqs, num_heads), out, q, k, v, table, lens, tables.shape[1])
    _fence_intact(buffer, float("nan"))
    return out.cpu()


def _launch(kernel: Any, grid: tuple[int, int], out: torch.Tensor, q: torch.Tensor,
            k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, lens: torch.Tensor,
            max_blocks: int) -> None:  # fmt: skip
    num_heads, head_dim = q.shape[1], q.shape[2]
    block_size, kv_heads = k.shape[1], k.shape[2]
    kernel[grid](
        out, q, k, v, table, lens, head_dim**-0.5, max_blocks,
        NUM_HEADS=num_heads, NUM_KV_HEADS=kv_heads, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip


def adapt_paged(kernel: Any) -> Any:
    def run(*args: Any) -> torch.Tensor:
        return launch(kernel, *args)

    inner = getattr(kernel, "fn", kernel)  # a @triton.jit kernel wraps a Python function
    run.__name__ = str(getattr(inner, "__name__", None) or type(kernel).__name__)
    return run


ADAPTERS.update(copy=adapt_copy, gather=adapt_gather, softmax=adapt_softmax, paged=adapt_paged)
