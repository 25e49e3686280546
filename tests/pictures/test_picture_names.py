"""Pictures show their claim: they name sequences by letter or role, key every drawn colour,
and route arrows clear of blocks."""

from __future__ import annotations

import re

from pagedlab import BlockAllocator, BlockTable, fork_samples
from pagedlab.explorers.sharing import PrefixCacheExplorer
from pagedlab.memory.sharing import beam_step
from pagedlab.pictures.blocks import POOL_BOX, scene
from pagedlab.pictures.drawing import Box, Drawing, Label
from pagedlab.pictures.scenes import (
    FIG8_WORDS,
    FIG9_STEP,
    figure8_prompt,
    figure9_before,
    kernel_batch,
    prefix_tokens,
)
from pagedlab.pictures.sharing import Frame, event_frames, sharing_scene
from pagedlab.pictures.theme import OTHER_COLOR, table_color


def _texts(d: Drawing) -> list[str]:
    return [label.text for label in d.labels]


def _no_table_id(texts: list[str], tables: list[BlockTable]) -> None:
    for text in texts:
        for t in tables:
            assert not re.search(rf"\b(sequence|table) {t.id}\b", text), text


def _keys(d: Drawing) -> list[str]:
    return [r.face for r in d.rects if r.kind == "key"]


def test_example_scene_title_names_no_table_id(
    example_pool: tuple[BlockAllocator, list[BlockTable]],
) -> None:
    pool, running = example_pool
    seq = BlockTable(pool)
    seq.append_tokens(5)
    d = scene(pool, [seq, *running], names=["our sequence", "B", "D"])
    assert "our sequence: 5 tokens, blocks of 4" in _texts(d)
    _no_table_id(_texts(d), [seq, *running])
    # a key per drawn sequence, and no grey key when every held block is drawn
    assert _keys(d)[:3] == [table_color(i) for i in range(3)]
    assert OTHER_COLOR not in _keys(d)
    assert {"our sequence", "B", "D"} <= set(_texts(d))


def test_grey_key_only_for_sequences_not_drawn(
    example_pool: tuple[BlockAllocator, list[BlockTable]],
) -> None:
    pool, running = example_pool
    seq = BlockTable(pool)
    seq.append_tokens(5)
    d = scene(pool, [seq])
    assert d.count("other-block", "pool") > 0
    assert OTHER_COLOR in _keys(d)
    assert "held by sequences not drawn" in _texts(d)
    _no_table_id(_texts(d), [seq, *running])


def _crosses(a: tuple[float, float], b: tuple[float, float], box: Box) -> bool:
    """Whether segment a-b (horizontal or vertical, or any: sampled) passes inside ``box``."""
    for k in range(1, 200):
        x = a[0] + (b[0] - a[0]) * k / 200
        y = a[1] + (b[1] - a[1]) * k / 200
        if box.x + 1e-6 < x < box.x + box.w - 1e-6 and box.y + 1e-6 < y < box.y + box.h - 1e-6:
            return True
    return False


def test_kernel_batch_picture_balanced_keyed_and_arrows_clear() -> None:
    batch = kernel_batch([5, 17, 30], block_size=4)
    d = scene(batch.allocator, batch.tables)
    pool = [d.boxes[("pool", b)] for b in range(batch.allocator.num_blocks)]
    columns: dict[float, int] = {}
    for b in pool:
        columns[round(b.x, 6)] = columns.get(round(b.x, 6), 0) + 1
    assert max(columns.values()) - min(columns.values()) <= 1, columns  # no orphan column
    assert _keys(d)[:3] == [table_color(i) for i in range(3)]
    assert {"sequence A", "sequence B", "sequence C"} <= set(_texts(d))
    _no_table_id(_texts(d), list(batch.tables))
    for arrow in d.arrows:
        points = [arrow.start, *arrow.via, arrow.end]
        for a, b in zip(points, points[1:], strict=False):
            for block, box in enumerate(pool):
                if block != arrow.physical:
                    assert not _crosses(a, b, box), (arrow.physical, block)
    assert all(POOL_BOX.x <= b.x for b in pool)


