"""AllocationExplorer driven headlessly: sliders, Play, layouts, readout and impossible settings."""

from __future__ import annotations

import pytest

from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.memory.events import Event
from pagedlab.scenes import LAYOUTS, make_allocator, seed_history
from pagedlab.scenes import seed_state as explorer_state


@pytest.fixture(scope="module")
def explorer() -> AllocationExplorer:
    return AllocationExplorer()


def test_seed_readout(explorer: AllocationExplorer) -> None:
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
    assert list(explorer.layout.options) == ["ascending", "seed [4, 1, …]", "shuffled"]
    assert explorer.play.description == "play"


def test_picture_is_drawn_from_the_state(explorer: AllocationExplorer) -> None:
    state = explorer.set(block_size=3, length=10, layout=LAYOUTS[2])
    drawing = explorer.canvas.drawing
    assert drawing is not None
    assert drawing.count("filled-slot", "logical") == state.table.num_tokens == 10
    assert drawing.count("empty-slot", "logical") == 12 - 10
    assert [(a.logical, a.physical) for a in drawing.arrows] == list(enumerate(state.blocks))


def test_play_steps_one_token_at_a_time(explorer: AllocationExplorer) -> None:
    explorer.set(block_size=4, length=4, layout=LAYOUTS[1])
    assert explorer.state.blocks == [4]
    explorer.play.value = 5  # what the Play widget does on each tick
    assert explorer.length.value == 5 and explorer.state.table.num_tokens == 5
    assert explorer.state.blocks == [4, 1]  # one new block, the first did not move
    explorer.step()
    assert explorer.state.table.num_tokens == 6 and explorer.play.value == 6
    assert explorer.state.new_block is None


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


def test_seed_history_is_real() -> None:
    allocator, running = seed_history(8, 4, finished=False)
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
