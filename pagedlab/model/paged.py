"""The paged side of the attention seam: K/V by slot mapping into pages, read back by table.

A :class:`PagedStep` is one forward of a serving step over *pieces*: runs of consecutive
positions ``first .. first + count - 1`` of one sequence whose earlier positions' K/V are in
the pages already (a decode is a piece of one token; a prefill chunk, a recompute or the rest
of a prompt after a prefix-cache hit, a longer one). Per layer it

1. writes every piece's new K/V at its slots, all at once (vLLM's reshape-and-cache);
2. reads the decodes in one call through their block tables (:func:`default_decode_attention`:
   the Triton kernel on a GPU, batched torch on a CPU, where the interpreter would crawl);
3. gathers each longer piece's K/V from the pages and runs dense causal attention, queries
   offset by ``first`` (the kernel is a decode kernel: one query per sequence). Reading the
   prefix *from the pages* keeps the check honest: every path reads what the pages hold.

With ``batch_invariant=True`` every piece is read through
:func:`pagedlab.model.kv.invariant_attention` (one query at a time, fixed key tiles): each
token's bits are :func:`pagedlab.model.generate_contiguous`'s, whatever the batch.

Invariant (the caller's): no piece writes a slot another piece of the same step reads or
writes, except a prefix block it fills (all K/V are stored before any piece attends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter

import torch

from pagedlab.attention import PagedKVCache, backend, block_tables_tensor, paged_attention
from pagedlab.attention.ops import attend_pages
from pagedlab.ground.checks import ArgumentTypeError, ceil_div, check_bool, check_int, slot_mapping
from pagedlab.model.checks import check_instance, check_qkv
from pagedlab.model.kv import causal_attention, invariant_attention

DecodeAttention = Callable[..., torch.Tensor]
_layout = attrgetter("num_blocks", "block_size", "device")  # what every layer's cache shares


def default_decode_attention() -> DecodeAttention:
    """The decode read where no other is given: the Triton kernel where it compiles (a GPU),
    batched torch elsewhere (decided once, in :mod:`pagedlab.attention.backend`)."""
    return paged_attention if backend.BACKEND == "compiled" else attend_pages


@dataclass(frozen=True)
class Piece:
    """Positions ``first .. first + count - 1`` of one sequence; ``blocks`` its block list."""

    blocks: tuple[int, ...]  # at least ceil((first + count) / block_size) blocks
    first: int
    count: int

    def __post_init__(self) -> None:
        _check_piece(self.blocks, self.first, self.count)

    def slots(self, block_size: int) -> list[int]:
        """Flat slot of each new position: ``block * block_size + offset``."""
        self._check_block_size(block_size)
        return slot_mapping(self.blocks, self.first, self.count, block_size)

    def read_blocks(self, block_size: int) -> tuple[int, ...]:
        """Blocks attention reads: those holding positions ``0 .. first + count - 1``."""
        self._check_block_size(block_size)
        return self.blocks[: ceil_div(self.first + self.count, block_size)]

    def _check_block_size(self, block_size: object) -> None:
        """``block_size >= 1`` at which the piece's blocks hold its positions."""
        size = check_int(block_size, "block_size", minimum=1)
        needed = ceil_div(self.first + self.count, size)
        if len(self.blocks) < needed:
            raise ValueError(
                f"positions {self.first}..{self.first + self.count - 1} need {needed} blocks of "
                f"{size}, the piece has {len(self.blocks)}"
            )


def _check_piece(blocks: object, first: object, count: object) -> None:
    """``blocks`` a tuple of block ids >= 0, ``first >= 0``, ``count >= 1``."""
    if not isinstance(blocks, tuple):
        raise ArgumentTypeError(f"blocks must be a tuple of block ids, got {blocks!r}")
    for i, block in enumerate(blocks):
        check_int(block, f"blocks[{i}]", minimum=0)
    check_int(first, "first", minimum=0)
    check_int(count, "count", minimum=1)


