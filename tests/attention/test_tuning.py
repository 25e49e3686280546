"""The launch heuristics of pagedlab.attention.tuning, one by one (speed only: the kernel's
result does not depend on them; tests/attention/test_kernel_grid.py runs it across their
choices)."""

from __future__ import annotations

import pytest

from pagedlab.attention import tuning


def test_example_in_the_interpreter_folds_both_pages_in_one_step():
    plan = tuning.plan_attention(
        interpreter=True, sms=0, num_seqs=1, num_kv_heads=1,
        block_size=4, head_dim=1, group=1, max_pages=2,
    )  # fmt: skip
    assert (plan.block_t, plan.block_d, plan.block_g) == (4, 1, 1)
    assert (plan.pages_per_step, plan.num_warps, plan.splits, plan.pages_per_split) == (2, 4, 1, 2)


def test_compiled_long_sequence_is_split_across_programs():
    """One 4,096-token sequence, 8 kv heads, on 132 multiprocessors: flash-decoding."""
    plan = tuning.plan_attention(
        interpreter=False, sms=132, num_seqs=1, num_kv_heads=8,
        block_size=16, head_dim=128, group=4, max_pages=256,
    )  # fmt: skip
    assert plan.pages_per_step == 2  # 16K elements: 4 x (2 x 16) x 128
    assert plan.num_warps == 8
    assert plan.splits == 32  # wanted 66 programs per kv head, capped at 4 steps per slice
    assert plan.pages_per_split == 8 and plan.pages_per_split % plan.pages_per_step == 0
    assert plan.splits * plan.pages_per_split >= 256  # every page is covered


def test_overrides_win():
    plan = tuning.plan_attention(
        interpreter=True, sms=0, num_seqs=3, num_kv_heads=2, block_size=4, head_dim=8,
        group=2, max_pages=5, pages=1, warps=2, splits=3,
    )  # fmt: skip
    assert (plan.pages_per_step, plan.num_warps, plan.splits) == (1, 2, 3)
    assert plan.pages_per_split == 2  # ceil(5 / 3) pages, whole steps of 1


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 65])
def test_next_power_of_two(n):
    p = tuning.next_power_of_two(n)
    assert p >= n and p & (p - 1) == 0 and p // 2 < n


def test_step_never_exceeds_64_positions():
    for block_size in (1, 3, 16, 64, 100):
        for interpreter in (True, False):
            t, d, g = tuning.tile_sizes(block_size, 8, 2)
            pages = tuning.pages_per_step(interpreter, 1000, t, d, g)
            assert pages * t <= max(64, t)


def test_kernel_fits_refuses_tiles_beyond_triton():
    tuning.check_kernel_fits(16, 256, 8)  # 8 x 16 x 256 = 32K: fine
    with pytest.raises(ValueError, match="reference_attention"):
        tuning.check_kernel_fits(1, 2**21, 1)
    assert tuning.reshape_and_cache_fits(8, 128) and not tuning.reshape_and_cache_fits(2, 2**20)


def test_interpreter_walks_every_lane_in_one_program():
    """5 sequences x 2 kv heads = 10 lanes: one program of 16 lanes in the interpreter,
    one lane per program compiled or when the pages are split."""
    shape = dict(sms=132, num_seqs=5, num_kv_heads=2, block_size=16, head_dim=64, group=4)
    assert tuning.plan_attention(interpreter=True, max_pages=3, **shape).lanes == 16
    assert tuning.plan_attention(interpreter=False, max_pages=3, **shape).lanes == 1
    assert tuning.plan_attention(interpreter=True, max_pages=3, splits=2, **shape).lanes == 1


def test_lanes_keep_the_step_within_the_cap():
    for num_lanes in (2, 3, 64, 1000):
        for step in (1, 4096, 65536, 1 << 18, 1 << 20):
            lanes = tuning.lanes_per_program(True, num_lanes, 1, step)
            assert lanes & (lanes - 1) == 0 and lanes <= tuning.next_power_of_two(num_lanes)
            assert lanes == 1 or lanes * step <= tuning.INTERPRETER_LANE_ELEMENTS


def test_lanes_with_splits_are_refused():
    with pytest.raises(ValueError, match="splits"):
        tuning.plan_attention(
            interpreter=True, sms=0, num_seqs=3, num_kv_heads=2, block_size=4, head_dim=8,
            group=2, max_pages=5, splits=2, lanes=4,
        )  # fmt: skip
