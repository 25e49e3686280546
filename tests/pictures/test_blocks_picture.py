"""pagedlab.pictures.blocks: drawn from the real state, counts match, nothing is mutated."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab import BlockAllocator, BlockTable
from pagedlab.pictures.blocks import pool_contents, scene
from pagedlab.pictures.canvas import Canvas
from pagedlab.pictures.drawing import Box
from pagedlab.pictures.theme import PALETTE, table_color


def contains(box: Box, point: tuple[float, float], tol: float = 1e-9) -> bool:
    x, y = point
    return box.x - tol <= x <= box.x + box.w + tol and box.y - tol <= y <= box.y + box.h + tol


def snapshot(allocator: BlockAllocator, tables: list[BlockTable]) -> tuple:
    return (
        allocator.refcounts(),
        allocator.free_list(),
        [(t.blocks, t.num_tokens, t.freed) for t in tables],
    )


def test_example_counts_and_arrows(example_sequence: tuple[BlockAllocator, BlockTable]) -> None:
    allocator, table = example_sequence
    d = scene(allocator, [table])
    assert d.count("filled-slot", "logical") == 5
    assert d.count("empty-slot", "logical") == 3
    assert d.count("filled-slot", "pool") == 5
    assert d.count("empty-slot", "pool") == 3
    assert d.count("free-block", "pool") == 6
    assert [(a.logical, a.physical) for a in d.arrows] == [(0, 4), (1, 1)]
    for arrow in d.arrows:
        assert contains(d.boxes[("logical", arrow.logical)], arrow.start)
        assert contains(d.boxes[("pool", arrow.physical)], arrow.end)
    texts = {label.text for label in d.labels}
    assert {"1", "2", "3", "4", "5"} <= texts


@settings(max_examples=25, deadline=None)
@given(
    block_size=st.integers(1, 16),
    length=st.integers(1, 64),
    seed_value=st.integers(0, 1000),
)
def test_counts_match_any_table_and_nothing_mutated(
    block_size: int, length: int, seed_value: int
) -> None:
    order = list(range(64))
    import random

    random.Random(seed_value).shuffle(order)
    allocator = BlockAllocator(64, block_size, free_order=order)
    table = BlockTable(allocator)
    table.append_tokens(length)
    other = table.fork()
    before = snapshot(allocator, [table, other])
    d = scene(allocator, [table, other], highlight=[table.blocks[-1]])
    assert snapshot(allocator, [table, other]) == before
    assert d.count("filled-slot", "logical") == table.num_tokens
    assert d.count("empty-slot", "logical") == table.num_slots - table.num_tokens
    # the pool shows every block once, each slot of held blocks once
    assert d.count("tab", "pool") == allocator.num_blocks
    assert d.count("free-block", "pool") == allocator.num_free
    assert d.count("badge", "pool") == len(table.blocks)  # all shared by the fork: x2
    assert [(a.logical, a.physical) for a in d.arrows] == list(enumerate(table.blocks))
    for arrow in d.arrows:
        assert contains(d.boxes[("pool", arrow.physical)], arrow.end)


def test_labels_never_overlap_up_to_64_tokens() -> None:
    for block_size in range(1, 17):
        allocator = BlockAllocator(32, block_size)
        table = BlockTable(allocator)
        table.append_tokens(min(64, 32 * block_size))
        d = scene(allocator, [table])
        slots = [r for r in d.rects if r.kind == "filled-slot" and r.view == "logical"]
        width = slots[0].box.w * 72  # points
        for label in d.labels:
            if label.text.isdigit() and label.size >= 5:
                # digits are about 0.62 em wide
                assert 0.64 * label.size * max(2, len(label.text)) <= max(width, 16.0) + 1e-6


def test_pool_contents_and_other_requests() -> None:
    allocator = BlockAllocator(6, 2)
    mine, other = BlockTable(allocator), BlockTable(allocator)
    mine.append_tokens(3)
    other.append_tokens(2)
    contents = pool_contents(allocator, [mine], [["a", "b", "c"]])
    assert contents == {(0, 0): "a", (0, 1): "b", (1, 0): "c"}
    d = scene(allocator, [mine])
    assert d.count("other-block", "pool") == 1  # held by a table that is not drawn
    assert d.count("free-block", "pool") == 3


def test_canvas_renders_png_and_reuses_artists(
    example_sequence: tuple[BlockAllocator, BlockTable],
) -> None:
    allocator, table = example_sequence
    canvas = Canvas(dpi=40)
    png = canvas.render(scene(allocator, [table])).png()
    assert png.startswith(b"\x89PNG")
    artists = len(canvas.ax.get_children())
    table.append_tokens(7)
    canvas.render(scene(allocator, [table]))
    assert len(canvas.ax.get_children()) == artists
    assert len(canvas.rects.get_paths()) == len(canvas.drawing.rects)  # type: ignore[union-attr]


def test_palette_is_okabe_ito() -> None:
    assert table_color(0) == "#E69F00" and len(set(PALETTE)) == len(PALETTE)


def test_bad_values_raise_before_drawing(
    example_sequence: tuple[BlockAllocator, BlockTable],
) -> None:
    allocator, table = example_sequence
    import pytest

    with pytest.raises(ValueError, match="values has 2 entries"):
        scene(allocator, [table], values=[[1, 2]])
    with pytest.raises(ValueError, match="tables is empty"):
        scene(allocator, [])


def test_other_scenes_read_state_and_never_write_it() -> None:
    from pagedlab.memory.sharing import fork_samples
    from pagedlab.pictures.canvas import drawing_png as to_png
    from pagedlab.pictures.reservation import reservation_scene
    from pagedlab.pictures.scenes import figure8_prompt, kernel_batch
    from pagedlab.pictures.sharing import event_frames, sharing_scene
    from pagedlab.simulate.policies import OneRequest

    prompt = figure8_prompt()
    samples = fork_samples(prompt, 2)
    before = snapshot(prompt.allocator, samples)
    d = sharing_scene(prompt.allocator, samples, highlight=[1], caption="c", title="t")
    assert snapshot(prompt.allocator, samples) == before
    assert d.count("badge", "pool") == 2 and d.count("table-cell", "table") == 4
    frames = event_frames(prompt.allocator, lambda: samples, lambda: None)
    assert [f.caption for f in frames] == ["before", "after"]
    assert snapshot(prompt.allocator, samples) == before
    batch = kernel_batch()
    held = snapshot(batch.allocator, batch.tables)
    assert scene(batch.allocator, batch.tables).count("free-block", "pool") == 2
    assert snapshot(batch.allocator, batch.tables) == held
    request = OneRequest(8, 300, 120, 1024, 16)
    r = reservation_scene(request)
    widths = {rect.kind: rect.box.w for rect in r.rects if rect.view == "contiguous"}
    assert widths["tokens"] / widths["internal"] == pytest.approx(128 / 716)
    assert r.count("block", "zoom") == request.paged_blocks == 8
    assert to_png(r)[:4] == b"\x89PNG"


def test_quantised_png_reads_bytes_or_pixels_alike_and_save_png_writes_it(tmp_path) -> None:
    import io

    import numpy as np
    from PIL import Image

    from pagedlab.pictures.png import quantised_png, save_png

    allocator = BlockAllocator(4, block_size=2)
    png = Canvas().render(scene(allocator, [BlockTable(allocator)])).png()
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    small = quantised_png(png, 8)
    assert small == quantised_png(pixels, 8) == quantised_png(png, 8)
    assert Image.open(io.BytesIO(small)).mode == "P"
    assert 0 < len(Image.open(io.BytesIO(small)).convert("RGB").getcolors(256) or []) <= 8
    save_png(pixels, tmp_path / "x.png", colors=8)
    assert (tmp_path / "x.png").read_bytes() == small
