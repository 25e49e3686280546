"""The engine's data plane: the scheduler's K/V hooks, carried out by running the model.

:class:`ModelKV` is a :class:`pagedlab.memory.scheduler.KVHooks`. When the scheduler says
"positions ``first .. first + count - 1`` of this sequence now have K/V to store", the K/V
are the model's, so storing them means running the model on those tokens. ``write`` does
not run it at once: it queues a :class:`~pagedlab.model.paged.Piece` (with a snapshot of the
table's blocks), and :meth:`flush` runs every queued piece in **one** forward
(:class:`~pagedlab.model.paged.PagedStep`): a serving step's batch of prefill chunks and
decodes. The last position of a piece that reaches the end of a sequence's known tokens
yields its next token (greedy: argmax of the logits).

Ordering (why it is exact): within one scheduler step the hooks' effects must land in the
order the scheduler issued them. ``flush`` runs first whenever queued work must be in the
pages before the next thing happens:

- ``copy`` (copy-on-write), ``swap_out`` and ``swap_in``: they copy blocks, so the K/V they
  read (or overwrite) must be there: flush, then copy, in every layer's cache;
- a write whose blocks another queued piece reads or writes (a block freed and handed out
  again within the step: a group that finished or was preempted after its decode was queued):
  flush, so each forward's pieces touch disjoint pages;
- a write whose input tokens are not known yet (a piece after one that yields its token).

A queued piece of a group preempted later in the same step still runs (into blocks it no
longer holds, before anyone else writes them): its token is kept, the recompute rebuilds the
K/V. Token bookkeeping: ``tokens[name]`` is prompt + generated; a piece needs
``tokens[first : first + count]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import copy_blocks
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.requests import Group
from pagedlab.model.llama import TinyLlama
from pagedlab.model.paged import DecodeAttention, PagedStep, Piece


@dataclass
class ForwardStats:
    """What the model did: forwards run, tokens through it, paged-kernel calls, copies."""

    forwards: int = 0
    tokens: int = 0
    decode_tokens: int = 0
    prefill_tokens: int = 0
    kernel_calls: int = 0
    blocks_copied: int = 0


class ModelKV:
    """Per-layer device caches (and host caches for swap) filled by running ``model``."""

    def __init__(
        self,
        model: TinyLlama,
        caches: Sequence[PagedKVCache],
        host_caches: Sequence[PagedKVCache] = (),
        decode_attention: DecodeAttention | None = None,
    ) -> None:
        self.model, self.caches, self.host_caches = model, list(caches), list(host_caches)
        self.decode_attention = decode_attention
        self.block_size = self.caches[0].block_size
        self.tokens: dict[str, list[int]] = {}  # name -> prompt + generated so far
        self.limit: dict[str, int] = {}  # name -> prompt + max_new_tokens
        self.stats = ForwardStats()
        self._queue: list[tuple[str, Piece]] = []
        self._reads: dict[int, set[str]] = {}
        self._writes: dict[int, set[str]] = {}

    def track(self, name: str, prompt: list[int], max_new_tokens: int) -> None:
        self.tokens[name] = list(prompt)
        self.limit[name] = len(prompt) + max_new_tokens

    # --- KVHooks ---------------------------------------------------------------------------
    def write(self, group: Group, sample: int, table: BlockTable, first: int, count: int) -> None:
        if sample != 0:
            raise ValueError(f"{group.name}: the engine is greedy, one sample a request")
        name, size = group.name, self.block_size
        piece = Piece(tuple(table.blocks), first, count)
        if first + count > len(self.tokens[name]):
            self.flush()  # a queued piece yields the token this one reads
            if first + count > len(self.tokens[name]):
                raise RuntimeError(
                    f"{name}: positions {first}..{first + count - 1} need tokens not yet "
                    f"generated ({len(self.tokens[name])} known)"
                )
        writes = {slot // size for slot in piece.slots(size)}
        reads = set(piece.read_blocks(size))
        if self._clash(name, writes, self._reads) or self._clash(name, reads, self._writes):
            self.flush()
        self._queue.append((name, piece))
        for block in reads:
            self._reads.setdefault(block, set()).add(name)
        for block in writes:
            self._writes.setdefault(block, set()).add(name)

    @staticmethod
    def _clash(name: str, blocks: set[int], held: dict[int, set[str]]) -> bool:
        return any(held.get(b, set()) - {name} for b in blocks)

    def copy(self, cow: CopyOnWrite) -> None:
        self.flush()
        for cache in self.caches:
            cache.copy_block(cow.src, cow.dst)
        self.stats.blocks_copied += 1

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        self.flush()
        for device, host in zip(self.caches, self.host_caches, strict=True):
            copy_blocks(device, host, pairs)
        self.stats.blocks_copied += len(pairs)

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        self.flush()
        for device, host in zip(self.caches, self.host_caches, strict=True):
            copy_blocks(host, device, pairs)
        self.stats.blocks_copied += len(pairs)

    # --- running the model -----------------------------------------------------------------
    @torch.no_grad()
    def flush(self) -> None:
        """Run every queued piece in one forward; append each finished piece's next token."""
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        self._reads, self._writes = {}, {}
        step = PagedStep(self.caches, [p for _, p in queue], self.decode_attention)
        device = self.caches[0].device
        ids = torch.tensor(
            [t for name, p in queue for t in self.tokens[name][p.first : p.first + p.count]],
            device=device,
        )
        hidden = self.model.hidden(ids, step.positions(), step)
        logits = self.model.lm_head(hidden[step.last_rows()])
        best = torch.argmax(logits, dim=-1).tolist()
        for (name, piece), token in zip(queue, best, strict=True):
            known = self.tokens[name]
            if piece.first + piece.count == len(known) < self.limit[name]:
                known.append(int(token))
        s = self.stats
        s.forwards += 1
        s.tokens += step.num_tokens
        s.decode_tokens += len(step.decodes)
        s.prefill_tokens += step.num_tokens - len(step.decodes)
        s.kernel_calls += step.kernel_calls
