"""paged_attention_steps: the step-by-step mirror of one kernel program.

The steps must end where the real kernel ends (paged_attention, the Triton kernel in its
interpreter here) and where softmax attention ends (reference_attention), on layouts that
scatter the pages, with keys that move the running max so rescaling actually happens.
A bad call of ``paged_attention_steps`` or ``steps_table`` raises, naming the argument, and
changes no tensor (the table at the end).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.attention.kernel_steps import LoopStep, paged_attention_steps, steps_table
from pagedlab.attention.ops import (
    block_tables_tensor,
    paged_attention,
    paged_attention_one_page,
    reference_attention,
)
from tests.attention.bad_calls import HUGE, KIND, VALUE, BadCalls, World, refused
from tests.refuses import refuses


def paged_batch(
    lengths: list[int],
    block_size: int,
    num_heads: int = 1,
    num_kv_heads: int = 1,
    head_dim: int = 1,
    seed: int = 0,
    spread: float = 3.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[list[int]], torch.Tensor]:
    """Random q/K/V for ``lengths`` in a shuffled pool (two spare blocks hold junk)."""
    gen = torch.Generator().manual_seed(seed)
    pages = [-(-n // block_size) for n in lengths]
    num_blocks = sum(pages) + 2
    order = torch.randperm(num_blocks, generator=gen).tolist()
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    key_cache = torch.randn(shape, generator=gen) * spread
    value_cache = torch.randn(shape, generator=gen)
    tables, start = [], 0
    for p in pages:
        tables.append(order[start : start + p])
        start += p
    query = torch.randn(len(lengths), num_heads, head_dim, generator=gen)
    return query, key_cache, value_cache, tables, torch.tensor(lengths, dtype=torch.int32)


def example_cache(
    blocks: list[int], length: int = 5, num_blocks: int = 8
) -> tuple[torch.Tensor, ...]:
    """The example's head: keys 0, query 1, value of position p is p + 1; other slots junk."""
    key_cache = torch.full((num_blocks, 4, 1, 1), 50.0)  # junk: would dominate if read
    value_cache = torch.full((num_blocks, 4, 1, 1), -100.0)
    for pos in range(length):
        key_cache[blocks[pos // 4], pos % 4] = 0.0
        value_cache[blocks[pos // 4], pos % 4] = pos + 1.0
    return torch.ones(1, 1), key_cache, value_cache


@pytest.mark.parametrize("blocks", [[4, 1], [0, 1], [6, 3]])
def test_example_steps_read_the_table_and_give_three(blocks):
    query, key_cache, value_cache = example_cache(blocks)
    steps = paged_attention_steps(query, key_cache, value_cache, blocks + [-1], 5)
    assert [s.physical for s in steps] == blocks
    assert [s.positions for s in steps] == [(0, 1, 2, 3), (4,)]
    assert [s.masked for s in steps] == [0, 3]
    assert [s.m_new for s in steps] == [0.0, 0.0]  # keys 0: the max never moves
    assert steps[0].m_old == -math.inf and steps[0].alpha == 0.0  # nothing to rescale yet
    assert steps[1].alpha == 1.0 and not steps[1].rescaled
    assert [s.l_sum for s in steps] == [4.0, 5.0]
    assert steps[0].output == (2.5,) and steps[-1].output == (3.0,)


def test_steps_table_text_of_the_example():
    query, key_cache, value_cache = example_cache([4, 1])
    text = steps_table(paged_attention_steps(query, key_cache, value_cache, [4, 1], 5))
    lines = text.splitlines()
    assert lines[0].split() == [
        "block", "reads", "positions", "scores", "m_old", "m_new", "alpha", "block", "sum",
        "l", "acc/l",
    ]  # fmt: skip
    assert lines[1].split()[:3] == ["0", "physical", "4"] and lines[1].endswith("2.500")
    assert "4 (+3 masked)" in lines[2] and lines[2].endswith("3.000")
    assert "-0.000" not in text


def test_max_in_a_later_block_rescales_and_matches_the_kernel():
    # block size 4, 10 positions in physical blocks 6, 2, 5; the max grows in blocks 1 and 2
    keys = [0.0, 1.0, 0.5, 0.0, 2.0, 1.0, 0.0, 0.5, 3.0, 0.0]
    blocks = [6, 2, 5]
    key_cache = torch.full((8, 4, 1, 1), 10.0)
    value_cache = torch.full((8, 4, 1, 1), -1.0)
    for pos, k in enumerate(keys):
        key_cache[blocks[pos // 4], pos % 4] = k
        value_cache[blocks[pos // 4], pos % 4] = pos + 1.0
    query = torch.ones(1, 1)
    steps = paged_attention_steps(query, key_cache, value_cache, blocks, 10)
    assert [s.m_new for s in steps] == [1.0, 2.0, 3.0]
    assert [s.rescaled for s in steps] == [False, True, True]
    assert steps[1].alpha == pytest.approx(math.exp(-1.0))
    args = (query[None], key_cache, value_cache, block_tables_tensor([blocks]), torch.tensor([10]))
    args = (*args[:4], args[4].int())
    kernel = paged_attention(*args).item()
    reference = reference_attention(*args).item()
    assert steps[-1].output[0] == pytest.approx(kernel, rel=1e-6)
    assert steps[-1].output[0] == pytest.approx(reference, rel=1e-6)
    weights = torch.softmax(torch.tensor(keys), 0)
    assert steps[-1].output[0] == pytest.approx(float(weights @ torch.arange(1.0, 11.0)), rel=1e-6)


@pytest.mark.parametrize(
    "lengths, block_size, num_heads, num_kv_heads, head_dim",
    [
        ([5, 13, 1], 4, 1, 1, 1),
        ([7, 16], 3, 4, 2, 8),  # grouped-query attention, block size not a power of two
        ([9], 1, 2, 1, 5),  # a page per position
        ([33, 2], 16, 2, 2, 16),
    ],
)
def test_final_output_matches_kernel_and_reference(
    lengths, block_size, num_heads, num_kv_heads, head_dim
):
    query, key_cache, value_cache, tables, lens = paged_batch(
        lengths, block_size, num_heads, num_kv_heads, head_dim, seed=len(lengths) + block_size
    )
    bt = block_tables_tensor(tables)
    kernel = paged_attention(query, key_cache, value_cache, bt, lens)
    reference = reference_attention(query, key_cache, value_cache, bt, lens)
    moved = 0
    for s, n in enumerate(lengths):
        for h in range(num_heads):
            steps = paged_attention_steps(query[s], key_cache, value_cache, bt[s], n, head=h)
            assert [x.physical for x in steps] == tables[s]
            out = torch.tensor(steps[-1].output)
            torch.testing.assert_close(out, kernel[s, h], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out, reference[s, h], rtol=1e-5, atol=1e-5)
            moved += sum(x.rescaled for x in steps)
    assert moved > 0, "the keys never moved the running max: rescaling was not exercised"


def test_one_page_per_step_kernel_matches_the_steps():
    """``pages_per_step=1`` runs the very steps paged_attention_steps records."""
    from pagedlab.attention import launch as kernels

    query, key_cache, value_cache, tables, lens = paged_batch([11], 3, 2, 1, 4, seed=7)
    bt = block_tables_tensor(tables)
    out = kernels.launch_paged_attention(
        query, key_cache, value_cache, bt, lens, 4**-0.5, 4, pages_per_step=1
    )
    for h in range(2):
        steps = paged_attention_steps(query[0], key_cache, value_cache, tables[0], 11, head=h)
        torch.testing.assert_close(torch.tensor(steps[-1].output), out[0, h], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("block_size", "num_heads", "num_kv_heads"), [(1, 2, 1), (4, 4, 2), (16, 2, 2)]
)
def test_teaching_kernel_step_by_step_is_the_replay(block_size, num_heads, num_kv_heads):
    """The one-page kernel run on the sequence cut after block i (one program per cut) ends
    its loop after step i: its output is the replay's row i, rescaling included."""
    length = 3 * block_size + 1
    query, key_cache, value_cache, tables, _ = paged_batch(
        [length], block_size, num_heads, num_kv_heads, head_dim=4, seed=block_size
    )
    steps = [
        paged_attention_steps(query[0], key_cache, value_cache, tables[0], length, head=h)
        for h in range(num_heads)
    ]
    cuts = [min((i + 1) * block_size, length) for i in range(len(steps[0]))]
    out = paged_attention_one_page(
        query.expand(len(cuts), -1, -1),
        key_cache,
        value_cache,
        block_tables_tensor(tables * len(cuts)),
        torch.tensor(cuts, dtype=torch.int32),
    )
    for h, head_steps in enumerate(steps):
        for i, step in enumerate(head_steps):
            torch.testing.assert_close(out[i, h], torch.tensor(step.output), rtol=1e-6, atol=1e-6)
    assert any(step.rescaled for head_steps in steps for step in head_steps)


def _softmax_prefix(query, key_cache, value_cache, blocks, n, scale):
    k = key_cache[blocks].flatten(0, 1)[:n, 0].double()
    v = value_cache[blocks].flatten(0, 1)[:n, 0].double()
    weights = torch.softmax(k @ query[0].double() * scale, 0)
    return (weights @ v).tolist()


@settings(max_examples=40, deadline=None)
@given(
    block_size=st.integers(1, 6),
    length=st.integers(1, 30),
    head_dim=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    spread=st.sampled_from([0.0, 1.0, 8.0]),
)
def test_every_step_is_softmax_over_the_prefix(block_size, length, head_dim, seed, spread):
    query, key_cache, value_cache, tables, _ = paged_batch(
        [length], block_size, head_dim=head_dim, seed=seed, spread=spread
    )
    before = (key_cache.clone(), value_cache.clone())
    scale = head_dim**-0.5
    steps = paged_attention_steps(query[0], key_cache, value_cache, tables[0], length)
    assert len(steps) == -(-length // block_size)
    assert sum(len(s.positions) for s in steps) == length
    assert sum(s.masked for s in steps) == len(steps) * block_size - length
    for i, s in enumerate(steps):
        assert s.m_new >= s.m_old and 0.0 <= s.alpha <= 1.0
        assert s.m_new == max(s.m_old, max(s.scores))
        assert s.l_sum >= 1.0 - 1e-6
        seen = min(length, (i + 1) * block_size)
        expected = _softmax_prefix(query[0], key_cache, value_cache, tables[0], seen, scale)
        assert s.output == pytest.approx(expected, rel=1e-4, abs=1e-4)
    assert torch.equal(before[0], key_cache) and torch.equal(before[1], value_cache)


def test_steps_are_frozen():
    query, key_cache, value_cache = example_cache([4, 1])
    step = paged_attention_steps(query, key_cache, value_cache, [4, 1], 5)[0]
    assert isinstance(step, LoopStep)
    with pytest.raises(AttributeError):
        step.physical = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"query": torch.ones(1, 1, 1)}, "query must be one sequence's"),
        ({"head": 1}, "head must be an int in [0, 1), got 1"),
        ({"head": -1}, "got -1"),
        ({"seq_len": 9}, "seq_lens[0] = 9 exceeds"),
        ({"seq_len": 0}, "seq_len must be >= 1, got 0"),
        ({"seq_len": True}, "seq_len must be an integer, got True"),
        ({"row": [4, 8]}, "block_tables[0, 1] = 8 is not a block id"),
        ({"row": [[4, 1]]}, "block_table_row must be 1-D"),
        ({"scale": float("nan")}, "scale must be finite"),
    ],
)
def test_bad_input_raises_value_error_naming_it(change, message):
    query, key_cache, value_cache = example_cache([4, 1])
    kwargs = {"query": query, "row": [4, 1], "seq_len": 5, "head": 0, "scale": None} | change
    refuses(
        lambda: paged_attention_steps(
            kwargs["query"], key_cache, value_cache, kwargs["row"], kwargs["seq_len"],
            head=kwargs["head"], scale=kwargs["scale"],
        ),
        naming=message,
        state=lambda: (key_cache.tolist(), value_cache.tolist()),
    )  # fmt: skip


# -- bad calls: paged_attention_steps(query, key_cache, value_cache, row, seq_len, head, scale)
BAD = BadCalls()


def _steps(w: World, **change: object) -> object:
    args = {
        "query": w.attention["query"][0],
        "key_cache": w.cache.key,
        "value_cache": w.cache.value,
        "block_table_row": [4, 1],
        "seq_len": 5,
        **change,
    }
    return paged_attention_steps(**args)  # type: ignore[arg-type]


BAD.case(
    "steps query numpy", lambda w: _steps(w, query=w.attention["query"][0].numpy()), KIND, "query"
)
BAD.case(
    "steps query sparse",
    lambda w: _steps(w, query=w.attention["query"][0].to_sparse()),
    KIND,
    "query",
)
BAD.case(
    "steps row floats",
    lambda w: _steps(w, block_table_row=[4.7, 1.2]),
    KIND,
    "block_table_row",
    "4.7",
)
BAD.case(
    "steps row bools",
    lambda w: _steps(w, block_table_row=[True, 1]),
    KIND,
    "block_table_row",
    "True",
)
BAD.case(
    "steps row huge", lambda w: _steps(w, block_table_row=[4, 2**40]), VALUE, "block_table_row"
)
BAD.ints("steps seq_len", "seq_len", lambda w, x: _steps(w, seq_len=x), [0, -1, 9, HUGE])
BAD.ints("steps head", "head", lambda w, x: _steps(w, head=x), [-1, 4, HUGE])
BAD.case("steps scale", lambda w: _steps(w, scale=1e39), VALUE, "scale")
# -- steps_table(steps, decimals) --------------------------------------------------------------
BAD.case("steps_table str", lambda w: steps_table("steps"), KIND, "steps")
BAD.case("steps_table empty", lambda w: steps_table([]), VALUE, "steps is empty")
BAD.case("steps_table ints", lambda w: steps_table([1, 2]), KIND, "steps[0]")
BAD.ints("steps_table decimals", "decimals", lambda w, x: steps_table(_steps(w), x), [-1, 99])


@pytest.mark.parametrize("bad", BAD, ids=BAD.ids())
def test_bad_call_raises_a_clear_error_and_changes_nothing(bad):
    refused(bad)


def test_both_kernel_steps_functions_have_bad_call_rows():
    """The table covers each public function of kernel_steps (add rows for a new one)."""
    labels = BAD.labels()
    assert "steps " in labels and "steps_table " in labels


def test_online_softmax_figure_draws_every_read():
    from pagedlab.pictures.online_softmax import online_softmax_figure
    from pagedlab.pictures.png import to_png

    query, key_cache, value_cache = example_cache([4, 1])
    steps = paged_attention_steps(query, key_cache, value_cache, [4, 1], 5)
    fig = online_softmax_figure(steps, "seed")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(fig.axes) == 3
    assert "physical 4" in texts and "physical 1" in texts and "+3 masked" in texts
    labels = [t.get_text() for t in fig.axes[2].get_xticklabels()]
    assert labels == ["logical 0", "logical 1"]
    assert to_png(online_softmax_figure(steps)).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="steps is empty"):
        online_softmax_figure([])


def test_the_this_block_key_shows_the_colour_of_every_block_read():
    """The running-sum bars take each physical block's colour: so must their key."""
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    from pagedlab.pictures.online_softmax import online_softmax_figure
    from pagedlab.pictures.theme import PALETTE

    query, key_cache, value_cache = example_cache([4, 1])
    fig = online_softmax_figure(paged_attention_steps(query, key_cache, value_cache, [4, 1], 5))
    key = fig.axes[2].get_legend()
    faces = {to_hex(r.get_facecolor()).upper() for r in key.findobj(Rectangle)}
    assert {PALETTE[4 % len(PALETTE)].upper(), PALETTE[1].upper()} <= faces
