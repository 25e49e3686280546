"""The paged decode kernel, one logical block at a time, in plain torch, step by step.

``paged_attention_steps(query, key_cache, value_cache, block_table_row, seq_len, head)``
does, for ONE sequence and ONE query head, what one program of the teaching kernel
(:func:`pagedlab.attention.ops.paged_attention_one_page`) does, and records every step: its
loop step ``i`` is row ``i`` here (``launch_paged_attention(..., pages_per_step=1)`` makes the
tuned kernel take the same steps). Step ``i`` reads block ``block_table_row[i]``, masks the
slots past ``seq_len`` (never read, weight 0), scores ``s_j = scale * q . k_j`` (kv head
``head // (num_heads // num_kv_heads)``) and folds them into an online softmax::

       m_new = max(m_old, max_j s_j)
       alpha = exp(m_old - m_new)     # 0 on the first block (m_old = -inf), 1 if m stayed
       l     = l * alpha + sum_j exp(s_j - m_new)
       acc   = acc * alpha + sum_j exp(s_j - m_new) * v_j

Invariants (tests check them against the real kernel and the reference): after step ``i``,
``acc / l`` is softmax attention over the positions read so far; after the last it equals
:func:`pagedlab.reference_attention` (fp32 rounding apart); ``m`` never decreases, ``alpha``
is in ``[0, 1]`` and ``l >= 1``. Math in fp32; a step holds Python floats.

Inputs follow :func:`pagedlab.paged_attention` for one sequence (``query`` ``[num_heads,
head_dim]``, ``block_table_row`` a list or 1-D tensor, padding never read), validated by
:func:`~pagedlab.attention.validate.validate_paged_inputs`. No prefill, no batching, no Triton.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention.validate import INT32_MAX, int_list, require_tensor, validate_paged_inputs
from pagedlab.ground.checks import ArgumentTypeError, ceil_div, check_int


@dataclass(frozen=True)
class LoopStep:
    """What one program did with logical block ``logical``: state *after* the block."""

    logical: int  # logical block index i
    physical: int  # block_table_row[i]: where its K/V were read from
    positions: tuple[int, ...]  # the sequence positions it covers (valid slots only)
    masked: int  # slots of the page past seq_len: masked off, never read
    scores: tuple[float, ...]  # scale * q . k for each valid position
    m_old: float  # running max before the block (-inf before the first)
    m_new: float  # running max after it
    alpha: float  # exp(m_old - m_new): how much everything summed so far shrinks
    block_sum: float  # sum of exp(score - m_new) over this block
    l_sum: float  # running sum after the block: l_old * alpha + block_sum
    acc: tuple[float, ...]  # accumulator after the block, one float per head_dim

    @property
    def output(self) -> tuple[float, ...]:
        """``acc / l``: softmax attention over every position read so far."""
        return tuple(a / self.l_sum for a in self.acc)

    @property
    def rescaled(self) -> bool:
        """True when the max grew on a later block, so earlier sums were shrunk."""
        return self.logical > 0 and self.alpha != 1.0


def paged_attention_steps(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_table_row: Sequence[int] | torch.Tensor,
    seq_len: int,
    head: int = 0,
    scale: float | None = None,
) -> list[LoopStep]:
    """Step records of one kernel program (one sequence, query head ``head``); see module doc."""
    query = require_tensor("query", query)
    if query.dim() != 2:
        raise ValueError(
            f"query must be one sequence's [num_heads, head_dim], got {tuple(query.shape)}"
        )
    seq_len = check_int(seq_len, "seq_len", minimum=1, maximum=INT32_MAX)
    ids = int_list("block_table_row", block_table_row, -INT32_MAX - 1, INT32_MAX)
    row = torch.tensor(ids, dtype=torch.int32, device=query.device)
    lens = torch.tensor([seq_len], dtype=torch.int32, device=query.device)
    shapes = validate_paged_inputs(query[None], key_cache, value_cache, row[None], lens, scale)
    head = check_int(head, "head")
    if not 0 <= head < shapes.num_heads:
        raise ValueError(f"head must be an int in [0, {shapes.num_heads}), got {head}")
    size = shapes.block_size
    kv_head = head // (shapes.num_heads // shapes.num_kv_heads)
    q = query[head].float() * shapes.scale  # pre-scaled, as in the kernel
    m = torch.tensor(-math.inf, device=q.device)
    l_sum = torch.tensor(0.0, device=q.device)
    acc = torch.zeros(shapes.head_dim, device=q.device)
    steps = []
    for i in range(ceil_div(seq_len, size)):
        physical = int(row[i])
        valid = min(size, seq_len - i * size)
        k = key_cache[physical, :valid, kv_head].float()  # [valid, head_dim]
        v = value_cache[physical, :valid, kv_head].float()
        scores = (q[None, :] * k).sum(dim=1)
        m_new = torch.maximum(m, scores.max())
        alpha = torch.exp(m - m_new)
        p = torch.exp(scores - m_new)
        block_sum = p.sum()
        m_old, m = m, m_new
        l_sum = l_sum * alpha + block_sum
        acc = acc * alpha + (p[:, None] * v).sum(dim=0)
        steps.append(LoopStep(
            logical=i, physical=physical, positions=tuple(range(i * size, i * size + valid)),
            masked=size - valid, scores=tuple(scores.tolist()), m_old=float(m_old),
            m_new=float(m_new), alpha=float(alpha), block_sum=float(block_sum),
            l_sum=float(l_sum), acc=tuple(acc.tolist()),
        ))  # fmt: skip
    return steps


def _num(x: float, decimals: int) -> str:
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    text = f"{x:.{decimals}f}"
    return "0." + "0" * decimals if text == "-0." + "0" * decimals else text


def steps_table(steps: Sequence[LoopStep], decimals: int = 3) -> str:
    """The steps as a fixed-width text table, one row per block, every float rounded."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise ArgumentTypeError(f"steps must be a list of LoopStep, got {type(steps).__name__}")
    if not steps:
        raise ValueError("steps is empty: replay at least one block")
    for i, step in enumerate(steps):
        if not isinstance(step, LoopStep):
            raise ArgumentTypeError(f"steps[{i}] must be a LoopStep, got {step!r}")
    decimals = check_int(decimals, "decimals", minimum=0, maximum=12)
    dims = len(steps[0].acc)
    out_head = "acc/l" if dims == 1 else "acc/l[0]"
    header = ("block", "reads", "positions", "scores", "m_old", "m_new", "alpha", "block sum", "l")
    rows: list[tuple[str, ...]] = [(*header, out_head)]
    for s in steps:
        first, last = s.positions[0], s.positions[-1]
        span = f"{first}" if first == last else f"{first}-{last}"
        if s.masked:
            span += f" (+{s.masked} masked)"
        numbers = (s.m_old, s.m_new, s.alpha, s.block_sum, s.l_sum, s.output[0])
        scores = " ".join(_num(x, 1) for x in s.scores)
        text = (f"{s.logical}", f"physical {s.physical}", span, scores)
        rows.append((*text, *(_num(x, decimals) for x in numbers)))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = []
    for r in rows:  # text columns left-aligned, numbers right-aligned
        pairs = enumerate(zip(r, widths, strict=True))
        cells = [x.ljust(w) if c < 4 else x.rjust(w) for c, (x, w) in pairs]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
