"""Parallel sampling and beam search on shared blocks: the paper's Figs. 8 and 9, block for
block, the K/V copy behind copy-on-write, bad inputs, and the memory-saving figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pagedlab import BlockAllocator, BlockTable, CopyOnWrite, OutOfBlocksError
from pagedlab.memory.savings import (
    PAPER_SAVED,
    alpaca_savings,
    beam_savings,
    format_savings,
    parallel_savings,
    savings_table,
)
from pagedlab.memory.sharing import beam_step, can_beam_step, fork_samples, holders
from pagedlab.pictures.scenes import FIG9_STEP, figure8, figure9_before
from tests.memory.bad_calls import (
    IntCall,
    OtherCall,
    misuse_tests,
    scene,
)
from tests.refuses import refuses


def state(alloc: BlockAllocator) -> tuple[list[int], list[int]]:
    return alloc.refcounts(), alloc.free_list()


# --- Fig. 8: parallel sampling with copy-on-write ------------------------------------------


def test_figure8_block_for_block() -> None:
    order = [7, 1, 3, 0, 2, 4, 5, 6]
    prompt = BlockTable(BlockAllocator(8, 4, free_order=order))
    alloc = prompt.allocator
    prompt.append_tokens(7)
    a1, a2 = fork_samples(prompt, 2)
    assert a1 is prompt
    assert a1.blocks == a2.blocks == [7, 1]
    assert (alloc.refcount(7), alloc.refcount(1)) == (2, 2)

    with alloc.record() as events:
        copy = a1.append_tokens(1)  # A1 writes "fathers" into the shared, partly filled block 1
    assert copy == CopyOnWrite(src=1, dst=3)
    assert a1.blocks == [7, 3] and a2.blocks == [7, 1]
    assert (alloc.refcount(1), alloc.refcount(3), alloc.refcount(7)) == (1, 1, 2)
    assert [(e.kind, e.block) for e in events] == [
        ("allocate", 3),
        ("copy", 3),
        ("release", 1),
        ("write", 3),
    ]
    assert events[1].src == 1

    with alloc.record() as events:
        assert a2.append_tokens(1) is None  # A2 writes "mothers" into block 1 in place
    assert [(e.kind, e.block, e.offset) for e in events] == [("write", 1, 3)]
    assert a2.blocks == [7, 1] and alloc.refcount(1) == 1


def test_figure8_helper_matches() -> None:
    (a1, a2), copies = figure8()
    assert (a1.blocks, a2.blocks) == ([7, 3], [7, 1])
    assert copies == [CopyOnWrite(1, 3), None]


def test_kv_copy_on_write_gives_the_same_attention_as_private_copies() -> None:
    kv_cache = pytest.importorskip("pagedlab.attention.kv_cache")
    attention = pytest.importorskip("pagedlab.attention.ops")
    torch.manual_seed(0)
    heads, dim, size = 2, 8, 4
    k_all = torch.randn(9, heads, dim)  # 7 prompt tokens, then one new token per sample
    v_all = torch.randn(9, heads, dim)

    (a1, a2), copies, cache = _fig8_on_cache(kv_cache, k_all, v_all)
    # private copies: sample i alone in its own blocks, no sharing at all
    private = kv_cache.PagedKVCache(8, size, heads, dim, device="cpu")
    for s, new in enumerate((7, 8)):
        rows = list(range(7)) + [new]
        private.write([8 * s + p for p in range(8)], k_all[rows], v_all[rows])
    query = torch.randn(2, heads, dim)
    lens = torch.tensor([8, 8], dtype=torch.int32)
    shared_tables = attention.block_tables_tensor([a1.blocks, a2.blocks])
    private_tables = attention.block_tables_tensor([[0, 1], [2, 3]])
    want = attention.reference_attention(query, private.key, private.value, private_tables, lens)
    got = attention.reference_attention(query, cache.key, cache.value, shared_tables, lens)
    torch.testing.assert_close(got, want)
    try:
        kernel = attention.paged_attention(query, cache.key, cache.value, shared_tables, lens)
    except RuntimeError as error:  # no Triton on this platform
        pytest.skip(str(error))
    torch.testing.assert_close(kernel, want)
    assert copies == [CopyOnWrite(1, 3), None]


def _fig8_on_cache(kv_cache, k_all, v_all):  # type: ignore[no-untyped-def]
    """Fig. 8 with real K/V: prompt written once, A1's copy-on-write copies block 1 -> 3."""
    order = [7, 1, 3, 0, 2, 4, 5, 6]
    prompt = BlockTable(BlockAllocator(8, 4, free_order=order))
    cache = kv_cache.PagedKVCache(8, 4, k_all.shape[1], k_all.shape[2], device="cpu")
    prompt.append_tokens(7)
    cache.write(prompt.slot_mapping(), k_all[:7], v_all[:7])
    samples = fork_samples(prompt, 2)
    copies = []
    for table, row in zip(samples, (7, 8), strict=True):
        copy = table.append_tokens(1)
        if copy is not None:
            cache.copy_block(copy.src, copy.dst)
        copies.append(copy)
        cache.write(table.slot_mapping()[-1:], k_all[row : row + 1], v_all[row : row + 1])
    # the shared prompt's data is where it was; block 3 holds a copy of block 1's first 3
    torch.testing.assert_close(cache.key[3, :3], cache.key[1, :3])
    return samples, copies, cache


