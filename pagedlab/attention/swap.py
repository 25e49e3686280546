"""Swapping K/V between the device pool and a host pool (the data plane of §4.5).

A :class:`HostPool` is the paper's CPU swap space: its own :class:`BlockAllocator` and its own
K/V storage, a :class:`PagedKVCache` on the CPU (in pinned memory when CUDA is available, so
copies to and from the GPU can run asynchronously at full PCIe speed).

- :func:`copy_blocks` copies whole blocks between two caches, one block at a time, K and V:
  as vLLM's ``swap_blocks`` does, one transfer per block. That is why small blocks swap slowly
  (Fig. 19): the cost per transfer is paid once per block.
- :func:`swap_out` / :func:`swap_in` move one sequence: out copies its blocks into host blocks
  and frees its table; in copies them back into *new* device blocks of a new table. The
  kernel's output for the sequence is the same before and after (tests check it), though its
  blocks moved: block tables are addresses, not results.
- :class:`SwappingKV` is the scheduler's data plane (:class:`pagedlab.memory.scheduler.KVHooks`):
  it writes each token's K/V (a deterministic function of request, sample and position, so a
  recompute writes exactly what was dropped), copies on write, and swaps; ``verify`` checks
  every running sequence's K/V against what it should hold.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.requests import Group


def host_cache(
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.float32,
) -> PagedKVCache:
    """A CPU K/V cache; in pinned (page-locked) memory when CUDA is available."""
    pinned = torch.cuda.is_available()
    return PagedKVCache(
        num_blocks, block_size, num_kv_heads, head_dim, dtype, device="cpu", pin_memory=pinned
    )


class HostPool:
    """CPU swap space: a block allocator and the K/V storage its blocks name."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.cache = host_cache(num_blocks, block_size, num_kv_heads, head_dim, dtype)

    @classmethod
    def like(cls, cache: PagedKVCache, num_blocks: int | None = None) -> HostPool:
        """A host pool shaped like ``cache`` (as many blocks unless ``num_blocks`` is given)."""
        blocks = cache.num_blocks if num_blocks is None else check_int(num_blocks, "num_blocks", 1)
        return cls(blocks, cache.block_size, cache.num_kv_heads, cache.head_dim, cache.dtype)

    def __repr__(self) -> str:
        pinned = self.cache.key.is_pinned()
        return f"HostPool({self.allocator!r}, pinned={pinned})"


def _check_like(src: PagedKVCache, dst: PagedKVCache) -> None:
    for name in ("block_size", "num_kv_heads", "head_dim", "dtype"):
        if getattr(src, name) != getattr(dst, name):
            raise ValueError(
                f"caches differ in {name}: {getattr(src, name)} != {getattr(dst, name)}"
            )


def _block_id(cache: PagedKVCache, name: str, value: object) -> int:
    block = check_int(value, f"{name} block")
    if not 0 <= block < cache.num_blocks:
        raise ValueError(f"{name} block {block} is not a block id in [0, {cache.num_blocks})")
    return block


def copy_blocks(src: PagedKVCache, dst: PagedKVCache, pairs: Sequence[tuple[int, int]]) -> None:
    """For each ``(s, d)`` in ``pairs``, copy block ``s`` of ``src`` over block ``d`` of ``dst``.

    One copy per block for K and one for V (vLLM's ``swap_blocks`` loops the same way).
    Validates every pair first, so a bad id changes nothing.
    """
    _check_like(src, dst)
    checked = [(_block_id(src, "src", s), _block_id(dst, "dst", d)) for s, d in pairs]
    non_blocking = src.key.device.type != dst.key.device.type  # host <-> device transfers
    for s, d in checked:
        dst.key[d].copy_(src.key[s], non_blocking=non_blocking)
        dst.value[d].copy_(src.value[s], non_blocking=non_blocking)
    if non_blocking and torch.cuda.is_available():
        torch.cuda.synchronize()


@dataclass(frozen=True)
class SwappedSequence:
    """A sequence swapped out: its host blocks, in logical order, and how many tokens."""

    blocks: tuple[int, ...]
    num_tokens: int


