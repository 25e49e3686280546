"""Sharing KV blocks between sequences: parallel sampling and beam search (paper §4.4).

Both use only ``BlockTable.fork`` / ``append_tokens`` / ``free``, so the rules that make
sharing safe live in the block table: a fork shares every block (ref count + 1) and copies
nothing; writing into a shared, partly filled last block copies it first (the caller's K/V
storage performs the returned ``CopyOnWrite``, e.g. ``PagedKVCache.copy_block(src, dst)``); a
block returns to the free list when its last holder frees it. ``fork_samples``: n samples of
one prompt (Fig. 8). ``beam_step``: one step of beam search (Fig. 9): survivors are forked from
their parents, every old candidate freed, then each survivor appends its tokens (forking
before freeing: a parent with one survivor hands its blocks over without a copy). Not handled:
scores and token choice (the caller picks the parents), running out of blocks
(``OutOfBlocksError``, nothing changed). Invariants (tests/memory/test_sharing_properties.py):
each block's ref count is the number of live tables holding it; a block being written has ref
count 1; freeing every table returns every block.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.ground.checks import check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, CopyOnWrite, blocks_to_append
from pagedlab.memory.owner import items_of

MAX_WIDTH = 1024
"""Most samples (``fork_samples``) or candidates (``beam_step``) one call makes."""


def fork_samples(prompt: BlockTable, n: int) -> list[BlockTable]:
    """``n`` samples of one prompt: the prompt's own table first, then ``n - 1`` forks (every
    block of the prompt then held by ``n`` tables)."""
    if not isinstance(prompt, BlockTable):
        raise TypeError(f"prompt must be a BlockTable, got {prompt!r}")
    n = check_int(n, "n (number of samples)", minimum=1, maximum=MAX_WIDTH)
    prompt.check_usable("fork")
    return [prompt] + [prompt.fork() for _ in range(n - 1)]


@dataclass(frozen=True)
class BeamStepResult:
    """What one beam-search step did to the pool."""

    beams: list[BlockTable]  # the new candidates, in the order of ``parents``
    copies: list[CopyOnWrite]  # copy-on-writes the KV storage must perform, in order
    freed: list[int]  # blocks whose ref count reached 0, in the order they were freed
    allocated: list[int]  # blocks taken from the free list (new blocks and copy targets)


def beam_step(
    beams: Sequence[BlockTable], parents: Sequence[int], num_tokens: int = 1
) -> BeamStepResult:
    """Keep the candidates ``parents[i]`` (indices into ``beams``; a parent may appear several
    times or not at all) and append ``num_tokens``; the old tables are all freed: use the
    returned ``beams``. Atomic: a refusal (OutOfBlocksError included) changes nothing."""
    needed, available, checked = _plan(beams, parents, num_tokens)
    allocator = beams[0].allocator
    if needed > available:
        raise OutOfBlocksError(
            f"beam step of width {len(checked)} needs {needed} free block(s), "
            f"but only {available} of {allocator.num_blocks} would be free"
        )
    with allocator.record() as events:
        survivors = [beams[i].fork() for i in checked]
        for table in beams:
            table.free()
        copies = [c for c in (t.append_tokens(num_tokens) for t in survivors) if c is not None]
    return BeamStepResult(
        beams=survivors,
        copies=copies,
        freed=[e.block for e in events if e.kind == "free"],
        allocated=[e.block for e in events if e.kind == "allocate"],
    )


def can_beam_step(beams: Sequence[BlockTable], parents: Sequence[int], num_tokens: int = 1) -> bool:
    """Whether ``beam_step(beams, parents, num_tokens)`` would find the blocks it needs (bad
    input raises as there); changes nothing."""
    needed, available, _ = _plan(beams, parents, num_tokens)
    return needed <= available


def _plan(
    beams: Sequence[BlockTable], parents: Sequence[int], num_tokens: int
) -> tuple[int, int, list[int]]:
    """Check a beam step's arguments; (blocks it allocates, blocks free once the old
    candidates are dropped, parent indices as ints)."""
    if isinstance(beams, (str, bytes)) or not isinstance(beams, Sequence):
        raise TypeError(f"beams must be a list, got {beams!r}")
    indices = items_of(parents, "parents", "parent indices")  # a list, tuple or array
    if not beams:
        raise ValueError("beams must hold at least one candidate, got none")
    width = len(indices)
    if width < 1:
        raise ValueError(f"beam width (len(parents)) must be >= 1, got {width}")
    if width > MAX_WIDTH:
        raise ValueError(f"beam width (len(parents)) must be <= {MAX_WIDTH}, got {width}")
    num_tokens = check_int(num_tokens, "num_tokens", minimum=1)
    for table in beams:
        if not isinstance(table, BlockTable):
            raise TypeError(f"beams must hold BlockTables, got {table!r}")
    allocator = beams[0].allocator
    for table in beams:
        if table.freed:
            raise ValueError(f"beam table {table.id} was already freed")
        if table.allocator is not allocator:
            raise ValueError(f"beam table {table.id} uses a different allocator")
        table.check_usable("step the beam of")
    if len({id(t) for t in beams}) != len(beams):
        raise ValueError("beams repeat a table")
    checked = []
    for p in indices:
        index = check_int(p, "parent index")
        if not 0 <= index < len(beams):
            raise ValueError(f"parent index {index} is out of range [0, {len(beams)})")
        checked.append(index)
    needed, available = _blocks_needed(allocator, beams, checked, num_tokens)
    return needed, available, checked


def _blocks_needed(
    allocator: BlockAllocator, beams: Sequence[BlockTable], parents: list[int], n: int
) -> tuple[int, int]:
    """(blocks the step will allocate, blocks free once the old candidates are dropped)."""
    size = allocator.block_size
    counts = Counter({b: allocator.refcount(b) for t in beams for b in t.blocks})
    for table in beams:
        counts.subtract(table.blocks)
    for i in parents:
        counts.update(beams[i].blocks)
    available = allocator.num_free + sum(1 for c in counts.values() if c == 0)
    needed = 0
    for i in parents:
        blocks = beams[i].blocks
        shared = bool(blocks) and counts[blocks[-1]] > 1
        needed += blocks_to_append(beams[i].num_tokens, n, size, shared)
        if shared:  # a partly filled one is copied (a full one never is: its count is moot)
            counts[blocks[-1]] -= 1
    return needed, available


def holders(tables: Sequence[BlockTable]) -> dict[int, list[int]]:
    """For each physical block, the ids of the live tables that hold it (for ref-count checks)."""
    held: dict[int, list[int]] = {}
    for table in tables:
        if not isinstance(table, BlockTable):
            raise TypeError(f"tables must hold BlockTables, got {table!r}")
        for block in table.blocks:
            held.setdefault(block, []).append(table.id)
    return held
