"""Paged K/V storage: the memory that block tables point into.

``PagedKVCache`` holds ``key`` and ``value``, each ``[num_blocks, block_size, num_kv_heads,
head_dim]`` (the layout :func:`pagedlab.paged_attention` reads); a flat *slot*
``block * block_size + offset`` names one position's storage. ``write`` stores new tokens at
their slots (vLLM's reshape-and-cache: the Triton kernel where Triton runs, torch indexing
otherwise, identical results), ``copy_block`` duplicates a block for copy-on-write, ``gather``
reads one sequence in logical order (the dense layout a non-paged kernel would need).

Invariants: shape, dtype and device never change (contents may be edited in place). Every
argument is validated before anything is written: ``ArgumentTypeError`` for a wrong kind,
``ValueError`` for a wrong value, naming it, nothing changed. Ids and slots are integers,
never truncated; slots in one ``write`` are distinct and non-negative. ``k``/``v`` may be any
dense tensors, even views of this cache (copied first), stored without autograd history; NaN
is data. Takes plain lists or tensors: no dependency on pagedlab.memory.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence

import torch

from pagedlab.attention import backend, tuning
from pagedlab.attention.validate import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    SUPPORTED_DTYPES,
    check_device,
    int_list,
    require_integers,
    require_tensor,
)
from pagedlab.ground.checks import ArgumentTypeError, ceil_div, check_bool, check_int

SlotsLike = Sequence[int] | torch.Tensor


class PagedKVCache:
    """Key and value tensors ``[num_blocks, block_size, num_kv_heads, head_dim]``, zeroed."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        pin_memory: bool = False,
    ) -> None:
        """``pin_memory=True``: page-locked host memory (a CPU cache on a CUDA machine, the
        swap space of :mod:`pagedlab.attention.swap`), so copies to and from the GPU are DMA."""
        # Block ids are int32 in block tables, so num_blocks must fit int32.
        self._num_blocks = check_int(num_blocks, "num_blocks", minimum=1, maximum=INT32_MAX)
        self._block_size = check_int(block_size, "block_size", minimum=1)
        self._num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1)
        self._head_dim = check_int(head_dim, "head_dim", minimum=1)
        if not isinstance(dtype, torch.dtype):
            raise ArgumentTypeError(f"dtype must be a torch.dtype, got {dtype!r}")
        if dtype not in SUPPORTED_DTYPES:
            raise ArgumentTypeError(f"dtype must be float16, bfloat16 or float32, got {dtype}")
        self._dtype = dtype
        self._device = check_device(device) or backend.device()
        check_bool(pin_memory, "pin_memory")
        if pin_memory and (self._device.type != "cpu" or not torch.cuda.is_available()):
            raise ValueError(
                f"pin_memory=True needs a CPU cache on a CUDA machine, got device {self._device}"
                f" (CUDA available: {torch.cuda.is_available()})"
            )
        shape = (self._num_blocks, self._block_size, self._num_kv_heads, self._head_dim)
        needed = 2 * math.prod(shape) * dtype.itemsize
        have: int | None = None  # bytes of memory the device has in all (RAM for the CPU)
        if self._device.type == "cuda":
            have = int(torch.cuda.get_device_properties(self._device).total_memory)
        else:  # unknown where there is no sysconf (Windows) or no such name
            with contextlib.suppress(AttributeError, ValueError, OSError):
                have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        sizes = (
            f"num_blocks={self._num_blocks}, block_size={self._block_size}, "
            f"num_kv_heads={self._num_kv_heads}, head_dim={self._head_dim}"
        )
        if have is not None and needed > have:
            raise ValueError(
                f"K and V for {sizes} in {dtype} need {needed / 2**30:.1f} GiB, more than "
                f"the {have / 2**30:.1f} GiB of {self._device} memory"
            )
        try:
            self._key = torch.zeros(shape, dtype=dtype, device=self._device, pin_memory=pin_memory)
            self._value = torch.zeros_like(self._key, pin_memory=pin_memory)
        except RuntimeError as error:  # out of memory right now (torch.OutOfMemoryError too)
            raise ValueError(
                f"could not allocate {needed / 2**30:.1f} GiB for K and V ({sizes}) on "
                f"{self._device}: {str(error).splitlines()[0]}"
            ) from None

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def num_kv_heads(self) -> int:
        return self._num_kv_heads

    @property
    def head_dim(self) -> int:
        return self._head_dim

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def key(self) -> torch.Tensor:
        """K, ``[num_blocks, block_size, num_kv_heads, head_dim]`` (edit in place only)."""
        return self._key

    @property
    def value(self) -> torch.Tensor:
        """V, the same shape as ``key`` (edit in place only)."""
        return self._value

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def nbytes(self) -> int:
        """Bytes held by K and V together, used or not."""
        return self.key.nbytes + self.value.nbytes

    def __repr__(self) -> str:
        return (
            f"PagedKVCache(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, dtype={self.dtype})"
        )

    # -- checks ---------------------------------------------------------------------------

    def _block(self, name: str, value: object) -> int:
        block = check_int(value, name)
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"{name} = {block} is not a block id in [0, {self.num_blocks})")
        return block

    def _indices(
        self, name: str, values: object, minimum: int = INT64_MIN, maximum: int = INT64_MAX
    ) -> torch.Tensor:
        """1-D int64 tensor on the cache's device from a list of ints (checked against
        ``[minimum, maximum]`` here) or an integer tensor (checked by the caller)."""
        if isinstance(values, torch.Tensor):
            t = require_tensor(name, values)
            if t.numel() == 0 and t.dim() == 1:
                return torch.empty(0, dtype=torch.int64, device=self.device)
            require_integers(name, t)
            if t.dim() != 1:
                raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
            return t.to(device=self.device, dtype=torch.int64)
        ints = int_list(name, values, minimum, maximum)
        return torch.tensor(ints, dtype=torch.int64, device=self.device)

    def _slots(self, slot_mapping: SlotsLike) -> torch.Tensor:
        slots = self._indices("slot_mapping", slot_mapping, 0, self.num_slots - 1)
        if slots.numel() == 0:
            return slots
        bad = (slots < 0) | (slots >= self.num_slots)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"slot_mapping[{i}] = {int(slots[i])} is not a slot in [0, {self.num_slots}) "
                f"({self.num_blocks} blocks x block_size {self.block_size})"
            )
        uniq, counts = slots.unique(return_counts=True)
        if uniq.numel() != slots.numel():
            dup = int(uniq[counts > 1][0])
            raise ValueError(f"slot_mapping writes slot {dup} more than once")
        return slots

    def _tokens(self, name: str, t: object, num_tokens: int) -> torch.Tensor:
        t = require_tensor(name, t)
        want = (num_tokens, self.num_kv_heads, self.head_dim)
        if tuple(t.shape) != want:
            raise ValueError(
                f"{name} must be [num_tokens, num_kv_heads, head_dim] = {list(want)}, "
                f"got {list(t.shape)}"
            )
        if t.dtype != self.dtype:
            raise ArgumentTypeError(f"{name} dtype {t.dtype} != cache dtype {self.dtype}")
        if t.device != self.key.device:
            raise ValueError(f"{name} is on {t.device} but the cache is on {self.key.device}")
        t = t.detach()  # the cache holds data, never an autograd graph
        ours = {c.untyped_storage().data_ptr() for c in (self._key, self._value)}
        if t.numel() and t.untyped_storage().data_ptr() in ours:
            t = t.clone()  # a view of this cache: read it whole before any slot is written
        return t

    # -- operations -----------------------------------------------------------------------

    def write(self, slot_mapping: SlotsLike, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k[i]``/``v[i]`` (``[num_kv_heads, head_dim]``) at slot ``slot_mapping[i]``."""
        slots = self._slots(slot_mapping)
        k = self._tokens("k", k, slots.numel())
        v = self._tokens("v", v, slots.numel())
        if slots.numel() == 0:
            return
        # The kernel where Triton can read this cache (a CPU cache on a GPU machine, or bf16
        # in the interpreter, is written with torch indexing instead: same result).
        use_triton = (
            backend.runs_on(self.key.device)
            and (backend.BACKEND == "compiled" or self.dtype != torch.bfloat16)
            and tuning.reshape_and_cache_fits(self.num_kv_heads, self.head_dim)
        )
        if use_triton:
            from pagedlab.attention import launch

            with backend.on_device(self.device):
                launch.launch_reshape_and_cache(k, v, self.key, self.value, slots)
        else:  # no Triton, or bf16 (the interpreter cannot hold it): plain torch indexing
            self.store(slots, k, v)

    def store(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """``write`` without the checks, by torch indexing: for a caller that computed
        ``slots`` (int64, distinct, in range) from its own tables and k/v in the cache's dtype
        (the engine's forward, once per layer). Misuse here is not caught."""
        self._key.view(self.num_slots, self.num_kv_heads, self.head_dim)[slots] = k
        self._value.view(self.num_slots, self.num_kv_heads, self.head_dim)[slots] = v

    def copy_block(self, src: int, dst: int) -> None:
        """Copy physical block ``src`` (all offsets, K and V) over block ``dst``."""
        src = self._block("src", src)
        dst = self._block("dst", dst)
        if src != dst:
            self._key[dst].copy_(self._key[src])
            self._value[dst].copy_(self._value[src])

    def gather(self, blocks: SlotsLike, num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of K and V ``[num_tokens, num_kv_heads, head_dim]`` of one sequence in logical
        order, read through the first ``ceil(num_tokens / block_size)`` entries of ``blocks``."""
        num_tokens = check_int(num_tokens, "num_tokens", minimum=0)
        table = self._indices("blocks", blocks)
        capacity = table.numel() * self.block_size
        if num_tokens > capacity:
            raise ValueError(
                f"num_tokens = {num_tokens} exceeds {table.numel()} blocks x block_size "
                f"{self.block_size} = {capacity}"
            )
        pages = ceil_div(num_tokens, self.block_size)
        used = table[:pages]
        bad = (used < 0) | (used >= self.num_blocks)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"blocks[{i}] = {int(used[i])} is not a block id in [0, {self.num_blocks})"
            )
        k = self.key[used].flatten(0, 1)[:num_tokens].clone()
        v = self.value[used].flatten(0, 1)[:num_tokens].clone()
        return k, v