def swap_out(table: BlockTable, device: PagedKVCache, host: HostPool) -> SwappedSequence:
    """Copy ``table``'s blocks into new host blocks, then free the table; atomic.

    Raises OutOfBlocksError, with nothing changed, if the host pool lacks free blocks.
    """
    blocks = table.blocks
    if len(blocks) > host.allocator.num_free:
        raise OutOfBlocksError(
            f"swapping out table {table.id} needs {len(blocks)} host blocks, "
            f"{host.allocator.num_free} are free"
        )
    held = [host.allocator.allocate() for _ in blocks]
    copy_blocks(device, host.cache, list(zip(blocks, held, strict=True)))
    swapped = SwappedSequence(tuple(held), table.num_tokens)
    table.free()
    return swapped


def swap_in(
    swapped: SwappedSequence, host: HostPool, device: PagedKVCache, allocator: BlockAllocator
) -> BlockTable:
    """A new table on new device blocks holding ``swapped``'s K/V; frees its host blocks.

    Atomic: raises OutOfBlocksError with nothing changed if the device pool is too full.
    """
    table = BlockTable(allocator)
    table.append_tokens(swapped.num_tokens)  # raises before anything changed if it cannot
    copy_blocks(host.cache, device, list(zip(swapped.blocks, table.blocks, strict=True)))
    for block in swapped.blocks:
        host.allocator.free(block)
    return table


def token_kv(
    name: str, stream: int, positions: torch.Tensor, num_kv_heads: int, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic K and V ``[len(positions), num_kv_heads, head_dim]`` (float32).

    ``stream`` is 0 for prompt positions (every sample shares them) and ``1 + sample`` for
    generated ones. The same arguments always give bitwise the same tensors.
    """
    seed = (zlib.crc32(name.encode()) % 1000) / 100 + 1.7 * stream
    p = positions.to(torch.float32).reshape(-1, 1, 1)
    h = torch.arange(num_kv_heads, dtype=torch.float32).reshape(1, -1, 1)
    d = torch.arange(head_dim, dtype=torch.float32).reshape(1, 1, -1)
    phase = 0.37 * p + 0.71 * h + 0.13 * d + seed
    return torch.sin(phase), torch.cos(phase) + 0.01 * p


class SwappingKV:
    """Real K/V for a :class:`~pagedlab.memory.scheduler.Scheduler`: device cache + host pool.

    Give the scheduler ``host=store.host.allocator`` and ``kv=store``.
    """

    def __init__(self, device: PagedKVCache, host: HostPool) -> None:
        _check_like(device, host.cache)
        self.device, self.host = device, host

    def _kv(self, group: Group, sample: int, first: int, count: int) -> tuple[torch.Tensor, ...]:
        positions = torch.arange(first, first + count)
        prompt = group.request.prompt_len
        streams = [(positions < prompt, 0), (positions >= prompt, 1 + sample)]
        c = self.device
        k = torch.empty(count, c.num_kv_heads, c.head_dim)
        v = torch.empty_like(k)
        for mask, stream in streams:
            if bool(mask.any()):
                k[mask], v[mask] = token_kv(group.name, stream, positions[mask], *k.shape[1:])
        return k.to(c.dtype).to(c.device), v.to(c.dtype).to(c.device)

    def write(self, group: Group, sample: int, table: BlockTable, first: int, count: int) -> None:
        slots = table.slot_mapping()[first : first + count]
        k, v = self._kv(group, sample, first, count)
        self.device.write(slots, k, v)

    def copy(self, cow: CopyOnWrite) -> None:
        self.device.copy_block(cow.src, cow.dst)

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        copy_blocks(self.device, self.host.cache, pairs)

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        copy_blocks(self.host.cache, self.device, pairs)

    def expected(self, group: Group, sample: int, num_tokens: int) -> tuple[torch.Tensor, ...]:
        """The K and V ``sample`` of ``group`` must hold at positions ``0 .. num_tokens - 1``."""
        return self._kv(group, sample, 0, num_tokens)

    def verify(self, groups: Sequence[Group]) -> int:
        """Assert every running sample's K/V (read through its table) is what it should be.

        Returns how many sequences were checked. Raises AssertionError naming the first
        sequence and position that differ.
        """
        checked = 0
        for group in groups:
            for sample, table in enumerate(group.tables):
                k, v = self.device.gather(table.blocks, table.num_tokens)
                want_k, want_v = self.expected(group, sample, table.num_tokens)
                bad = ((k != want_k) | (v != want_v)).flatten(1).any(1)
                if bool(bad.any()):
                    pos = int(bad.nonzero()[0, 0])
                    raise AssertionError(
                        f"{group.name} sample {sample}: K/V at position {pos} is wrong "
                        f"(block {table.slot(pos)[0]}, offset {table.slot(pos)[1]})"
                    )
                checked += 1
        return checked