class PagedStep:
    """A :class:`~pagedlab.model.kv.KVStore` over one ``PagedKVCache`` per layer."""

    def __init__(
        self,
        caches: Sequence[PagedKVCache],
        pieces: Sequence[Piece],
        decode_attention: DecodeAttention | None = None,
        batch_invariant: bool = False,
    ) -> None:
        _check_step(caches, pieces, decode_attention, batch_invariant)
        self.caches, self.pieces = caches, list(pieces)
        self.decode_attention, self.batch_invariant = decode_attention, batch_invariant
        size, device = caches[0].block_size, caches[0].device
        self.slots = torch.tensor(
            [s for p in self.pieces for s in p.slots(size)], dtype=torch.int64, device=device
        )
        self.starts = starts = [0, *accumulate(p.count for p in self.pieces)][:-1]
        self.decodes = [i for i, p in enumerate(self.pieces) if p.count == 1]
        self.prefills = [i for i, p in enumerate(self.pieces) if p.count > 1]
        if self.decodes:
            chosen = [self.pieces[i] for i in self.decodes]
            self.decode_rows = torch.tensor([starts[i] for i in self.decodes], device=device)
            self.block_tables = block_tables_tensor(
                [list(p.read_blocks(size)) for p in chosen], device=device
            )
            self.seq_lens = torch.tensor(
                [p.first + 1 for p in chosen], dtype=torch.int32, device=device
            )
        self.kernel_calls = 0

    @property
    def num_tokens(self) -> int:
        return int(self.slots.numel())

    def positions(self) -> torch.Tensor:
        return torch.cat([torch.arange(p.first, p.first + p.count) for p in self.pieces]).to(
            self.caches[0].device
        )

    def last_rows(self) -> list[int]:
        """Row of each piece's last token in the flat batch (whose logits pick a next token)."""
        return [start + p.count - 1 for start, p in zip(self.starts, self.pieces, strict=True)]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._check_attend(layer, q, k, v)
        cache = self.caches[layer]
        k, v = k.to(cache.dtype), v.to(cache.dtype)
        if backend.BACKEND == "compiled" and cache.device.type == "cuda":
            cache.write(self.slots, k, v)  # the Triton reshape-and-cache kernel
        else:
            cache.store(self.slots, k, v)  # torch indexing: same slots, same result
        out = torch.empty_like(q)
        if self.batch_invariant:
            for p, start in zip(self.pieces, self.starts, strict=True):
                keys, values = self._read(cache, p)
                span = slice(start, start + p.count)
                out[span] = invariant_attention(q[span], keys, values, p.first)
            return out
        if self.decodes:
            attend = self.decode_attention or default_decode_attention()  # looked up now
            rows = self.decode_rows
            out[rows] = attend(
                q[rows].to(cache.dtype), cache.key, cache.value, self.block_tables, self.seq_lens
            ).to(q.dtype)
            self.kernel_calls += 1
        for i in self.prefills:
            p, start = self.pieces[i], self.starts[i]
            keys, values = self._read(cache, p)
            out[start : start + p.count] = causal_attention(
                q[start : start + p.count], keys, values, p.first
            )
        return out

    def _check_attend(
        self, layer: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        """``layer`` one of the caches; q, k, v one row per token of the step, k and v of the
        caches' kv heads and head_dim."""
        index = check_int(layer, "layer", minimum=0, maximum=len(self.caches) - 1)
        check_qkv(q, k, v, 0)
        cache = self.caches[index]
        if q.shape[0] != self.num_tokens:
            raise ValueError(f"q has {q.shape[0]} rows, the step {self.num_tokens} tokens")
        if tuple(k.shape[1:]) != (cache.num_kv_heads, cache.head_dim):
            raise ValueError(
                f"k is {tuple(k.shape[1:])} per token, layer {index}'s cache holds "
                f"{(cache.num_kv_heads, cache.head_dim)}"
            )

    @staticmethod
    def _read(cache: PagedKVCache, piece: Piece) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of positions ``0 .. first + count - 1`` of ``piece``, read from the pages."""
        return cache.gather(list(piece.read_blocks(cache.block_size)), piece.first + piece.count)


def _check_step(
    caches: object, pieces: object, decode_attention: object, batch_invariant: object
) -> None:
    """One or more PagedKVCaches of one block size and device (one per layer); one or more
    Pieces whose blocks exist in them and hold their positions; a callable or None; a bool."""
    if not isinstance(caches, Sequence):
        raise ArgumentTypeError(f"caches must be a list of PagedKVCache, got {caches!r}")
    if not caches:
        raise ValueError("caches must hold one PagedKVCache per layer, got []")
    first = caches[0]
    for i, cache in enumerate(caches):
        check_instance(cache, PagedKVCache, f"caches[{i}]")  # caches[0] first, before its use
        if _layout(cache) != _layout(first):
            raise ValueError(
                f"caches[{i}] has {cache.num_blocks} blocks of {cache.block_size} on "
                f"{cache.device}, caches[0] {first.num_blocks} of {first.block_size} on "
                f"{first.device}"
            )
    if not isinstance(pieces, Sequence):
        raise ArgumentTypeError(f"pieces must be a list of Piece, got {pieces!r}")
    if not pieces:
        raise ValueError("pieces must hold at least one Piece, got []")
    for i, piece in enumerate(pieces):
        check_instance(piece, Piece, f"pieces[{i}]")
        piece._check_block_size(first.block_size)  # enough blocks for its positions
        if piece.blocks and max(piece.blocks) >= first.num_blocks:
            raise ValueError(
                f"pieces[{i}] holds block {max(piece.blocks)}, the caches {first.num_blocks}"
            )
    if decode_attention is not None and not callable(decode_attention):
        raise ArgumentTypeError(f"decode_attention must be callable, got {decode_attention!r}")
    check_bool(batch_invariant, "batch_invariant")