# --- Fig. 9: beam search -----------------------------------------------------------------


def test_figure9_block_for_block() -> None:
    beams = figure9_before()
    alloc = beams[0].allocator
    assert [b.blocks for b in beams] == [[0, 1, 3, 5], [0, 1, 3, 6], [0, 1, 3, 7], [0, 2, 4, 8]]
    assert all(b.num_tokens == 16 for b in beams)  # 4 full logical blocks each
    assert alloc.refcount(0) == 4 and alloc.refcount(1) == alloc.refcount(3) == 3
    assert alloc.free_list()[:4] == [9, 10, 11, 12]

    step = beam_step(beams, FIG9_STEP)
    assert sorted(step.freed) == [2, 4, 5, 8]
    assert step.allocated == [9, 10, 11, 12]
    assert step.copies == []
    assert [b.blocks for b in step.beams] == [
        [0, 1, 3, 6, 9],
        [0, 1, 3, 6, 10],
        [0, 1, 3, 7, 11],
        [0, 1, 3, 7, 12],
    ]
    counts = alloc.refcounts()
    assert [counts[b] for b in (0, 1, 3, 6, 7)] == [4, 4, 4, 2, 2]
    assert all(counts[b] == 0 for b in (2, 4, 5, 8))
    assert all(b.freed for b in beams)


def test_beam_step_into_shared_partial_block_copies_all_but_the_last_holder() -> None:
    prompt = BlockTable(BlockAllocator(16, 4))
    prompt.append_tokens(6)  # blocks [0, 1], block 1 half full
    step = beam_step([prompt], [0, 0, 0])
    assert [c.src for c in step.copies] == [1, 1]  # the third survivor writes in place
    assert [b.blocks for b in step.beams] == [[0, 2], [0, 3], [0, 1]]
    alloc = prompt.allocator
    for table in step.beams:
        assert alloc.refcount(table.blocks[-1]) == 1  # the block being written
    assert alloc.refcount(0) == 3


def test_single_survivor_inherits_blocks_without_copying() -> None:
    table = BlockTable(BlockAllocator(8, 4))
    table.append_tokens(3)
    step = beam_step([table], [0])
    assert step.copies == [] and step.allocated == [] and step.freed == []
    assert step.beams[0].blocks == [0] and step.beams[0].num_tokens == 4


# --- bad inputs: clear ValueError, nothing changed ------------------------------------------


def test_fork_samples_rejects_bad_n_and_freed_table() -> None:
    table = BlockTable(BlockAllocator(8, 4))
    table.append_tokens(5)
    refuses(
        lambda: fork_samples(table, 0),
        match="n \\(number of samples\\) must be >= 1, got 0",
        state=lambda: state(table.allocator),
    )
    table.free()
    refuses(
        lambda: fork_samples(table, 2),
        match=f"cannot fork table {table.id}: it was already freed",
        state=lambda: state(table.allocator),
    )


@pytest.mark.parametrize(
    ("parents", "tokens", "message"),
    [
        ([], 1, "beam width \\(len\\(parents\\)\\) must be >= 1, got 0"),
        ([0, 2], 1, "parent index 2 is out of range \\[0, 2\\)"),
        ([0, -1], 1, "parent index -1 is out of range"),
        ([0], 0, "num_tokens must be >= 1, got 0"),
        ([0.5], 1, "parent index must be an integer, got 0.5"),
    ],
)
def test_beam_step_bad_inputs_change_nothing(parents: list, tokens: int, message: str) -> None:
    root = BlockTable(BlockAllocator(8, 4))
    root.append_tokens(5)
    beams = fork_samples(root, 2)
    refuses(
        lambda: beam_step(beams, parents, tokens),
        match=message,
        state=lambda: state(root.allocator),
    )
    assert not any(b.freed for b in beams)


