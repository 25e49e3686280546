"""Notebook 4's batch, dense checkpoint and explorer: the kernel agrees on every setting."""

from __future__ import annotations

import pytest
import torch

from pagedlab.attention import backend, reference_attention
from pagedlab.attention.batch import dense_attention
from pagedlab.explorers.kernel import KernelExplorer, error_bound, kernel_report
from pagedlab.pictures.scenes import kernel_batch as shuffled_batch


def test_shuffled_batch_writes_every_token_where_its_table_says() -> None:
    batch = shuffled_batch([5, 17, 30])
    assert [t.num_tokens for t in batch.tables] == [5, 17, 30]
    assert batch.allocator.num_free == 2  # two blocks stay free
    assert batch.block_tables.dtype == batch.seq_lens.dtype == torch.int32
    assert batch.block_tables.device == batch.query.device == backend.device()
    assert batch.block_tables.shape == (3, 8) and batch.block_tables[0, 2:].eq(-1).all()
    blocks = [b for t in batch.tables for b in t.blocks]
    assert blocks != sorted(blocks)  # shuffled: the pages are not handed out in order
    assert batch.cache.key.dtype == batch.query.dtype == torch.float16
    flat = batch.cache.key.view(-1, 2, 16)
    k, _ = batch.cache.gather(batch.tables[1].blocks, 17)
    assert torch.equal(k, flat[torch.tensor(batch.tables[1].slot_mapping())])


def test_dense_attention_equals_reference_attention() -> None:
    batch = shuffled_batch([3, 9, 1], block_size=2, dtype=torch.float32, seed=5)
    args = (batch.query, batch.cache.key, batch.cache.value, batch.block_tables, batch.seq_lens)
    reference = reference_attention(*args)
    dense = torch.stack(
        [
            dense_attention(batch.query[s], *batch.cache.gather(t.blocks, t.num_tokens))
            for s, t in enumerate(batch.tables)
        ]
    )
    torch.testing.assert_close(dense, reference, rtol=1e-5, atol=1e-6)


def test_dense_attention_single_position_returns_its_value() -> None:
    q = torch.randn(4, 8)
    k, v = torch.randn(2, 1, 2, 8)
    out = dense_attention(q, k, v)
    assert torch.equal(out, v.repeat_interleave(2, dim=1)[0])  # softmax over one position = 1


def test_error_bound_is_a_power_of_ten() -> None:
    assert error_bound(0.0) == "0 (exact)"
    assert error_bound(4.9e-4) == "< 1e-3"
    assert error_bound(1e-3) == "< 1e-3"


@pytest.mark.parametrize(("num_seqs", "block_size", "head_dim"), [(1, 1, 1), (2, 16, 12)])
def test_report_holds_for_odd_settings(num_seqs: int, block_size: int, head_dim: int) -> None:
    report = kernel_report(num_seqs, block_size, head_dim)
    assert "✓ all within fp16 rounding" in report and "✗" not in report
    assert report.count("\n") == num_seqs + 1  # header, one row per sequence, verdict


def test_explorer_checks_hold_and_follow_the_sliders() -> None:
    explorer = KernelExplorer(num_seqs=2, block_size=4, head_dim=8)
    first = explorer.readout.value
    assert "✓" in first and "✗" not in first
    assert "pagedlab-readout" in explorer.readout._dom_classes
    assert "  A       5" in first and "  B      12" in first  # the picture's names, not 0, 1
    assert "  0       5" not in first
    explorer.block_size.value = 3  # sequence B: 12 tokens in 4 pages instead of 3
    second = explorer.readout.value
    assert second != first and "✓" in second and "✗" not in second
    assert "  B      12      4" in second
    explorer.num_seqs.value = 1
    assert explorer.readout.value.count("\n") == 2 and "✗" not in explorer.readout.value


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: shuffled_batch([]), r"\[\]"),
        (lambda: shuffled_batch([3, 0]), "length"),
        (lambda: shuffled_batch([3], block_size=0), "block_size"),
        (lambda: shuffled_batch([3], head_dim=0), "head_dim"),
        (lambda: shuffled_batch([3], dtype=torch.int8), "int8"),
        (lambda: kernel_report(0, 4, 16), "num_seqs"),
        (lambda: KernelExplorer(num_seqs=6), "6"),
        (lambda: KernelExplorer(block_size=17), "17"),
        (lambda: KernelExplorer(head_dim=32), "32"),
        (lambda: dense_attention(torch.ones(3, 8), *torch.ones(2, 2, 2, 8)), r"q \(3, 8\)"),
        (lambda: dense_attention(torch.ones(4, 8), *torch.ones(2, 2, 2, 5)), r"k \(2, 2, 5\)"),
        (lambda: dense_attention(torch.ones(4, 8), torch.ones(2, 2, 8), torch.ones(1, 2, 8)), "v"),
    ],
)
def test_bad_arguments_are_named(call: object, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        call()  # type: ignore[operator]
