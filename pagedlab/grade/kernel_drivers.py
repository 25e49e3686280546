"""Kernel drivers: launch a learner's ``@triton.jit`` kernel on one case's tensors.

The ladder's rungs (``adapt_copy``, ``adapt_gather``, ``adapt_softmax``) and the puzzle
(``adapt_paged``, :func:`launch`) allocate ``out`` filled with what the kernel must overwrite
(``SENTINEL`` or NaN) inside a fence (:func:`_fenced`), put NaN past ``n``, around the caches
and -1 rows around the block table, launch, and return ``out`` on the CPU. What values alone
cannot see: a load past the valid region (the interpreter's loads, :func:`watched`; skipped on
a GPU), and a store into ANOTHER program's part of ``out`` (the interpreter's stores with
their program, :meth:`Watch.owners`; and on any device a relaunch on grids cut short,
:func:`_foreign_writes`). Like :mod:`pagedlab.grade.drivers` (whose ``ADAPTERS`` these join):
no case, no expected value, no solution. Needs torch (and triton to launch).
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from pagedlab.attention import backend
from pagedlab.grade.drivers import ADAPTERS, _named
from pagedlab.ground.checks import ceil_div

SENTINEL = -7.0  # what ``out`` holds where the kernel must not store
GUARD = 2  # NaN blocks before and after each cache (and -1 rows around the table)


def _quiet(launch: Callable[..., None], *args: Any) -> None:
    with warnings.catch_warnings():  # NaN read where it must not be: numpy warns, we report it
        warnings.simplefilter("ignore", RuntimeWarning)
        launch(*args)


def _fenced(shape: tuple[int, ...], fill: float,
            dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(buffer, out): ``out`` of ``shape`` filled with ``fill`` inside GUARD more entries of
    it on each side (the fence a stray store hits)."""
    size = (shape[0] + 2 * GUARD, *shape[1:])
    buffer = torch.full(size, fill, dtype=dtype, device=backend.device())
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


#: Names no Triton kernel can compile: a body that uses them is Python run by the interpreter
#: (walking frames to the caller's padded input, say), not a kernel.
NOT_TRITON = frozenset({"sys", "inspect", "gc", "ctypes", "os", "builtins", "torch", "numpy",
                        "_getframe", "currentframe", "f_back", "f_locals", "f_globals",
                        "tb_frame", "gi_frame", "__import__", "globals", "locals", "vars", "eval",
                        "exec", "open", "getattr", "setattr"})  # fmt: skip


def _kernel_of(kernel: Any) -> Any:
    """``kernel``, refused unless it launches (``kernel[grid]``) and its body, where it is a
    Python function, names nothing a compiled Triton kernel cannot (:data:`NOT_TRITON`)."""
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"pass the @triton.jit kernel itself, got {type(kernel).__name__}")
    if stale := backend.stale_kernel(kernel):  # defined before import pagedlab: say so
        raise RuntimeError(stale)
    fn = getattr(kernel, "fn", None)
    codes = [fn.__code__] if type(fn) is types.FunctionType else []
    while codes:
        code = codes.pop()
        used = sorted(NOT_TRITON & {*code.co_names, *code.co_varnames, *code.co_freevars})
        if used:
            raise TypeError(
                f"the kernel's body uses {', '.join(used)}: a Triton kernel computes with tl.* "
                "on what it loads, it cannot call Python (this would not compile on a GPU)"
            )
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return kernel


class Watch:
    """The addresses the interpreter loaded (mask true) and (program, address) it stored."""

    def __init__(self) -> None:
        self.loads: list[int] = []
        self.stores: list[tuple[tuple[int, ...], int]] = []

    def owners(self, out: torch.Tensor, region: int, grid: tuple[int, ...]) -> None:
        """Raise if a program stored into a part of ``out`` (``region`` elements each, in the
        grid's row-major order) that is not its own."""
        start, size = out.data_ptr(), out.element_size()
        for program, address in self.stores:
            element = (address - start) // size
            if not 0 <= element < out.numel():
                continue  # outside out: the fence says so
            linear = program[0] * (grid[1] if len(grid) > 1 else 1) + (
                program[1] if len(grid) > 1 else 0)  # fmt: skip
            if element // region != linear:
                who = program[0] if len(grid) == 1 else program[: len(grid)]
                raise RuntimeError(
                    f"program {who} stored into the part of out that program "
                    f"{element // region} owns: each program stores only into its own part"
                )


