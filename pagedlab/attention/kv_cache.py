"""Paged K/V storage: the memory that block tables point into.

``PagedKVCache`` holds two tensors, ``key`` and ``value``, each
``[num_blocks, block_size, num_kv_heads, head_dim]``: the same layout
:func:`pagedlab.paged_attention` reads. A flat *slot* ``block * block_size + offset``
names one position's storage; ``BlockTable.slot_mapping()`` yields one slot per position.

Operations:

- ``write(slot_mapping, k, v)``: store new tokens' K/V at their slots (vLLM's
  reshape-and-cache). Runs the Triton kernel where Triton runs, torch indexing otherwise;
  both give identical results (tests check it).
- ``copy_block(src, dst)``: duplicate one physical block, for copy-on-write after a fork.
- ``gather(blocks, num_tokens)``: one sequence's K and V in logical order, read through its
  block list. This is the "dense layout" a non-paged kernel would need.

Invariants: the cache never changes shape or dtype; a call that raises ``ValueError``
(names the offending value) has changed nothing. Slots in one ``write`` must be distinct
(the order of duplicate writes would be undefined on a GPU). Negative slots are rejected
rather than skipped. This module takes plain lists or tensors, so it does not depend on
pagedlab.memory.allocator or pagedlab.memory.block_table.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pagedlab.attention import backend

SlotsLike = Sequence[int] | torch.Tensor


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


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
    ) -> None:
        self.num_blocks = _positive_int("num_blocks", num_blocks)
        self.block_size = _positive_int("block_size", block_size)
        self.num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        self.head_dim = _positive_int("head_dim", head_dim)
        if dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise ValueError(f"dtype must be float16, bfloat16 or float32, got {dtype}")
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else backend.device()
        shape = (num_blocks, block_size, num_kv_heads, head_dim)
        self.key = torch.zeros(shape, dtype=dtype, device=self.device)
        self.value = torch.zeros(shape, dtype=dtype, device=self.device)

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
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int block id, got {value!r}")
        if not 0 <= value < self.num_blocks:
            raise ValueError(f"{name} = {value} is not a block id in [0, {self.num_blocks})")
        return value

    def _slots(self, slot_mapping: SlotsLike) -> torch.Tensor:
        slots = torch.as_tensor(slot_mapping, device=self.device)
        if slots.dim() != 1:
            raise ValueError(f"slot_mapping must be 1-D, got shape {tuple(slots.shape)}")
        if slots.numel() and slots.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"slot_mapping must hold integers, got dtype {slots.dtype}")
        slots = slots.to(torch.int64)
        if slots.numel() == 0:
            return slots
        bad = (slots < 0) | (slots >= self.num_slots)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"slot_mapping[{i}] = {int(slots[i])} is not a slot in [0, {self.num_slots}) "
                f"({self.num_blocks} blocks x block_size {self.block_size})"
            )
        if slots.unique().numel() != slots.numel():
            uniq, counts = slots.unique(return_counts=True)
            dup = int(uniq[counts > 1][0])
            raise ValueError(f"slot_mapping writes slot {dup} more than once")
        return slots

    def _tokens(self, name: str, t: object, num_tokens: int) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        want = (num_tokens, self.num_kv_heads, self.head_dim)
        if tuple(t.shape) != want:
            raise ValueError(
                f"{name} must be [num_tokens, num_kv_heads, head_dim] = {list(want)}, "
                f"got {list(t.shape)}"
            )
        if t.dtype != self.dtype:
            raise ValueError(f"{name} dtype {t.dtype} != cache dtype {self.dtype}")
        if t.device != self.key.device:
            raise ValueError(f"{name} is on {t.device} but the cache is on {self.key.device}")
        return t

    # -- operations -----------------------------------------------------------------------

    def write(self, slot_mapping: SlotsLike, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k[i]``/``v[i]`` (each ``[num_kv_heads, head_dim]``) at slot ``slot_mapping[i]``.

        Uses the Triton reshape-and-cache kernel when Triton runs here, else torch indexing.
        """
        slots = self._slots(slot_mapping)
        k = self._tokens("k", k, slots.numel())
        v = self._tokens("v", v, slots.numel())
        if slots.numel() == 0:
            return
        # The kernel where Triton can read this cache (a CPU cache on a GPU machine, or bf16
        # in the interpreter, is written with torch indexing instead: same result).
        use_triton = backend.runs_on(self.key.device) and (
            backend.BACKEND == "compiled" or self.dtype != torch.bfloat16
        )
        if use_triton:
            from pagedlab.attention import kernels

            kernels.launch_reshape_and_cache(k, v, self.key, self.value, slots)
        else:  # no Triton, or bf16 (the interpreter cannot hold it): plain torch indexing
            self.write_torch(slots, k, v)

    def write_torch(self, slot_mapping: SlotsLike, k: torch.Tensor, v: torch.Tensor) -> None:
        """Same as :meth:`write`, always in plain torch (the reference the kernel is checked on)."""
        slots = self._slots(slot_mapping)
        k = self._tokens("k", k, slots.numel())
        v = self._tokens("v", v, slots.numel())
        self.key.view(self.num_slots, self.num_kv_heads, self.head_dim)[slots] = k
        self.value.view(self.num_slots, self.num_kv_heads, self.head_dim)[slots] = v

    def copy_block(self, src: int, dst: int) -> None:
        """Copy physical block ``src`` (all offsets, K and V) over block ``dst``."""
        src = self._block("src", src)
        dst = self._block("dst", dst)
        if src != dst:
            self.key[dst].copy_(self.key[src])
            self.value[dst].copy_(self.value[src])

    def gather(self, blocks: SlotsLike, num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V ``[num_tokens, num_kv_heads, head_dim]`` of one sequence, logical order.

        ``blocks`` is the sequence's block list (``BlockTable.blocks``); only its first
        ``ceil(num_tokens / block_size)`` entries are read. Returns copies.
        """
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
            raise ValueError(f"num_tokens must be a non-negative int, got {num_tokens!r}")
        table = torch.as_tensor(blocks, dtype=torch.int64, device=self.device)
        if table.dim() != 1:
            raise ValueError(f"blocks must be 1-D, got shape {tuple(table.shape)}")
        capacity = table.numel() * self.block_size
        if num_tokens > capacity:
            raise ValueError(
                f"num_tokens = {num_tokens} exceeds {table.numel()} blocks x block_size "
                f"{self.block_size} = {capacity}"
            )
        pages = -(-num_tokens // self.block_size)
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
