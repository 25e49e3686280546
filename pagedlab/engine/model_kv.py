"""The engine's data plane: a scheduler's plan, carried out by running the model once.

:meth:`ModelKV.execute` runs one :class:`~pagedlab.memory.requests.StepResult` (the plan
:meth:`pagedlab.memory.scheduler.Scheduler.schedule` decided) in the order that makes one
forward enough: swaps out (device -> host, every layer), swaps in (host -> device), the
copy-on-writes, then **one** forward (:class:`~pagedlab.model.paged.PagedStep`) over every
piece of ``plan.work``: a serving step's batch of prefill chunks and decodes, each written
through the block list the plan gave it. The last position of a piece that reaches the end
of a sample's known tokens yields its next token: greedy (argmax of the logits) at
``temperature = 0``, else one draw from that sample's own generator
(:mod:`pagedlab.model.sampling`: one draw per token). The token is appended to the group's
``token_ids`` (a :class:`~pagedlab.memory.requests.Group` holds a request's tokens and its
counters together).

Samples (§4.4 parallel sampling): a request of ``n`` samples is one group whose prompt is
prefilled once, on sample 0's table, then forked. The prompt piece's last logits yield the
first token of *every* sample (each drawing from its own generator); after that each sample
is its own sequence (``token_ids[s]``: prompt + that sample's tokens), its pieces written on
its own table, the shared last prompt block copied on its first write.

Why the order is exact: a swap-out reads its blocks before anything this step writes
(blocks it frees may be handed to this step's pieces); swaps in and copies land before the
pieces that read them; the pieces write disjoint slots, and every layer stores all pieces'
K/V before any piece attends (:class:`~pagedlab.model.paged.PagedStep`), so a piece may read
a prefix block another piece of the same forward writes (a prefix-cache hit on a block
scheduled this step). Recomputed positions never draw: their tokens are known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import copy_blocks
from pagedlab.memory.requests import Group, StepResult, Work
from pagedlab.model.layers import project
from pagedlab.model.llama import TinyLlama
from pagedlab.model.paged import DecodeAttention, PagedStep, Piece
from pagedlab.model.sampling import draw


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
        self.generators: dict[str, list[torch.Generator | None]] = {}  # name -> per sample
        self.temperature = 0.0  # 0: greedy
        self.stats = ForwardStats()

    def reset(self, temperature: float = 0.0) -> None:
        """Forget the tracked requests' generators (a new call's only); set the temperature."""
        self.generators, self.temperature = {}, temperature

    def track(self, name: str, generators: Sequence[torch.Generator | None] = (None,)) -> None:
        """Request ``name`` draws with one generator per sample (None: greedy)."""
        self.generators[name] = list(generators)

    def execute(self, plan: StepResult, groups: dict[str, Group]) -> None:
        """Swaps out, swaps in, copies, then one forward over ``plan.work`` (module doc)."""
        if plan.swap_out_pairs:
            self._copy(self.caches, self.host_caches, plan.swap_out_pairs)
        if plan.swap_in_pairs:
            self._copy(self.host_caches, self.caches, plan.swap_in_pairs)
        if plan.copies:
            for cache in self.caches:
                for copy in plan.copies:
                    cache.copy_block(copy.src, copy.dst)
            self.stats.blocks_copied += len(plan.copies)
            self.stats.copies_on_write += len(plan.copies)
        if plan.work:
            self._forward(plan.work, groups)

    def _copy(
        self,
        src: list[PagedKVCache],
        dst: list[PagedKVCache],
        pairs: Sequence[tuple[int, int]],
    ) -> None:
        for a, b in zip(src, dst, strict=True):
            copy_blocks(a, b, pairs)
        self.stats.blocks_copied += len(pairs)

    @torch.no_grad()
    def _forward(self, work: Sequence[Work], groups: dict[str, Group]) -> None:
        """One forward over every piece; append each finishing piece's next token."""
        pieces = [Piece(w.blocks, w.first, w.count) for w in work]
        step = PagedStep(self.caches, pieces, self.decode_attention, self.batch_invariant)
        known = [groups[w.group].token_ids[w.sample] for w in work]
        ids = [t for w, k in zip(work, known, strict=True) for t in k[w.first : w.first + w.count]]
        if len(ids) != step.num_tokens:
            raise RuntimeError("a piece needs tokens not generated yet: the plan is out of order")
        device = self.caches[0].device
        hidden = self.model.hidden(torch.tensor(ids, device=device), step.positions(), step)
        logits = project(self.model.lm_head, hidden[step.last_rows()], self.batch_invariant)
        best = torch.argmax(logits, dim=-1).tolist()
        for row, w in enumerate(work):
            group = groups[w.group]
            generators = self.generators.get(w.group)
            for who in _yielders(group, w.sample, w.first + w.count):
                generator = generators[who] if generators else None
                if self.temperature == 0 or generator is None:
                    token = int(best[row])
                else:
                    token = draw(logits[row], generator, self.temperature)
                group.token_ids[who].append(token)
        s = self.stats
        s.forwards += 1
        s.tokens += step.num_tokens
        s.decode_tokens += len(step.decodes)
        s.prefill_tokens += step.num_tokens - len(step.decodes)
        s.kernel_calls += step.kernel_calls


def _yielders(group: Group, sample: int, end: int) -> list[int]:
    """Samples whose next token a piece of ``sample`` ending at ``end`` picks.

    Its own sample, if the piece reaches the end of its known tokens (below the request's
    limit: prompt + output_len + 1, the last new token's K/V never stored); the prompt piece
    (sample 0, ending at the prompt's end) picks every sample's first.
    """
    r = group.request
    limit = r.prompt_len + r.output_len + 1
    return [
        s
        for s, known in enumerate(group.token_ids)
        if (s == sample or end == r.prompt_len) and end == len(known) < limit
    ]