def test_sharing_strips_and_event_captions_name_sequences() -> None:
    prompt = BlockTable(BlockAllocator(8, 4, free_order=[7, 1, 3, 0, 2, 4, 5, 6]))
    prompt.append_tokens(7)
    a1, a2 = fork_samples(prompt, 2)
    frames = event_frames(
        prompt.allocator, lambda: [a1, a2], lambda: a1.append_tokens(1), names=["A1", "A2"]
    )
    captions = [f.caption for f in frames]
    assert "A1: copy block 1 -> block 3" in captions
    for frame in frames:
        _no_table_id(_texts(frame.drawing), [prompt, a1, a2])
        assert {"A1", "A2"} <= set(_texts(frame.drawing))
    d = sharing_scene(prompt.allocator, [a1, a2])
    assert {"sequence A", "sequence B"} <= set(_texts(d))


def _label_box(label: Label) -> Box:
    """A generous box around a label's ink: 0.62 em a character, 0.75 em high."""
    w = 0.62 * label.size / 72 * len(label.text)
    h = 0.75 * label.size / 72
    x = {"center": label.x - w / 2, "left": label.x, "right": label.x - w}[label.ha]
    return Box(x, label.y - h / 2, w, h)


def _overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


def _fig8_frames() -> list[Frame]:
    prompt = figure8_prompt()
    a1, a2 = fork_samples(prompt, 2)
    words = list(FIG8_WORDS)
    return event_frames(
        prompt.allocator,
        lambda: [a1, a2],
        lambda: a1.append_tokens(1),
        lambda: [[*words, "fathers"], [*words, "mothers"]],
        names=["A1", "A2"],
    )


def test_badges_never_cover_labels() -> None:
    beams = figure9_before()
    step = beam_step(beams, FIG9_STEP)
    drawings = [f.drawing for f in _fig8_frames()]
    drawings.append(sharing_scene(beams[0].allocator, step.beams))
    for d in drawings:
        badges = [r.box for r in d.rects if r.kind == "badge"]
        assert badges
        for label in d.labels:
            if label.text.startswith("×"):
                continue  # the badge's own count
            for badge in badges:
                assert not _overlap(_label_box(label), badge), label


def test_copy_target_shows_copied_words_and_strips_show_words() -> None:
    frames = _fig8_frames()
    copy = next(f for f in frames if f.event is not None and f.event.kind == "copy")
    assert (copy.event.src, copy.event.block) == (1, 3)
    target = copy.drawing.boxes[("pool", 3)]
    inside = {
        label.text
        for label in copy.drawing.labels
        if target.x < label.x < target.x + target.w and target.y < label.y < target.y + target.h
    }
    assert {"years", "ago", "our"} <= inside  # what the copy put there
    assert copy.drawing.count("filled-slot", "pool") == 4 + 3 + 3  # block 7, 1 and its copy
    texts = _texts(frames[0].drawing)
    assert "Four score and seven | years ago our" in texts
    assert "Four score and seven | years ago our fathers" in _texts(frames[-1].drawing)


def test_prefix_explorer_pool_readable_and_slots_carry_token_ids() -> None:
    explorer = PrefixCacheExplorer(shared=8, prompt_len=10, requests=3, block_size=4)
    view = explorer.render(shared=8, prompt_len=10, requests=3, block_size=4)
    assert view.state.cache.allocator.num_blocks == 16
    d = view.picture
    assert isinstance(d, Drawing)
    texts = set(_texts(d))
    assert {str(t) for t in prefix_tokens(8, 10, 2)} <= texts  # token ids in the slots
    # the largest setting still fits: 6 requests of 16 unshared tokens in blocks of 2
    big = explorer.render(shared=0, prompt_len=16, requests=6, block_size=2)
    assert big.state.cache.allocator.num_blocks == 48
