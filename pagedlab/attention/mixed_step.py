"""One vLLM V1 step with chunked prefill: a prompt chunk and decodes in one flattened batch.

vLLM V1's scheduler has no prefill phase and no decode phase: each step it gives every
running request some tokens (a decode gets 1, a prompt gets a chunk of what the token budget
leaves), and the model runner flattens them into one batch (``vllm_refs``: the worker's
``BlockTables`` and ``_compute_slot_mappings_kernel``). :func:`mixed_step` builds such a step
from the real allocator and tables: ``input_ids`` and ``positions`` (one entry per token,
request after request), ``query_start_loc`` ``[num_reqs + 1]`` (a cumsum), ``seq_lens`` (tokens
held after the step), ``block_table`` ``int32 [max_num_reqs, ceil(max_model_len / block_size)]``
zero-filled, a row per request *slot*, and ``slot_mapping`` ``[max_num_batched_tokens]``, padded
with :data:`PAD_SLOT_ID` (-1, skipped by the cache-write kernel). Block 0 is held back first
as vLLM's ``BlockPool`` null block, so no request owns the block padding names.
:func:`compute_slot_mapping` is vLLM's computation re-done in torch; tests and notebook 08
check it against ``BlockTable.slot``.

Invariants: ``query_start_loc[-1] == num_tokens``; for request ``r``, its positions are
``seq_lens[r] - n_r .. seq_lens[r] - 1`` (``n_r`` its tokens this step); row ``r`` of the
table starts with ``tables[r].blocks`` and is 0 after them; rows ``num_reqs ..`` are all 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import torch

from pagedlab.attention.batch import grow_in_turn
from pagedlab.attention.validate import require_int_dtype, require_tensor
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable

PAD_SLOT_ID = -1
"""vLLM's slot id for a token whose K/V is not written (``vllm_refs``: ``PAD_SLOT_ID``)."""

NULL_BLOCK = 0
"""The block vLLM's ``BlockPool`` keeps back as its null block; zero padding names it."""


@dataclass(frozen=True)
class StepRequest:
    """One request in a step: ``computed`` tokens already have K/V, ``new`` are run now."""

    computed: int
    new: int

    @property
    def seq_len(self) -> int:
        return self.computed + self.new


@dataclass
class MixedStep:
    """One step's tensors, as vLLM's model runner hands them to the model (module doc)."""

    allocator: BlockAllocator
    tables: list[BlockTable]
    requests: list[StepRequest]
    input_ids: torch.Tensor  # int64 [num_tokens]
    positions: torch.Tensor  # int64 [num_tokens]
    query_start_loc: torch.Tensor  # int32 [num_reqs + 1]
    seq_lens: torch.Tensor  # int32 [num_reqs]
    block_table: torch.Tensor  # int32 [max_num_reqs, ceil(max_model_len / block_size)]
    slot_mapping: torch.Tensor  # int64 [max_num_batched_tokens]

    @property
    def num_tokens(self) -> int:
        return int(self.positions.numel())

    @property
    def num_reqs(self) -> int:
        return len(self.tables)


def mixed_step(
    requests: Sequence[StepRequest],
    block_size: int = 4,
    max_model_len: int = 16,
    max_num_reqs: int = 6,
    max_num_batched_tokens: int = 12,
) -> MixedStep:
    """Grow every request to its ``seq_len`` in one pool, one token per round in turn (their
    blocks interleave, as in a running batch), then lay out this step's tensors. ValueError
    naming the value when a request or the step exceeds a limit."""
    block_size = check_int(block_size, "block_size", minimum=1)
    max_model_len = check_int(max_model_len, "max_model_len", minimum=1)
    max_num_reqs = check_int(max_num_reqs, "max_num_reqs", minimum=1)
    budget = check_int(max_num_batched_tokens, "max_num_batched_tokens", minimum=1)
    reqs = list(requests)
    if not reqs or len(reqs) > max_num_reqs:
        raise ValueError(f"need 1 to max_num_reqs = {max_num_reqs} requests, got {len(reqs)}")
    for i, r in enumerate(reqs):
        if not isinstance(r, StepRequest):
            raise TypeError(f"requests[{i}] must be a StepRequest, got {type(r).__name__}")
        check_int(r.computed, f"requests[{i}].computed", minimum=0)
        check_int(r.new, f"requests[{i}].new", minimum=1)
        if r.seq_len > max_model_len:
            raise ValueError(
                f"requests[{i}] holds {r.seq_len} tokens, more than max_model_len = {max_model_len}"
            )
    num_tokens = sum(r.new for r in reqs)
    if num_tokens > budget:
        raise ValueError(
            f"the step runs {num_tokens} tokens, more than max_num_batched_tokens = {budget}"
        )
    pool = BlockAllocator(1 + sum(ceil_div(r.seq_len, block_size) for r in reqs), block_size)
    if pool.allocate() != NULL_BLOCK:  # held by nobody's table, never freed
        raise AssertionError("a fresh pool hands out block 0 first")
    tables = grow_in_turn(pool, [r.seq_len for r in reqs])
    spans = [(i, p) for i, r in enumerate(reqs) for p in range(r.computed, r.seq_len)]
    ids = torch.tensor([100 * (i + 1) + p for i, p in spans], dtype=torch.int64)  # staged ids
    pos = torch.tensor([p for _, p in spans], dtype=torch.int64)
    query_start_loc = torch.tensor([0, *accumulate(r.new for r in reqs)], dtype=torch.int32)
    seq_lens = torch.tensor([r.seq_len for r in reqs], dtype=torch.int32)
    block_table = torch.zeros(max_num_reqs, ceil_div(max_model_len, block_size), dtype=torch.int32)
    for row, t in enumerate(tables):
        block_table[row, : len(t.blocks)] = torch.tensor(t.blocks, dtype=torch.int32)
    slots = compute_slot_mapping(query_start_loc, pos, block_table, block_size, budget)
    return MixedStep(pool, tables, reqs, ids, pos, query_start_loc, seq_lens, block_table, slots)


