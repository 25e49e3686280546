"""Moving a sequence group between the device pool and the host pool: the block bookkeeping.

§4.5: a swapped-out group's blocks go to a host pool; when it comes back it gets *new* device
blocks and its tables are rebuilt. These functions return the block pairs the data plane copies.
Sharing is kept: a device block held by ``k`` samples becomes one host block with ``k``
references, and comes back as one device block shared by the same ``k`` tables (samples share
everything right after the fork, or only full prompt blocks; :func:`swap_in` refuses any other
sharing). The caller (:class:`~pagedlab.memory.scheduler.Scheduler`) has checked that the
blocks fit and that nothing was freed or shared behind the group's back.
"""

from __future__ import annotations

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import samples_need
from pagedlab.memory.requests import Group


def swap_out(group: Group, host: BlockAllocator) -> list[tuple[int, int]]:
    """Move ``group``'s blocks to ``host``; returns ``(device, host)`` pairs to copy.

    Frees the group's device tables. The caller has checked that ``host`` has a free block for
    each distinct device block (``len(group.device_blocks()) <= host.num_free``).
    """
    blocks = group.device_blocks()
    to_host = {block: host.allocate() for block in blocks}
    group.host = [[to_host[b] for b in t.blocks] for t in group.tables]
    group.host_tokens = [t.num_tokens for t in group.tables]
    for block in blocks:  # one host reference per sample holding the block, as on the device
        holders = sum(held.count(to_host[block]) for held in group.host)
        for _ in range(holders - 1):
            host.share(to_host[block])
    for table in group.tables:
        table.free()
    group.tables = []
    return list(to_host.items())


def swap_in_need(group: Group, host: BlockAllocator) -> int:
    """Free device blocks a swap-in of ``group`` needs: its blocks and room for its next token."""
    need = len(group.host_blocks())
    if not group.prefilling:
        lasts = [(n, held[-1]) for n, held in zip(group.host_tokens, group.host, strict=True)]
        need += samples_need(lasts, 1, host.block_size, host.refcount)
    return need


def swap_in(group: Group, device: BlockAllocator, host: BlockAllocator) -> list[tuple[int, int]]:
    """Rebuild ``group``'s tables on new ``device`` blocks; returns ``(host, device)`` pairs.

    Frees the group's host blocks. The caller has checked ``swap_in_need`` against
    ``device.num_free``.
    """
    size = device.block_size
    samples = list(zip(group.host, group.host_tokens, strict=True))
    full = {hb for held, n in samples for hb in held[: n // size]}
    to_device = {hb: device.allocate() for hb in group.host_blocks() if hb in full}
    tables: list[BlockTable] = []
    seen: dict[tuple[tuple[int, ...], int], BlockTable] = {}
    for held, n in samples:
        key = (tuple(held), n)
        if key in seen:  # identical samples (forked, nothing written since): share it all
            tables.append(seen[key].fork())
            continue
        table = BlockTable(device)
        table.hold_prefix([to_device[hb] for hb in held[: n // size]])
        if n % size:
            if held[-1] in to_device:
                raise RuntimeError(f"group {group.name!r}: a partly filled block is shared")
            table.append_tokens(n % size)
            to_device[held[-1]] = table.blocks[-1]
        seen[key] = table
        tables.append(table)
    for hb in full:  # the tables hold these now: drop the hold that allocate() took
        device.free(to_device[hb])
    pairs = [(hb, to_device[hb]) for hb in group.host_blocks()]
    for held in group.host:
        for hb in held:
            host.free(hb)
    group.tables, group.host, group.host_tokens = tables, [], []
    return pairs
