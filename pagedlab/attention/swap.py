"""Swapping K/V between the device pool and a host pool (the data plane of §4.5).

:func:`copy_blocks` makes one transfer per block, K and V, as vLLM's ``swap_blocks`` does: why
small blocks swap slowly (Fig. 19). A sequence swapped back in lands in *new* device blocks; the
kernel's output is unchanged (block tables are addresses, not results). :class:`SwappingKV`'s
K/V are a deterministic function of request, sample and position, so a recompute writes what
was dropped.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.ground.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, CopyOnWrite, blocks_to_append
from pagedlab.memory.requests import Group, StepOutput, Work


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
        if not isinstance(cache, PagedKVCache):
            raise TypeError(f"cache must be a PagedKVCache, got {type(cache).__name__}")
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


def _pairs(pairs: object) -> list[tuple[object, object]]:
    """``pairs`` as a list of ``(src, dst)``; a TypeError naming ``pairs`` for anything else."""
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise TypeError(f"pairs must be a sequence of (src, dst) block pairs, got {pairs!r}")
    checked = []
    for item in pairs:
        try:
            if isinstance(item, (str, bytes)):
                raise TypeError
            src, dst = item
        except (TypeError, ValueError):
            raise TypeError(
                f"each of pairs must be a (src, dst) pair of block ids, got {item!r}"
            ) from None
        checked.append((src, dst))
    return checked


def copy_blocks(src: PagedKVCache, dst: PagedKVCache, pairs: Sequence[tuple[int, int]]) -> None:
    """For each ``(s, d)`` in ``pairs``, copy block ``s`` of ``src`` over block ``d`` of ``dst``
    (K and V); every pair is validated first, so a bad id changes nothing."""
    for name, cache in (("src", src), ("dst", dst)):
        if not isinstance(cache, PagedKVCache):
            raise TypeError(f"{name} must be a PagedKVCache, got {type(cache).__name__}")
    _check_like(src, dst)
    checked = [(_block_id(src, "src", s), _block_id(dst, "dst", d)) for s, d in _pairs(pairs)]
    non_blocking = src.key.device.type != dst.key.device.type  # host <-> device transfers
    for s, d in checked:
        dst.key[d].copy_(src.key[s], non_blocking=non_blocking)
        dst.value[d].copy_(src.value[s], non_blocking=non_blocking)
    if non_blocking and torch.cuda.is_available():
        torch.cuda.synchronize()


@dataclass(frozen=True)
class SwappedSequence:
    """A sequence swapped out: its host blocks, in logical order, and how many tokens.

    ``holder``, the host table owning the blocks, is freed by :func:`swap_in`: a sequence
    comes back once, and a host block freed behind its back is noticed."""

    blocks: tuple[int, ...]
    num_tokens: int
    holder: BlockTable = field(repr=False, compare=False)

    @property
    def swapped_in(self) -> bool:
        """Whether :func:`swap_in` already brought it back (its host blocks are freed)."""
        return self.holder.freed


def _check_pool(cache: PagedKVCache, allocator: BlockAllocator, name: str) -> None:
    """Refuse an allocator whose block ids the cache cannot hold, or with another block size."""
    if allocator.block_size != cache.block_size:
        raise ValueError(
            f"{name}: allocator block_size {allocator.block_size} != cache block_size "
            f"{cache.block_size}"
        )
    if allocator.num_blocks > cache.num_blocks:
        raise ValueError(
            f"{name}: allocator has {allocator.num_blocks} blocks, more than the cache's "
            f"{cache.num_blocks}: its blocks would have no K/V storage"
        )


def _check_kinds(device: object, host: object) -> None:
    if not isinstance(device, PagedKVCache):
        raise TypeError(f"device must be a PagedKVCache, got {type(device).__name__}")
    if not isinstance(host, HostPool):
        raise TypeError(f"host must be a HostPool, got {type(host).__name__}")
    _check_like(device, host.cache)
    _check_pool(host.cache, host.allocator, "host")


def swap_out(table: BlockTable, device: PagedKVCache, host: HostPool) -> SwappedSequence:
    """Copy ``table``'s blocks into new host blocks, then free the table. Atomic: a bad input
    or too few host blocks raises (TypeError, ValueError, OutOfBlocksError) with nothing done."""
    if not isinstance(table, BlockTable):
        raise TypeError(f"table must be a BlockTable, got {type(table).__name__}")
    _check_kinds(device, host)
    _check_pool(device, table.allocator, "table")
    table.check_usable("swap out")
    blocks = table.blocks
    if len(blocks) > host.allocator.num_free:
        raise OutOfBlocksError(
            f"swapping out table {table.id} needs {len(blocks)} host blocks, "
            f"{host.allocator.num_free} are free"
        )
    holder = BlockTable(host.allocator)
    if table.num_tokens:
        holder.append_tokens(table.num_tokens)  # one host block per device block
    copy_blocks(device, host.cache, list(zip(blocks, holder.blocks, strict=True)))
    table.free()
    return SwappedSequence(tuple(holder.blocks), holder.num_tokens, holder)


def swap_in(
    swapped: SwappedSequence, host: HostPool, device: PagedKVCache, allocator: BlockAllocator
) -> BlockTable:
    """A new table on new device blocks holding ``swapped``'s K/V; frees its host blocks.
    Atomic like :func:`swap_out` (also refuses a sequence swapped in already or elsewhere)."""
    if not isinstance(swapped, SwappedSequence):
        raise TypeError(f"swapped must be a SwappedSequence, got {type(swapped).__name__}")
    if not isinstance(allocator, BlockAllocator):
        raise TypeError(f"allocator must be a BlockAllocator, got {type(allocator).__name__}")
    _check_kinds(device, host)
    _check_pool(device, allocator, "allocator")
    holder = swapped.holder
    if holder.freed:
        raise ValueError(
            f"this SwappedSequence (host blocks {list(swapped.blocks)}) was swapped in already: "
            f"its host blocks were freed and may hold another sequence's K/V now; swap each "
            f"sequence in once"
        )
    if holder.allocator is not host.allocator:
        raise ValueError("swapped was swapped out to a different host pool than host")
    holder.check_usable("swap in")  # a host block freed behind its back
    need = blocks_to_append(0, swapped.num_tokens, allocator.block_size)
    if need > allocator.num_free:
        raise OutOfBlocksError(
            f"swapping in {swapped.num_tokens} tokens needs {need} free device block(s), but "
            f"only {allocator.num_free} of {allocator.num_blocks} are free"
        )
    table = BlockTable(allocator)
    if swapped.num_tokens:
        table.append_tokens(swapped.num_tokens)
    copy_blocks(host.cache, device, list(zip(swapped.blocks, table.blocks, strict=True)))
    holder.free()
    return table


def token_kv(
    name: str, stream: int, positions: torch.Tensor, num_kv_heads: int, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic K and V ``[len(positions), num_kv_heads, head_dim]`` (float32); ``stream``
    is 0 for prompt positions (shared by every sample), ``1 + sample`` for generated ones."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r}")
    stream = check_int(stream, "stream", minimum=0)
    num_kv_heads = check_int(num_kv_heads, "num_kv_heads", minimum=1)
    head_dim = check_int(head_dim, "head_dim", minimum=1)
    if not isinstance(positions, torch.Tensor) or positions.dtype.is_floating_point:
        raise TypeError(f"positions must be an integer torch.Tensor, got {positions!r}")
    seed = (zlib.crc32(name.encode()) % 1000) / 100 + 1.7 * stream
    p = positions.to(torch.float32).reshape(-1, 1, 1)
    h = torch.arange(num_kv_heads, dtype=torch.float32).reshape(1, -1, 1)
    d = torch.arange(head_dim, dtype=torch.float32).reshape(1, 1, -1)
    phase = 0.37 * p + 0.71 * h + 0.13 * d + seed
    return torch.sin(phase), torch.cos(phase) + 0.01 * p


class SwappingKV:
    """Real K/V for a :class:`~pagedlab.memory.scheduler.Scheduler` (give it
    ``host=store.host.allocator`` and ``kv=store``): device cache + host pool."""

    def __init__(self, device: PagedKVCache, host: HostPool) -> None:
        _check_kinds(device, host)
        self.device, self.host = device, host

    def check_pools(self, device: BlockAllocator, host: BlockAllocator) -> None:
        """Refuse pools this store cannot serve: device blocks without K/V storage here, or a
        ``host`` other than this store's own host allocator."""
        _check_pool(self.device, device, "allocator")
        if host is not self.host.allocator:
            raise ValueError(
                "host must be the K/V store's own host pool allocator (host=store.host.allocator): "
                "swapped blocks are copied into store.host.cache, whose blocks it names"
            )

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

    def forward(self, work: Sequence[Work], groups: dict[str, Group]) -> StepOutput:
        """Write each piece's K/V through its blocks; samples no token."""
        for w in work:
            k, v = self._kv(groups[w.group], w.sample, w.first, w.count)
            self.device.write(w.slots(self.device.block_size), k, v)
        return StepOutput()

    def copy(self, cow: CopyOnWrite) -> None:
        self.device.copy_block(cow.src, cow.dst)

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        copy_blocks(self.device, self.host.cache, pairs)

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        copy_blocks(self.host.cache, self.device, pairs)

    def verify(self, groups: Sequence[Group]) -> int:
        """Assert every running sample's K/V (read through its table) is what it should be;
        returns how many sequences were checked."""
        if isinstance(groups, (str, bytes)) or not isinstance(groups, Iterable):
            raise TypeError(f"groups must be a sequence of Groups, got {groups!r}")
        groups = list(groups)
        for group in groups:
            if not isinstance(group, Group):
                raise TypeError(f"groups must hold Groups, got {group!r}")
        checked = 0
        for group in groups:
            for sample, table in enumerate(group.tables):
                k, v = self.device.gather(table.blocks, table.num_tokens)
                want_k, want_v = self._kv(group, sample, 0, table.num_tokens)
                bad = ((k != want_k) | (v != want_v)).flatten(1).any(1)
                if bool(bad.any()):
                    pos = int(bad.nonzero()[0, 0])
                    raise AssertionError(
                        f"{group.name} sample {sample}: K/V at position {pos} is wrong "
                        f"(block {table.slot(pos)[0]}, offset {table.slot(pos)[1]})"
                    )
                checked += 1
        return checked
