"""pagedlab.attention.mixed_step: one vLLM V1 step, flattened; its slot mapping re-done in torch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.attention.mixed_step import (
    NULL_BLOCK,
    PAD_SLOT_ID,
    StepRequest,
    compute_slot_mapping,
    mixed_step,
    pagedlab_slots,
)
from pagedlab.pictures.scenes import MIXED_STEP_REQUESTS, mixed_v1_step
from pagedlab.pictures.step import mixed_step_scene, tensor_parallel_scene


def test_the_notebook_step_tensors() -> None:
    step = mixed_v1_step()
    assert step.requests == list(MIXED_STEP_REQUESTS)
    assert step.positions.tolist() == [4, 7, 2, 4, 5, 6, 7, 8, 9]
    assert step.input_ids.tolist() == [104, 207, 302, 404, 405, 406, 407, 408, 409]
    assert step.query_start_loc.tolist() == [0, 1, 2, 3, 9]
    assert step.seq_lens.tolist() == [5, 8, 3, 10]
    assert step.block_table.shape == (6, 4) and step.block_table.dtype == torch.int32
    assert [t.blocks for t in step.tables] == [[1, 5], [2, 6], [3], [4, 7, 8]]
    assert step.block_table[4:].eq(0).all()
    assert step.slot_mapping.tolist() == [20, 27, 14, 28, 29, 30, 31, 32, 33, -1, -1, -1]
    assert step.slot_mapping.tolist() == pagedlab_slots(step)


def test_block_zero_is_the_null_block_nobody_owns() -> None:
    step = mixed_v1_step()
    assert step.allocator.refcount(NULL_BLOCK) == 1
    assert all(NULL_BLOCK not in t.blocks for t in step.tables)
    assert step.allocator.num_free == 0  # the pool holds exactly the blocks the step needs


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(1, 6)), min_size=1, max_size=5),
    st.integers(1, 5),
    st.integers(0, 7),
)
def test_slot_mapping_equals_every_table_slot(pairs, block_size, spare) -> None:
    requests = [StepRequest(c, n) for c, n in pairs]
    longest = max(r.seq_len for r in requests)
    tokens = sum(r.new for r in requests)
    step = mixed_step(requests, block_size, max_model_len=longest + spare,
                      max_num_reqs=len(requests) + spare % 3,
                      max_num_batched_tokens=tokens + spare)  # fmt: skip
    assert step.slot_mapping.tolist() == pagedlab_slots(step)
    assert (
        step.slot_mapping[tokens:].eq(PAD_SLOT_ID).all()
        and step.slot_mapping.numel() == tokens + spare
    )
    assert int(step.query_start_loc[-1]) == step.num_tokens == tokens
    assert step.block_table.shape[1] == -(-(longest + spare) // block_size)
    for r, (table, req) in enumerate(zip(step.tables, step.requests, strict=True)):
        row = step.block_table[r].tolist()
        assert row[: len(table.blocks)] == table.blocks and not any(row[len(table.blocks) :])
        assert table.num_tokens == req.seq_len == int(step.seq_lens[r])
        lo, hi = int(step.query_start_loc[r]), int(step.query_start_loc[r + 1])
        assert step.positions[lo:hi].tolist() == list(range(req.computed, req.seq_len))


def test_slots_of_distinct_tokens_are_distinct() -> None:
    step = mixed_v1_step()
    used = step.slot_mapping[: step.num_tokens].tolist()
    assert len(set(used)) == len(used) and min(used) >= step.allocator.block_size  # not block 0


@pytest.mark.parametrize(
    ("requests", "kwargs", "match"),
    [
        ([], {}, "requests"),
        ([StepRequest(0, 0)], {}, "new"),
        ([StepRequest(-1, 2)], {}, "computed"),
        ([StepRequest(15, 2)], {}, "max_model_len"),
        ([StepRequest(0, 13)], {}, "max_num_batched_tokens"),
        ([StepRequest(0, 1)] * 7, {}, "max_num_reqs"),
        ([StepRequest(0, 1)], {"block_size": 0}, "block_size"),
    ],
)
def test_bad_steps_are_refused_by_name(requests, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        mixed_step(requests, **kwargs)


def test_a_request_that_is_not_a_step_request_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="StepRequest"):
        mixed_step([(4, 1)])  # type: ignore[list-item]


def test_compute_slot_mapping_refuses_inconsistent_inputs() -> None:
    step = mixed_v1_step()
    qsl, pos, bt = step.query_start_loc, step.positions, step.block_table
    with pytest.raises(ValueError, match="rise from 0"):
        compute_slot_mapping(qsl + 1, pos, bt, 4, 12)
    with pytest.raises(ValueError, match="rise from 0"):
        compute_slot_mapping(torch.tensor([0, 5, 3, 9], dtype=torch.int32), pos, bt, 4, 12)
    with pytest.raises(ValueError, match="max_num_tokens"):
        compute_slot_mapping(qsl, pos, bt, 4, 8)
    with pytest.raises(ValueError, match="positions must lie"):
        compute_slot_mapping(qsl, pos + 8, bt, 4, 12)
    with pytest.raises(ValueError, match="block_table"):
        compute_slot_mapping(qsl, pos, bt[0], 4, 12)
    with pytest.raises(TypeError, match="dtype"):
        compute_slot_mapping(qsl, pos.float(), bt, 4, 12)
    assert compute_slot_mapping(qsl, pos, bt, 4, 12).tolist() == step.slot_mapping.tolist()


def snapshot(step) -> tuple:
    tables = [t.blocks for t in step.tables]
    pool = step.allocator
    return (pool.refcounts(), pool.free_list(), tables, step.slot_mapping.clone(),
            step.block_table.clone())  # fmt: skip


def same(a: tuple, b: tuple) -> bool:
    return a[:3] == b[:3] and torch.equal(a[3], b[3]) and torch.equal(a[4], b[4])


def test_mixed_step_picture_counts_and_leaves_the_step_alone() -> None:
    step = mixed_v1_step()
    before = snapshot(step)
    d = mixed_step_scene(step)
    assert same(before, snapshot(step))
    assert d.count("token", "input_ids") == d.count("token", "positions") == 9
    assert d.count("token", "slot_mapping") == 9 and d.count("pad", "slot_mapping") == 3
    assert d.count("table-cell", "block_table") == 8  # 2 + 2 + 1 + 3 used entries
    assert d.count("null", "block_table") == 6 * 4 - 8
    assert d.count("index", "query_start_loc") == 5 and d.count("index", "seq_lens") == 4


def test_tensor_parallel_picture_shows_the_same_blocks_on_every_worker() -> None:
    step = mixed_v1_step()
    table = step.tables[3]
    before = snapshot(step)
    d = tensor_parallel_scene(table, num_workers=4, num_kv_heads=8)
    assert same(before, snapshot(step))
    for w in range(4):
        held = sorted(
            r.block for r in d.rects if r.view == f"worker{w}" and r.kind == "worker-block"
        )
        assert held == sorted(table.blocks)
    assert len(d.arrows) == 4 * len(table.blocks)
    # every arrow starts at the scheduler's table, none at another worker's blocks (§4.6)
    assert len({a.start for a in d.arrows}) == len(table.blocks)
    with pytest.raises(ValueError, match="num_kv_heads"):
        tensor_parallel_scene(table, num_workers=3, num_kv_heads=4)
    with pytest.raises(ValueError, match="num_workers"):
        tensor_parallel_scene(table, num_workers=0)
