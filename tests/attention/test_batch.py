"""A decode batch as an engine packs it, and the explorer that shows it (notebook 8).

A bad call of ``batch_slot_mapping`` raises, naming the argument, and changes no tensor."""

from __future__ import annotations

import pytest
import torch

from pagedlab.attention.batch import batch_slot_mapping, grow_batch
from pagedlab.explorers.batch import BatchExplorer, batch_lengths
from tests.attention.bad_calls import KIND, VALUE, BadCalls, World, refused


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


# -- bad calls: batch_slot_mapping(block_tables, seq_lens, block_size) ---------------------
BAD = BadCalls()


def _slots(w: World, **change: object) -> object:
    args = {k: w.attention[k] for k in ("block_tables", "seq_lens")}
    return batch_slot_mapping(**{**args, "block_size": 4, **change})  # type: ignore[arg-type]


BAD.case(
    "batch_slot_mapping tables float",
    lambda w: _slots(w, block_tables=w.attention["block_tables"].float()),
    KIND,
    "block_tables",
)
BAD.case("batch_slot_mapping lens list", lambda w: _slots(w, seq_lens=[5, 3]), KIND, "seq_lens")
BAD.case(
    "batch_slot_mapping lens 0",
    lambda w: _slots(w, seq_lens=torch.tensor([5, 0], dtype=torch.int32)),
    VALUE,
    "seq_lens[1] = 0",
)
BAD.case(
    "batch_slot_mapping used -1",
    lambda w: _slots(w, seq_lens=torch.tensor([5, 5], dtype=torch.int32)),
    VALUE,
    "block_tables[1, 1] = -1",
)
BAD.ints(
    "batch_slot_mapping block_size", "block_size", lambda w, x: _slots(w, block_size=x), [0, -4]
)


@pytest.mark.parametrize("bad", BAD, ids=BAD.ids())
def test_bad_call_raises_a_clear_error_and_changes_nothing(bad) -> None:  # type: ignore[no-untyped-def]
    refused(bad)
