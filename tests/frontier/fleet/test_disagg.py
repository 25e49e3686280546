"""Disaggregated prefill: the pages moved from A to B decode into the one-engine tokens, and
the bytes moved are the formula's."""

from __future__ import annotations

import pytest
import torch

from pagedlab.engine import Engine
from pagedlab.frontier.fleet.disagg import decode, prefill_and_move, transfer_bytes
from pagedlab.memory.allocator import OutOfBlocksError
from pagedlab.model import TINY, TinyLlama

MODEL = TinyLlama(TINY, seed=11, init_std=0.3)


@pytest.mark.parametrize("length", [1, 7, 8, 13])
def test_b_decodes_the_tokens_one_engine_computes(length: int) -> None:
    prompt = [(5 * i + 3) % 64 for i in range(length)]
    a, b = Engine(MODEL, 16, 4), Engine(MODEL, 16, 4)
    handoff = prefill_and_move(prompt, a, b)
    assert a.allocator.num_free == 16  # A kept nothing
    assert handoff.blocks_allocated == -(-length // 4) == len(handoff.table.blocks)
    size = torch.tensor([], dtype=a.caches[0].dtype).element_size()
    expected = transfer_bytes(MODEL.num_layers, MODEL.num_kv_heads, MODEL.head_dim, size, length, 4)
    assert handoff.bytes_moved == expected
    tokens = decode(b, handoff.table, prompt, handoff.first_token, 6)
    assert tokens == Engine(MODEL, 16, 4).generate([prompt], 6)[0]
    assert b.allocator.num_free == 16


def test_b_without_room_refuses_and_a_keeps_nothing() -> None:
    a, b = Engine(MODEL, 16, 4), Engine(MODEL, 2, 4)
    with pytest.raises(OutOfBlocksError):
        prefill_and_move(list(range(12)), a, b)
    assert a.allocator.num_free == 16 and b.allocator.num_free == 2


def test_refusals() -> None:
    a = Engine(MODEL, 16, 4)
    with pytest.raises(ValueError, match="two engines"):
        prefill_and_move([1, 2], a, a)
    with pytest.raises(ValueError, match="block_size"):
        transfer_bytes(2, 2, 8, 4, 10, 0)
