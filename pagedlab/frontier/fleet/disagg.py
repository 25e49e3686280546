"""Disaggregated prefill: engine A computes a prompt's K/V, its pages move to engine B, B
decodes. What moves: per layer, a block copy from A's pool into blocks B allocated (a new block
table on B), plus the first token A sampled. Each engine is a :class:`pagedlab.engine.Engine`'s
pools (``allocator``, per-layer ``caches``), run through its own forward (``PagedStep``). B holds
``ceil(prompt / block_size)`` blocks before the copy (the first decode needs one more when the
prompt is block-aligned); bytes moved: :func:`transfer_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedlab.attention.swap import copy_blocks
from pagedlab.engine import Engine
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.block_table import BlockTable
from pagedlab.model.layers import project
from pagedlab.model.paged import PagedStep, Piece


def transfer_bytes(
    layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, tokens: int, block_size: int
) -> int:
    """Bytes a disaggregated request moves: whole blocks of K and V in every layer."""
    for name, value in locals().items():
        check_int(value, name, minimum=0 if name == "tokens" else 1)
    return (
        layers * 2 * kv_heads * head_dim * dtype_bytes * ceil_div(tokens, block_size) * block_size
    )


@dataclass(frozen=True)
class Handoff:
    """A prompt prefilled on A, moved to B."""

    table: BlockTable  # on B's allocator, holding the prompt
    first_token: int  # sampled on A from the prompt's last logits
    blocks_allocated: int  # what B allocated before the copy
    bytes_moved: int  # measured: the bytes of every block slice copied


@torch.no_grad()
def _forward(engine: Engine, table: BlockTable, ids: list[int], first: int) -> int:
    """Run ``ids`` (positions ``first ..``) through ``engine``'s pages; the greedy next token."""
    step = PagedStep(engine.caches, [Piece(tuple(table.blocks), first, len(ids))])
    device = engine.caches[0].device
    hidden = engine.model.hidden(torch.tensor(ids, device=device), step.positions(), step)
    return int(torch.argmax(project(engine.model.lm_head, hidden[step.last_rows()])[0]))


def prefill(engine: Engine, prompt: list[int]) -> tuple[BlockTable, int]:
    """``prompt``'s K/V computed into new blocks of ``engine``; (its table, the first token)."""
    table = BlockTable(engine.allocator)
    table.append_tokens(len(prompt))
    return table, _forward(engine, table, list(prompt), 0)


def prefill_and_move(prompt: list[int], a: Engine, b: Engine) -> Handoff:
    """Prefill ``prompt`` on ``a``, copy its blocks into new blocks of ``b``, free ``a``'s."""
    if a is b or a.block_size != b.block_size or a.model is not b.model:
        raise ValueError("A and B must be two engines of one model and one block size")
    source, first = prefill(a, prompt)
    target = BlockTable(b.allocator)
    try:
        target.append_tokens(len(prompt))  # B cannot hold it: refused, A's blocks freed
    finally:
        if not target.blocks:
            source.free()
    pairs = list(zip(source.blocks, target.blocks, strict=True))
    moved = 0
    for src, dst in zip(a.caches, b.caches, strict=True):
        copy_blocks(src, dst, pairs)
        moved += sum(src.key[s].nbytes + src.value[s].nbytes for s, _ in pairs)
    source.free()
    return Handoff(target, first, len(target.blocks), moved)


def decode(
    engine: Engine, table: BlockTable, prompt: list[int], first: int, max_new_tokens: int
) -> list[int]:
    """Greedy decode on ``engine`` from ``table``'s pages: ``max_new_tokens`` tokens (the
    first is ``first``, sampled by the prefill); frees the table."""
    tokens = [first]
    for _ in range(max_new_tokens - 1):
        table.append_tokens(1)
        position = len(prompt) + len(tokens) - 1
        tokens.append(_forward(engine, table, tokens[-1:], position))
    table.free()
    return tokens