def test_beam_step_rejects_freed_beam() -> None:
    root = BlockTable(BlockAllocator(8, 4))
    root.append_tokens(5)
    a, b = fork_samples(root, 2)
    b.free()
    refuses(
        lambda: beam_step([a, b], [0, 0]),
        match=f"beam table {b.id} was already freed",
        state=lambda: state(root.allocator),
    )


def test_beam_step_out_of_blocks_changes_nothing() -> None:
    root = BlockTable(BlockAllocator(4, 4))
    root.append_tokens(6)  # blocks 0, 1; two free
    refuses(
        lambda: beam_step([root], [0, 0, 0, 0]),  # three copies of block 1 needed, two free
        OutOfBlocksError,
        match="needs 3 free block",
        state=lambda: state(root.allocator),
    )
    assert not root.freed
    step = beam_step([root], [0, 0, 0])  # exactly fits: two copies
    assert root.allocator.num_free == 0 and len(step.copies) == 2


def test_holders_counts_match_refcounts() -> None:
    beams = figure9_before()
    counts = beams[0].allocator.refcounts()
    assert {b: len(t) for b, t in holders(beams).items()} == {
        b: c for b, c in enumerate(counts) if c
    }


# --- memory saved -----------------------------------------------------------------------


@pytest.mark.parametrize(("p", "o", "n", "size"), [(19, 58, 4, 16), (7, 1, 2, 4), (16, 5, 3, 4)])
def test_parallel_savings_match_closed_form(p: int, o: int, n: int, size: int) -> None:
    result = parallel_savings(p, o, n, size)
    shared = p // size  # full prompt blocks are shared; a partial one is copied per sample
    per_sample = math.ceil((p + o) / size)
    assert result.blocks_without == n * per_sample
    assert result.blocks_with == shared + n * (per_sample - shared)


def test_width_one_saves_nothing_and_beams_save_more_than_samples() -> None:
    assert parallel_savings(19, 58, 1).final_saved == 0
    assert beam_savings(19, 58, 1).mean_saved == 0
    for width in (2, 4, 6):
        assert beam_savings(19, 58, width).mean_saved > parallel_savings(19, 58, width).mean_saved


def test_savings_table_prints_ours_beside_the_papers() -> None:
    text = format_savings(savings_table())
    rows = text.splitlines()[1:]
    papers = ["6.09 %", "8.53 %", "9.79 %", "37.56 %", "53.13 %", "55.16 %"]
    assert [row.split("   ")[-1] for row in rows] == papers  # Fig. 15, width by width
    assert format_savings([parallel_savings(19, 58, 3)]).endswith("   -")  # not in Fig. 15
    assert PAPER_SAVED["beam"] == (0.376, 0.552)
    assert 0 < alpaca_savings("parallel", 2, num_requests=5) < alpaca_savings("beam", 2, 5)
    with pytest.raises(ValueError, match="mode must be one of .*'beam'.*, got 'greedy'"):
        alpaca_savings("greedy", 2)


# --- pictures and widgets (headless) -------------------------------------------------------


def test_copy_on_write_is_its_own_frame() -> None:
    from pagedlab.pictures.sharing import event_frames

    order = [7, 1, 3, 0, 2, 4, 5, 6]
    prompt = BlockTable(BlockAllocator(8, 4, free_order=order))
    prompt.append_tokens(7)
    a1, a2 = fork_samples(prompt, 2)
    frames = event_frames(prompt.allocator, lambda: [a1, a2], lambda: a1.append_tokens(1))
    assert [f.caption for f in frames] == [
        "before",
        "sequence A: allocate block 3 (ref count 1)",
        "sequence A: copy block 1 -> block 3",
        "sequence A: release block 1 (ref count 1)",
        "sequence A: position 7 -> block 3[3]",
        "after",
    ]
    before, after = frames[0].drawing, frames[-1].drawing
    badges = [r.block for r in before.rects if r.kind == "badge" and r.view == "pool"]
    assert sorted(badges) == [1, 7]  # both prompt blocks shared before the write
    assert [r.block for r in after.rects if r.kind == "badge" and r.view == "pool"] == [7]
    assert frames[4].drawing.count("write") == 1