def compute_slot_mapping(
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    block_size: int,
    max_num_tokens: int,
) -> torch.Tensor:
    """Slot of every token of a flattened step (int64), padded with ``PAD_SLOT_ID`` to
    ``max_num_tokens``, as vLLM's ``_compute_slot_mappings_kernel``: token ``t`` of request
    ``r`` goes to ``block_table[r, positions[t] // block_size] * block_size + positions[t] %
    block_size``. ValueError naming the value for inconsistent inputs."""
    qsl = require_tensor("query_start_loc", query_start_loc)
    pos = require_tensor("positions", positions)
    bt = require_tensor("block_table", block_table)
    for name, t in (("query_start_loc", qsl), ("positions", pos), ("block_table", bt)):
        require_int_dtype(name, t, (torch.int32, torch.int64))
    block_size = check_int(block_size, "block_size", minimum=1)
    max_num_tokens = check_int(max_num_tokens, "max_num_tokens", minimum=0)
    if qsl.dim() != 1 or pos.dim() != 1 or bt.dim() != 2 or qsl.numel() < 1:
        raise ValueError(
            f"need query_start_loc [num_reqs + 1], positions [num_tokens] and block_table "
            f"[max_num_reqs, width]; got {tuple(qsl.shape)}, {tuple(pos.shape)}, "
            f"{tuple(bt.shape)}"
        )
    counts = qsl[1:].long() - qsl[:-1].long()
    num_reqs, num_tokens = int(counts.numel()), int(pos.numel())
    if int(qsl[0]) != 0 or int(qsl[-1]) != num_tokens or bool((counts < 0).any()):
        raise ValueError(
            f"query_start_loc must rise from 0 to len(positions) = {num_tokens}, got {qsl.tolist()}"
        )
    if num_reqs > bt.shape[0] or num_tokens > max_num_tokens:
        raise ValueError(
            f"{num_reqs} requests and {num_tokens} tokens do not fit a block_table of "
            f"{bt.shape[0]} rows and max_num_tokens = {max_num_tokens}"
        )
    columns = pos.long() // block_size
    if num_tokens and (int(pos.min()) < 0 or int(columns.max()) >= bt.shape[1]):
        raise ValueError(
            f"positions must lie in [0, {bt.shape[1] * block_size}) (the table's width "
            f"{bt.shape[1]} x block_size {block_size}), got {pos.tolist()}"
        )
    rows = torch.repeat_interleave(torch.arange(num_reqs, device=pos.device), counts)
    slots = torch.full((max_num_tokens,), PAD_SLOT_ID, dtype=torch.int64, device=pos.device)
    slots[:num_tokens] = bt.long()[rows, columns] * block_size + pos.long() % block_size
    return slots


def pagedlab_slots(step: MixedStep) -> list[int]:
    """The same slots from pagedlab's tables (``BlockTable.slot_mapping``), then padding."""
    pairs = zip(step.tables, step.requests, strict=True)
    flat = [s for table, r in pairs for s in table.slot_mapping()[r.computed : r.seq_len]]
    return flat + [PAD_SLOT_ID] * (int(step.slot_mapping.numel()) - len(flat))
