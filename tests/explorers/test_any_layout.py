"""Notebook 03's plumbing: a sequence among junk, the kernel through its table, the moved max."""

from __future__ import annotations

import pytest
import torch

from pagedlab import BlockAllocator
from pagedlab.explorers.any_layout import (
    BIG,
    JUNK_KEY,
    JUNK_VALUE,
    moved_max,
    moved_max_widget,
    place,
)
from pagedlab.pictures.scenes import example_history, kernel_output
from tests.refuses import refuses

KEYS = [0.0, 1.0, 0.5, 0.0, 2.0, 1.0, 0.0, 0.5, 3.0, 0.0]  # notebook 03's keys that grow


def test_place_writes_the_sequence_through_its_table_and_junk_everywhere_else() -> None:
    pool = example_history(num_blocks=8, block_size=4)[0]
    seq, cache = place(pool, [0.0] * 5)
    assert seq.blocks == [4, 1]
    written = set(seq.slot_mapping())
    flat_k, flat_v = cache.key.flatten().tolist(), cache.value.flatten().tolist()
    assert [flat_v[s] for s in seq.slot_mapping()] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(flat_k[s] == 0.0 for s in written)
    others = [i for i in range(len(flat_k)) if i not in written]
    assert {flat_k[i] for i in others} == {JUNK_KEY} and {flat_v[i] for i in others} == {JUNK_VALUE}
    assert kernel_output(seq.blocks, 5, cache) == 3.0  # the mean of 1..5: no junk read
    assert kernel_output([4, 0], 5, cache) < 0  # a wrong table reads junk, and it shows


def test_moved_max_ends_on_the_softmax_over_all_scores_and_leaves_the_cache() -> None:
    seq, cache = place(BlockAllocator(8, 4), KEYS)
    before = cache.key.clone()
    for position in range(len(KEYS)):
        steps, dense = moved_max(seq, cache, KEYS, position)
        scores = torch.tensor([BIG if p == position else k for p, k in enumerate(KEYS)])
        assert dense == pytest.approx(float(torch.softmax(scores, 0) @ torch.arange(1.0, 11)))
        assert steps[-1].output[0] == pytest.approx(dense, abs=1e-5)
        assert max(s.m_new for s in steps) == BIG
    assert torch.equal(cache.key, before)


def test_moved_max_widget_follows_its_slider() -> None:
    seq, cache = place(BlockAllocator(8, 4), KEYS)
    box = moved_max_widget(seq, cache, KEYS, position=9)
    slider, picture, readout = box.children
    assert slider.value == 9 and slider.max == 9 and readout.value.endswith("✓")
    first = picture.value
    slider.value = 0
    assert picture.value != first and readout.value.endswith("✓")


def test_bad_input_is_refused_by_name_and_changes_nothing() -> None:
    pool = BlockAllocator(8, 4)
    refuses(lambda: place(pool, []), naming=[], state=pool.free_list)
    seq, cache = place(pool, KEYS)
    state = lambda: (pool.free_list(), seq.blocks, cache.key.tolist())  # noqa: E731
    refuses(lambda: moved_max(seq, cache, KEYS, 10), naming=10, match=r"\[0, 9\]", state=state)
