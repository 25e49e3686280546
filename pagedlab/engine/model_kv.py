"""The engine's data plane: the scheduler's K/V hooks, carried out by running the model.

:class:`ModelKV` is a :class:`pagedlab.memory.scheduler.KVHooks`. When the scheduler says
"positions ``first .. first + count - 1`` of this sequence now have K/V to store", the K/V
are the model's, so storing them means running the model on those tokens. ``write`` does
not run it at once: it queues a :class:`~pagedlab.model.paged.Piece` (with a snapshot of the
table's blocks), and :meth:`flush` runs every queued piece in **one** forward
(:class:`~pagedlab.model.paged.PagedStep`): a serving step's batch of prefill chunks and
decodes. The last position of a piece that reaches the end of a sequence's known tokens
yields its next token: greedy (argmax of the logits) at ``temperature = 0``, else one draw
from that sample's own generator (:mod:`pagedlab.model.sampling`: one draw per token).

Samples (§4.4 parallel sampling): a request of ``n`` samples is one group whose prompt is
prefilled once, on sample 0's table, then forked. The prompt piece's last logits yield the
first token of *every* sample (each drawing from its own generator); after that each sample
is its own sequence (``samples[name][s]``: prompt + that sample's tokens), its pieces written
on its own table, the shared last prompt block copied on its first write (``copy``).

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
K/V. Token bookkeeping: ``samples[name][s]`` is prompt + sample ``s``'s generated tokens
(``tokens[name]`` is sample 0's, the same list); a piece needs ``[first : first + count]`` of its
sample's. Recomputed positions never draw: their tokens are known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import copy_blocks
from pagedlab.memory.block_table import BlockTable, CopyOnWrite
from pagedlab.memory.requests import Group
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama
from pagedlab.model.paged import DecodeAttention, PagedStep, Piece
from pagedlab.model.sampling import draw

Sequence_ = tuple[str, int]  # (request name, sample index)


@dataclass
class ForwardStats:
    """What the model did: forwards run, tokens through it, paged-kernel calls, copies."""

    forwards: int = 0
    tokens: int = 0
    decode_tokens: int = 0
    prefill_tokens: int = 0
    kernel_calls: int = 0
    blocks_copied: int = 0  # copy-on-write copies plus blocks swapped either way
    copies_on_write: int = 0


class ModelKV:
    """Per-layer device caches (and host caches for swap) filled by running ``model``."""

    def __init__(
        self,
        model: TinyLlama,
        caches: Sequence[PagedKVCache],
        host_caches: Sequence[PagedKVCache] = (),
        decode_attention: DecodeAttention | None = None,
        batch_invariant: bool = False,
    ) -> None:
        self.model, self.caches, self.host_caches = model, list(caches), list(host_caches)
        self.decode_attention, self.batch_invariant = decode_attention, batch_invariant
        self.block_size = self.caches[0].block_size
        self.tokens: dict[str, list[int]] = {}  # name -> prompt + sample 0's tokens so far
        self.samples: dict[str, list[list[int]]] = {}  # name -> per sample, prompt + its tokens
        self.prompt_len: dict[str, int] = {}
        self.limit: dict[str, int] = {}  # name -> prompt + max_new_tokens
        self.generators: dict[str, list[torch.Generator | None]] = {}
        self.temperature = 0.0  # 0: greedy
        self.stats = ForwardStats()
        self._queue: list[tuple[Sequence_, Piece]] = []
        self._reads: dict[int, set[Sequence_]] = {}
        self._writes: dict[int, set[Sequence_]] = {}

    def reset(self, temperature: float = 0.0) -> None:
        """Forget the tracked requests (a new call's requests only); set the temperature."""
        self.discard()
        self.tokens, self.samples, self.prompt_len, self.limit = {}, {}, {}, {}
        self.generators, self.temperature = {}, temperature

    def discard(self) -> None:
        """Drop the queued pieces unrun (an aborted run: their blocks are being freed)."""
        self._queue, self._reads, self._writes = [], {}, {}

    def track(
        self,
        name: str,
        prompt: list[int],
        max_new_tokens: int,
        generators: Sequence[torch.Generator | None] = (None,),
    ) -> None:
        """Request ``name``: ``prompt``, its new-token limit, one generator per sample."""
        self.samples[name] = [list(prompt) for _ in generators]
        self.tokens[name] = self.samples[name][0]
        self.prompt_len[name] = len(prompt)
        self.limit[name] = len(prompt) + max_new_tokens
        self.generators[name] = list(generators)

    # --- KVHooks ---------------------------------------------------------------------------
    def write(self, group: Group, sample: int, table: BlockTable, first: int, count: int) -> None:
        name, size = group.name, self.block_size
        if not 0 <= sample < len(self.samples[name]):
            raise ValueError(f"{name}: sample {sample} is not one of its {len(self.samples[name])}")
        seq, known = (name, sample), self.samples[name][sample]
        piece = Piece(tuple(table.blocks), first, count)
        if first + count > len(known):
            self.flush()  # a queued piece yields the token this one reads
            if first + count > len(known):
                raise RuntimeError(
                    f"{name} sample {sample}: positions {first}..{first + count - 1} need "
                    f"tokens not yet generated ({len(known)} known)"
                )
        writes = {slot // size for slot in piece.slots(size)}
        reads = set(piece.read_blocks(size))
        if self._clash(seq, writes, self._reads) or self._clash(seq, reads, self._writes):
            self.flush()
        self._queue.append((seq, piece))
        for block in reads:
            self._reads.setdefault(block, set()).add(seq)
        for block in writes:
            self._writes.setdefault(block, set()).add(seq)

    @staticmethod
    def _clash(seq: Sequence_, blocks: set[int], held: dict[int, set[Sequence_]]) -> bool:
        return any(held.get(b, set()) - {seq} for b in blocks)

    def copy(self, cow: CopyOnWrite) -> None:
        self.flush()
        for cache in self.caches:
            cache.copy_block(cow.src, cow.dst)
        self.stats.blocks_copied += 1
        self.stats.copies_on_write += 1

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
        pieces = [p for _, p in queue]
        step = PagedStep(self.caches, pieces, self.decode_attention, self.batch_invariant)
        device = self.caches[0].device
        ids = torch.tensor(
            [
                t
                for (name, sample), p in queue
                for t in self.samples[name][sample][p.first : p.first + p.count]
            ],
            device=device,
        )
        hidden = self.model.hidden(ids, step.positions(), step)
        logits = project(self.model.lm_head, hidden[step.last_rows()], self.batch_invariant)
        best = torch.argmax(logits, dim=-1).tolist()
        for row, ((name, sample), piece) in enumerate(queue):
            for who in self._yielders(name, sample, piece.first + piece.count):
                generator = self.generators[name][who]
                if self.temperature == 0 or generator is None:
                    token = int(best[row])
                else:
                    token = draw(logits[row], generator, self.temperature)
                self.samples[name][who].append(token)
        s = self.stats
        s.forwards += 1
        s.tokens += step.num_tokens
        s.decode_tokens += len(step.decodes)
        s.prefill_tokens += step.num_tokens - len(step.decodes)
        s.kernel_calls += step.kernel_calls

    def _yielders(self, name: str, sample: int, end: int) -> list[int]:
        """Samples whose next token a piece of ``sample`` ending at ``end`` picks.

        Its own sample, if the piece reaches the end of its known tokens (below the limit);
        the prompt piece (sample 0, ending at the prompt's end) picks every sample's first.
        """
        limit, prompt = self.limit[name], self.prompt_len[name]
        return [
            s
            for s, known in enumerate(self.samples[name])
            if (s == sample or end == prompt) and end == len(known) < limit
        ]
