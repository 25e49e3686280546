"""AllocationExplorer driven headlessly: sliders, Play, layouts, readout and impossible settings."""

from __future__ import annotations

import pytest

from pagedlab import BlockAllocator, BlockTable
from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.memory.events import Event
from pagedlab.pictures.scenes import LAYOUTS, make_allocator
from pagedlab.pictures.scenes import example_state as explorer_state


@pytest.fixture(scope="module")
def explorer() -> AllocationExplorer:
    return AllocationExplorer()


def test_example_readout(explorer: AllocationExplorer) -> None:
    state = explorer.set(block_size=4, length=5, layout=LAYOUTS[1])
    text = explorer.readout.value
    assert "blocks 2" in text
    assert "physical [4, 1]" in text
    assert "output 3.000 = (L+1)/2 = 3.000 ✓" in text
    assert state.blocks == [4, 1] and state.new_block == 1
    assert bytes(explorer.picture.value).startswith(b"\x89PNG")
    assert "pagedlab-readout" in explorer.readout._dom_classes
    assert "pagedlab-picture" in explorer.picture._dom_classes
    assert explorer.block_size.description == "block size"
    assert explorer.length.description == "length"
    assert explorer.layout.description == "layout"
    assert list(explorer.layout.options) == ["ascending", "example [4, 1, …]", "shuffled"]
    assert explorer.play.description == "play"


def test_picture_is_drawn_from_the_state(explorer: AllocationExplorer) -> None:
    state = explorer.set(block_size=3, length=10, layout=LAYOUTS[2])
    drawing = explorer.canvas.drawing
    assert drawing is not None
    assert drawing.count("filled-slot", "logical") == state.table.num_tokens == 10
    assert drawing.count("empty-slot", "logical") == 12 - 10
    assert [(a.logical, a.physical) for a in drawing.arrows] == list(enumerate(state.blocks))


def test_play_replays_the_growth_from_one_token(explorer: AllocationExplorer) -> None:
    explorer.set(block_size=4, length=5, layout=LAYOUTS[1])
    play = explorer.play
    assert (play.min, play.value, play.max) == (1, 5, 5)  # at rest at its end: Play restarts
    play.playing = True  # what the browser's Play sends when pressed, then one value a tick
    seen = []
    for tick in range(1, 6):
        play.value = tick
        seen.append((explorer.length.value, explorer.state.blocks))
        assert play.max == 5  # the kernel leaves a running Play alone
    play.playing = False
    assert seen == [(1, [4]), (2, [4]), (3, [4]), (4, [4]), (5, [4, 1])]  # 4 -> 5: one block
    assert (play.value, play.max) == (5, 5)


def test_play_rests_at_the_length_the_slider_shows(explorer: AllocationExplorer) -> None:
    explorer.set(block_size=4, length=9, layout=LAYOUTS[1])
    assert (explorer.play.value, explorer.play.max) == (9, 9)
    explorer.set(length=3)
    assert (explorer.play.value, explorer.play.max) == (3, 3)
    explorer.play.value = 1  # the Play's stop button: back to its start, not playing
    assert explorer.length.value == 3 and explorer.play.value == 3  # parked at the end again
    explorer.step()
    assert explorer.state.table.num_tokens == 4 and (explorer.play.value, explorer.play.max) == (
        4,
        4,
    )
    assert explorer.state.new_block is None


def test_play_paused_midway_rests_where_it_stopped(explorer: AllocationExplorer) -> None:
    explorer.set(block_size=4, length=8, layout=LAYOUTS[1])
    explorer.play.playing = True
    explorer.play.value = 1
    explorer.play.value = 2
    explorer.play.playing = False  # pause
    assert explorer.length.value == 2 and (explorer.play.value, explorer.play.max) == (2, 2)


def test_layouts_change_blocks_not_output() -> None:
    outputs = {}
    for layout in LAYOUTS:
        state = explorer_state(4, 5, layout)
        outputs[layout] = state.output
        assert state.ok
    assert explorer_state(4, 5, LAYOUTS[0]).blocks == [0, 1]
    assert set(outputs.values()) == {3.0}


def test_impossible_setting_is_explained(explorer: AllocationExplorer) -> None:
    state = explorer.set(block_size=1, length=40, layout=LAYOUTS[0])
    assert state.problem is not None and state.table.num_tokens == 32
    assert "not possible" in explorer.readout.value
    assert "needs 40 blocks" in explorer.readout.value
    assert "✓" not in explorer.readout.value
    explorer.set(block_size=2)  # 20 blocks: fits again
    assert explorer.state.problem is None and "✓" in explorer.readout.value


def test_bad_settings_raise_value_error_and_change_nothing(explorer: AllocationExplorer) -> None:
    before = explorer.state
    with pytest.raises(ValueError, match="block_size"):
        explorer.set(block_size=0)
    with pytest.raises(ValueError, match="layout"):
        explorer.set(layout="diagonal")
    assert explorer.state is before
    with pytest.raises(ValueError, match="length"):
        explorer.set(length=65)
    assert explorer.state is before


def test_example_history_is_real(example_pool: tuple[BlockAllocator, list[BlockTable]]) -> None:
    allocator, running = example_pool
    assert allocator.free_list() == [4, 1, 0]
    assert [t.blocks for t in running] == [[2, 3], [5, 6, 7]]
    assert make_allocator(LAYOUTS[1], 4).free_list()[:5] == [4, 1, 0, 3, 2]


def test_4_to_5_events() -> None:
    allocator = make_allocator(LAYOUTS[1], 4)
    from pagedlab import BlockTable

    table = BlockTable(allocator)
    table.append_tokens(4)
    before = [table.slot(p) for p in range(4)]
    with allocator.record() as events:
        table.append_tokens(1)
    assert events == [
        Event("allocate", 1, 1, table=table.id),
        Event("write", 1, 1, table.id, 4, 0),
    ]
    assert [table.slot(p) for p in range(4)] == before