@contextmanager
def watched() -> Iterator[Watch]:
    """Inside: the interpreter's loads and stores go to the :class:`Watch` yielded (a compiled
    kernel, on a GPU, records nothing)."""
    watch = Watch()
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:  # pragma: no cover - another Triton: the checks are skipped
        yield watch
        return
    load, store = InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store

    def where(ptrs: Any, mask: Any) -> list[int]:
        import numpy as np

        chosen = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data))
        return [int(a) for a in np.asarray(ptrs.data)[chosen].reshape(-1)]

    def on_load(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
        watch.loads.extend(where(ptrs, mask))
        return load(self, ptrs, mask, *rest)

    def on_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        program = tuple(int(i) for i in getattr(self, "grid_idx", (0, 0, 0)))
        watch.stores.extend((program, a) for a in where(ptrs, mask))
        return store(self, ptrs, value, mask, *rest)

    InterpreterBuilder.create_masked_load = on_load
    InterpreterBuilder.create_masked_store = on_store
    try:
        yield watch
    finally:
        InterpreterBuilder.create_masked_load = load
        InterpreterBuilder.create_masked_store = store


Launch = Callable[[tuple[int, ...], torch.Tensor], None]


def _foreign_writes(launch: Launch, grid: tuple[int, ...], shape: tuple[int, ...],
                    fill: float) -> None:  # fmt: skip
    """Relaunch on grids cut short along each axis; raise if a program stored into a part of
    ``out`` (indexed like the grid) whose owner was left out of that launch."""
    for axis, size in enumerate(grid):
        for k in range(1, size):
            cut = tuple(k if a == axis else g for a, g in enumerate(grid))
            buffer, out = _fenced(shape, fill)
            _quiet(launch, cut, out)
            _fence_intact(buffer, fill)
            rest = out.cpu().narrow(axis, k, size - k)
            kept = torch.isnan(rest) if fill != fill else rest == fill
            if not bool(kept.all()):
                who = ("row", "sequence", "head")[axis + (len(grid) > 1)]
                raise RuntimeError(
                    f"with only the programs of {who}s 0 .. {k - 1} launched, a part of out "
                    f"owned by {who} {k} or later was stored: a program stored into another "
                    "program's part of out (the owner, running later, hid it)"
                )


def adapt_copy(kernel: Any) -> Callable[..., Any]:
    def run(x: torch.Tensor, n: int, block: int) -> torch.Tensor:
        k = _kernel_of(kernel)
        padded = torch.full((len(x) + block,), float("nan"))  # NaN past n, a block of it
        padded[: len(x)] = x
        source = padded.to(backend.device())
        buffer, out = _fenced((len(x) + block,), SENTINEL)
        grid = (ceil_div(n, block),)
        with watched() as watch:
            _quiet(lambda: k[grid](source, out, n, BLOCK=block))
        _fence_intact(buffer, SENTINEL)
        start, size = source.data_ptr(), source.element_size()
        past = sorted({(a - start) // size for a in watch.loads if start + n * size <= a})
        past = [i for i in past if i < len(padded)]
        if past:
            raise RuntimeError(
                f"the kernel loaded x at offsets {past} (past n={n}): load only the lanes "
                "whose offset is below n (tl.load(x_ptr + offs, mask=offs < n)); a load past n "
                "reads memory x may not own"
            )
        return out.cpu()

    return _named(kernel, run)


def adapt_gather(kernel: Any) -> Callable[..., Any]:
    def run(x: torch.Tensor, index: list[int]) -> torch.Tensor:
        k = _kernel_of(kernel)
        d = x.shape[1]
        buffer, out = _fenced((len(index), d), SENTINEL)
        table = torch.tensor(index, dtype=torch.int32, device=backend.device())
        source = x.to(backend.device()).contiguous()
        with watched() as watch:
            _quiet(lambda: k[(len(index),)](source, table, out, D=d))
        _fence_intact(buffer, SENTINEL)
        watch.owners(out, d, (len(index),))
        _foreign_writes(lambda grid, o: k[grid](source, table, o, D=d), (len(index),),
                        (len(index), d), SENTINEL)  # fmt: skip
        return out.cpu()

    return _named(kernel, run)


def adapt_softmax(kernel: Any) -> Callable[..., Any]:
    def run(q: torch.Tensor, k: torch.Tensor, n: int, scale: float) -> torch.Tensor:
        kern = _kernel_of(kernel)
        block, dim = k.shape
        buffer, out = _fenced((block,), SENTINEL)
        keys, query = k.to(backend.device()).contiguous(), q.to(backend.device()).contiguous()
        with watched() as watch:
            _quiet(lambda: kern[(1,)](query, keys, out, n, scale, BLOCK_SIZE=block,
                                      HEAD_DIM=dim))  # fmt: skip
        _fence_intact(buffer, SENTINEL)
        start, size = keys.data_ptr(), keys.element_size()
        past = sorted({(a - start) // size // dim for a in watch.loads
                       if start + n * dim * size <= a < start + keys.numel() * size})  # fmt: skip
        if past and not bool(torch.isnan(out).any()):  # NaN out: the values say more
            raise RuntimeError(
                f"the kernel loaded k's slots {past} (slots {n}.. hold no key): mask the load "
                "of k too (mask=valid[:, None]), not only the scores"
            )
        return out.cpu()

    return _named(kernel, run)


def _guarded(t: torch.Tensor, fill: float) -> torch.Tensor:
    """``t`` copied into the middle of a fence of ``fill`` (:func:`_fenced`)."""
    return _fenced(tuple(t.shape), fill, t.dtype)[1].copy_(t)


def launch(kernel: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Run the learner's kernel on one batch; returns ``out`` (NaN where nothing was stored)."""
    kernel, device = _kernel_of(kernel), backend.device()
    num_seqs, num_heads = query.shape[:2]
    q = query.to(device).contiguous()
    k, v = (_guarded(t.to(device).contiguous(), float("nan")) for t in (key, value))
    table = _guarded(tables.to(device).contiguous(), -1)
    lens = seq_lens.to(device).contiguous()
    buffer, out = _fenced(tuple(q.shape), float("nan"))
    with watched() as watch:
        _quiet(lambda: _launch(kernel, (num_seqs, num_heads), out, q, k, v, table, lens,
                               tables.shape[1]))  # fmt: skip
    _fence_intact(buffer, float("nan"))
    watch.owners(out, q.shape[2], (num_seqs, num_heads))
    stray = _unowned(watch.loads, k, tables, seq_lens) + _unowned(watch.loads, v, tables, seq_lens)
    if stray and not bool(torch.isnan(out).any()):  # NaN out: the values say more
        raise RuntimeError(
            f"the kernel loaded K or V at slots no sequence owns ({sorted(set(stray))[:8]}): "
            "mask both loads (slots at or past seq_len), not only the scores"
        )
    _foreign_writes(
        lambda grid, o: _launch(kernel, grid, o, q, k, v, table, lens, tables.shape[1]),
        (num_seqs, num_heads), tuple(q.shape), float("nan"),
    )  # fmt: skip
    return out.cpu()


def _unowned(loads: list[int], cache: torch.Tensor, tables: torch.Tensor,
             seq_lens: torch.Tensor) -> list[int]:  # fmt: skip
    """The slots of ``cache`` (its guard blocks included) that ``loads`` touched but no
    sequence owns (past its length, or in no table)."""
    size, per_slot, block_size = cache.element_size(), cache.stride(1), cache.shape[1]
    start = cache.data_ptr()
    low, high = (
        start - GUARD * cache.stride(0) * size,
        start + (cache.shape[0] + GUARD) * cache.stride(0) * size,
    )
    owned = {int(tables[s][p // block_size]) * block_size + p % block_size
             for s in range(len(seq_lens)) for p in range(int(seq_lens[s]))}  # fmt: skip
    return [slot for a in loads if low <= a < high
            if (slot := (a - start) // size // per_slot) not in owned]  # fmt: skip


def _launch(kernel: Any, grid: tuple[int, ...], out: torch.Tensor, q: torch.Tensor,
            k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, lens: torch.Tensor,
            max_blocks: int) -> None:  # fmt: skip
    num_heads, head_dim = q.shape[1], q.shape[2]
    block_size, kv_heads = k.shape[1], k.shape[2]
    kernel[grid](
        out, q, k, v, table, lens, head_dim**-0.5, max_blocks,
        NUM_HEADS=num_heads, NUM_KV_HEADS=kv_heads, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip


def adapt_paged(kernel: Any) -> Callable[..., Any]:
    return _named(kernel, lambda *args: launch(kernel, *args))


ADAPTERS.update(copy=adapt_copy, gather=adapt_gather, softmax=adapt_softmax, paged=adapt_paged)