def test_sharing_explorer_updates_by_assigning_state() -> None:
    from pagedlab.explorers.sharing import SharingExplorer

    explorer = SharingExplorer(width=2, prompt_len=7, steps=1)
    assert explorer.state.blocks_with == 3 and explorer.state.copies == 1  # Fig. 8
    first = explorer.picture.value
    state = explorer.set(width=4)
    assert state.blocks_with == 1 + 4 and state.blocks_without == 8
    assert explorer.picture.value != first and "saved 38 %" in explorer.readout.value
    beams = explorer.set(mode="beam search", steps=6)
    assert len(beams.tables) == 4 and beams.blocks_with < beams.blocks_without


def test_prefix_explorer_shows_both_low_hit_rate_rules() -> None:
    from pagedlab.explorers.sharing import PrefixCacheExplorer

    explorer = PrefixCacheExplorer(shared=6, prompt_len=10, requests=2, block_size=4)
    second = explorer.state.admissions[1]
    assert len(second.hit_blocks) == 1  # tokens 4, 5 of the shared 6 sit in a partial block
    aligned = explorer.set(shared=8, prompt_len=8).admissions[1]
    assert aligned.recomputed_last_block and len(aligned.hit_blocks) == 1
    assert "hit rate <b>25 %</b>" in explorer.readout.value


# --- bad values of sharing, the savings figures and the Fig. 9 scene -------------------------
INT_ARGUMENTS: list[tuple[str, IntCall]] = [
    ("n (number of samples)", lambda s, v: fork_samples(s.table, v)),
    ("num_tokens", lambda s, v: beam_step([s.table, s.child], [0, 1], v)),
    ("num_tokens", lambda s, v: can_beam_step([s.table, s.child], [0, 1], v)),
    ("parent index", lambda s, v: beam_step([s.table, s.child], [0, v])),
    ("num_blocks", lambda s, v: figure9_before(v)),
    ("prompt_len", lambda s, v: parallel_savings(v, 4, 2)),
    ("output_len", lambda s, v: parallel_savings(4, v, 2)),
    ("n", lambda s, v: parallel_savings(4, 4, v)),
    ("block_size", lambda s, v: parallel_savings(4, 4, 2, v)),
    ("k", lambda s, v: beam_savings(4, 4, v)),
    ("seed", lambda s, v: beam_savings(4, 4, 2, seed=v)),
    ("width", lambda s, v: alpaca_savings("beam", v, num_requests=2)),
    ("num_requests", lambda s, v: alpaca_savings("beam", 2, num_requests=v)),
    ("width", lambda s, v: savings_table(4, 4, widths=(2, v))),
]


OTHER_CALLS: list[OtherCall] = [
    (lambda s: fork_samples(None, 2), TypeError, "prompt must be a BlockTable"),
    (lambda s: fork_samples(s.table, 10**9), ValueError, "must be <= 1024"),
    (lambda s: beam_step(s.table, [0]), TypeError, "beams must be a list"),
    (lambda s: beam_step([s.table], "0"), TypeError, "parents must be a sequence"),
    (lambda s: beam_step([s.table], 0), TypeError, "parents must be a sequence"),
    (lambda s: beam_step([s.table, s.table], [0]), ValueError, "repeat a table"),
    (lambda s: beam_step(["x"], [0]), TypeError, "beams must hold BlockTables"),
    (lambda s: beam_step([s.table], [0] * 1025), ValueError, "must be <= 1024"),
    (lambda s: beam_step([s.table], [1]), ValueError, "out of range"),
    (lambda s: holders([None]), TypeError, "tables must hold BlockTables"),
    (lambda s: alpaca_savings(["beam"], 2), TypeError, "mode must be"),
    (lambda s: alpaca_savings("greedy", 2), ValueError, "mode must be"),
    (lambda s: parallel_savings(4096, 4096, 64, 1), ValueError, "at most 4096"),
    (lambda s: savings_table(widths=4), TypeError, "widths must be a tuple"),
    (lambda s: format_savings([None]), TypeError, "rows must hold Savings"),
]
(
    test_wrong_kinds_are_type_errors,
    test_wrong_values_are_value_errors,
    test_other_bad_arguments,
) = misuse_tests(INT_ARGUMENTS, OTHER_CALLS)


def test_beam_parents_may_be_a_numpy_array() -> None:
    s = scene()
    step = beam_step([s.table, s.child], np.array([1, 1]))
    assert [t.num_tokens for t in step.beams] == [6, 6]
