"""The engine's model runner: executes a scheduler's plan and returns the tokens it sampled.

:class:`ModelRunner` is a :class:`~pagedlab.memory.requests.KVHooks` store: the scheduler's one
executor (:func:`~pagedlab.memory.requests.execute`) swaps out, swaps in, copies, then calls
:meth:`ModelRunner.forward`: **one** forward (:class:`~pagedlab.model.paged.PagedStep`) over
every piece of ``plan.work``, each written through the block list the plan gave it. It reads
the groups' token ids and writes none: the tokens go back in a
:class:`~pagedlab.memory.requests.StepOutput` for ``Scheduler.update``.

Why one forward is exact: the pieces write disjoint slots, and every layer stores all pieces'
K/V before any piece attends, so a piece may read a prefix block another piece of the same
forward writes (a prefix-cache hit on a block scheduled this step). Recomputed positions
never draw: their tokens are known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention import PagedKVCache
from pagedlab.attention.swap import copy_blocks
from pagedlab.memory.block_table import CopyOnWrite
from pagedlab.memory.requests import Group, StepOutput, Work
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


class ModelRunner:
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
        self.generators: dict[str, list[torch.Generator | None]] = {}  # name -> per sample
        self.temperature = 0.0  # 0: greedy
        self.stats = ForwardStats()

    def reset(self, temperature: float = 0.0) -> None:
        """Forget the tracked requests' generators (a new call's only); set the temperature."""
        self.generators, self.temperature = {}, temperature

    def track(self, name: str, generators: Sequence[torch.Generator | None] = (None,)) -> None:
        """Request ``name`` draws with one generator per sample (None: greedy)."""
        self.generators[name] = list(generators)

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        self._copy(self.caches, self.host_caches, pairs)

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        self._copy(self.host_caches, self.caches, pairs)

    def copy(self, cow: CopyOnWrite) -> None:
        for cache in self.caches:
            cache.copy_block(cow.src, cow.dst)
        self.stats.blocks_copied += 1
        self.stats.copies_on_write += 1

    def _copy(self, src: list[PagedKVCache], dst: list[PagedKVCache], pairs: Sequence) -> None:
        for a, b in zip(src, dst, strict=True):
            copy_blocks(a, b, pairs)
        self.stats.blocks_copied += len(pairs)

    @torch.no_grad()
    def forward(self, work: Sequence[Work], groups: dict[str, Group]) -> StepOutput:
        """One forward over every piece; each piece that reaches the end of its sample's known
        tokens yields that sample's next token (the prompt piece: every sample's first)."""
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
        out = StepOutput()
        for row, w in enumerate(work):
            group = groups[w.group]
            generators = self.generators.get(w.group) or [None] * len(group.token_ids)
            for who in _yielders(group, w.sample, w.first + w.count):
                if self.temperature == 0 or generators[who] is None:
                    token = int(best[row])
                else:
                    token = draw(logits[row], generators[who], self.temperature)
                tokens = out.tokens.setdefault(w.group, [[] for _ in group.token_ids])
                tokens[who].append(token)
        s = self.stats
        s.forwards += 1
        s.tokens += step.num_tokens
        s.decode_tokens += len(step.decodes)
        s.prefill_tokens += step.num_tokens - len(step.decodes)
        s.kernel_calls += step.kernel_calls
        return out


def _yielders(group: Group, sample: int, end: int) -> list[int]:
    """Samples whose next token a piece of ``sample`` ending at ``end`` picks: its own, if the
    piece reaches the end of its known tokens (below prompt + output_len + 1: the last new
    token's K/V is never stored); the prompt piece (ending at the prompt's end), every one's."""
    r = group.request
    limit = r.prompt_len + r.output_len + 1
    return [
        s
        for s, known in enumerate(group.token_ids)
        if (s == sample or end == r.prompt_len) and end == len(known) < limit
    ]
