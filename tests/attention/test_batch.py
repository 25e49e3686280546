"""A decode batch as an engine packs it, and the explorer that shows it (notebook 8)."""

from __future__ import annotations

import pytest
import torch

from pagedlab.attention.batch import batch_slot_mapping, grow_batch
from pagedlab.explorers.batch import BatchExplorer, batch_lengths


@pytest.mark.parametrize(("lengths", "block_size"), [([3, 6, 9], 4), ([1], 1), ([5, 1, 16, 7], 3)])
def test_vectorised_slot_mapping_equals_every_table(lengths: list[int], block_size: int) -> None:
    batch = grow_batch(lengths, block_size)
    slots = batch_slot_mapping(batch.block_tables, batch.seq_lens, block_size)
    assert slots.tolist() == [s for t in batch.tables for s in t.slot_mapping()]
    assert batch.allocator.num_free == 0  # the pool holds exactly what the batch needs


def test_lockstep_growth_interleaves_blocks() -> None:
    batch = grow_batch([3, 6, 9], 4)
    assert [t.blocks for t in batch.tables] == [[0], [1, 3], [2, 4, 5]]
    assert batch.block_tables.tolist() == [[0, -1, -1], [1, 3, -1], [2, 4, 5]]
    assert batch.block_tables.dtype == batch.seq_lens.dtype == torch.int32


def test_written_kv_is_read_back_in_logical_order() -> None:
    batch = grow_batch([5, 2], 2, num_kv_heads=1, head_dim=3, seed=7)
    k, _ = batch.cache.gather(batch.tables[0].blocks, 5)
    flat = batch.cache.key.view(-1, 1, 3)
    assert torch.equal(k, flat[torch.tensor(batch.tables[0].slot_mapping())])


@pytest.mark.parametrize("bad", [[], [0], [3, -1]])
def test_bad_lengths_are_named(bad: list[int]) -> None:
    with pytest.raises(ValueError, match="length"):
        grow_batch(bad, 4)


def test_batch_lengths_end_at_the_longest() -> None:
    assert batch_lengths(3, 9) == [3, 6, 9]
    assert batch_lengths(4, 1) == [1, 1, 1, 1]


def test_explorer_checks_hold_and_the_picture_follows_the_sliders() -> None:
    explorer = BatchExplorer(num_seqs=2, block_size=4, longest=5)
    first = explorer.picture.value
    assert "✓ slot mapping" in explorer.readout.value and "✗" not in explorer.readout.value
    assert "seq_lens = [2, 5]" in explorer.readout.value
    explorer.block_size.value = 1
    assert "block_tables = int32 [2, 5]" in explorer.readout.value
    assert "✗" not in explorer.readout.value
    assert explorer.picture.value != first
