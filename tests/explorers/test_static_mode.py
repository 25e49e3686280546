"""Static mode: frames are what the live explorer shows, the explorer is left as it was."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
from ipywidgets.widgets.widget import _instances
from ipywidgets.widgets.widget_link import DirectionalLink, Link

from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.explorers.site import static
from pagedlab.explorers.views.controls import Play
from tests.refuses import refuses


@pytest.fixture(scope="module")
def explorer() -> AllocationExplorer:
    return AllocationExplorer(block_size=4, length=5)


def test_frames_are_the_live_explorers_frames_in_product_order(explorer) -> None:
    frames = static.render_frames(explorer, {"block_size": [2, 4], "length": [4, 5, 6]})
    assert [f[0] for f in frames] == [
        {"block_size": b, "length": n} for b in (2, 4) for n in (4, 5, 6)
    ]
    setting, png, readout = frames[4]  # block size 4, length 5: the example
    explorer.set(**setting)
    assert png == bytes(explorer.picture.value) and readout == explorer.readout.value
    assert "blocks 2 · physical [4, 1]" in readout and "output 3.000" in readout


def test_rendering_leaves_the_explorer_where_it_was(explorer) -> None:
    explorer.set(block_size=4, length=5)
    before = (bytes(explorer.picture.value), explorer.readout.value)
    static.render_frames(explorer, {"block_size": [1, 8], "length": [1, 9]})
    assert (explorer.block_size.value, explorer.length.value) == (4, 5)
    assert (bytes(explorer.picture.value), explorer.readout.value) == before


def _walk(widget: widgets.Widget) -> list[widgets.Widget]:
    found = [widget]
    for child in getattr(widget, "children", ()):
        found += _walk(child)
    return found


def _stacks(widget: widgets.Widget) -> list[widgets.Stack]:
    found = [widget] if isinstance(widget, widgets.Stack) else []
    for child in getattr(widget, "children", ()):
        found += _stacks(child)
    return found


def test_view_links_each_control_to_its_stack_level(explorer) -> None:
    axes = {"block_size": [2, 4, 8], "length": [3, 5]}
    view = static.static_view(explorer, axes, Play("length"))
    stacks = _stacks(view)
    outer = stacks[0]
    assert len(outer.children) == 3 and all(len(s.children) == 2 for s in outer.children)
    assert outer.selected_index == 1 and outer.children[1].selected_index == 1  # 4, 5
    frame = outer.children[1].children[1]
    picture, readout = frame.children
    assert "tokens 5" in readout.value and picture.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pagedlab-static" in view._dom_classes


def _links(play: widgets.Play) -> list[Link]:
    """Every live link whose source is ``play`` (jslink makes a Link, jsdlink a DirectionalLink)."""
    return [w for w in _instances.values() if isinstance(w, Link) and w.source[0] is play]


def test_play_replays_from_the_first_value_or_steps_on(explorer) -> None:
    axes = {"block_size": [4], "length": [1, 2, 3, 4, 5, 6, 7]}
    replay = next(w for w in _walk(static.static_view(explorer, axes, Play("length", "replay")))
                  if isinstance(w, widgets.Play))  # fmt: skip
    assert (replay.min, replay.value, replay.max) == (0, 4, 4)  # rests at length 5, its end
    links = _links(replay)
    assert links and all(type(w) is DirectionalLink for w in links)  # one way only
    steps = next(w for w in _walk(static.static_view(explorer, axes, Play("length")))
                 if isinstance(w, widgets.Play))  # fmt: skip
    assert (steps.min, steps.value, steps.max) == (0, 4, 6)  # steps on to length 7
    assert any(type(w) is Link for w in _links(steps))  # both ways


def test_allocation_explorer_replays_in_static_mode() -> None:
    declared = AllocationExplorer.DECLARATION
    assert declared is not None and declared.play == Play("length", "replay")
    assert AllocationExplorer.CONTROLS is declared.controls  # read from the one declaration


def test_the_live_page_reads_the_explorers_own_declarations() -> None:
    from pagedlab.explorers.scheduler import SchedulerExplorer
    from pagedlab.explorers.sharing import PrefixCacheExplorer, SharingExplorer
    from pagedlab.explorers.site import live

    for cls in (AllocationExplorer, SharingExplorer, PrefixCacheExplorer, SchedulerExplorer):
        assert cls.DECLARATION is not None and cls.DECLARATION.frames
        assert live.EXPLORERS[cls.__name__].declaration is cls.DECLARATION


def test_a_declaration_refuses_axes_that_are_not_its_controls() -> None:
    from pagedlab.explorers.views.controls import Declaration, Slider

    length = (Slider("length", 1, 8, "length", 5),)
    with pytest.raises(ValueError, match="'colour' is not a control"):
        Declaration("E", length, frames={"colour": [1]})
    for values in ([], 3, None):
        with pytest.raises(ValueError, match="'length' needs values"):
            Declaration("E", length, frames={"length": values})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="play axis 'length'"):
        Declaration("E", length, play=Play("length"))
    with pytest.raises(ValueError, match="play must be a Play"):
        Declaration("E", length, frames={"length": [1]}, play="length")  # type: ignore[arg-type]


def test_bad_axes_are_refused_by_name(explorer) -> None:
    with pytest.raises(ValueError, match="'colour'"):
        static.static_view(explorer, {"colour": [1]})
    with pytest.raises(ValueError, match="'picture' is not a control"):  # a widget, no control
        static.static_view(explorer, {"picture": [1]})
    with pytest.raises(ValueError, match="play axis 'length'"):
        static.static_view(explorer, {"block_size": [4]}, Play("length"))
    with pytest.raises(ValueError, match="at least one axis"):
        static.static_view(explorer, {})
    for values in ([], (), 4, None, "4"):  # empty, not a list of values: named, nothing drawn
        with pytest.raises(ValueError, match="static axis 'length'"):
            static.static_view(explorer, {"block_size": [4], "length": values})
    assert explorer.values["length"] == 5


def test_frames_are_quantised_pngs_of_the_same_size_and_fewer_bytes(explorer) -> None:
    from io import BytesIO

    from PIL import Image

    from pagedlab.pictures.png import quantised_png

    png = bytes(explorer.picture.value)
    small = quantised_png(png, static.FRAME_COLORS)
    assert Image.open(BytesIO(small)).size == Image.open(BytesIO(png)).size
    colours = Image.open(BytesIO(small)).convert("RGB").getcolors(256) or []
    assert 0 < len(colours) <= static.FRAME_COLORS
    assert len(small) < len(png) / 2
    frame = static._frame(png, "readout")
    assert frame.children[0].value == small


@pytest.mark.parametrize(
    ("axes", "play", "error", "naming"),
    [
        ({"": [1]}, None, ValueError, "''"),  # an empty name: no control
        ({3: [1]}, None, TypeError, "3"),  # an int for a name
        ({None: [1]}, None, TypeError, "None"),
        ({"length": None}, None, TypeError, "None"),  # an axis with no values
        ({"length": 5}, None, TypeError, "5"),
        ({"length": []}, None, ValueError, "[]"),
        ({"length": [None]}, None, TypeError, "None"),  # a value the control refuses
        ({"length": ["5"]}, None, TypeError, "'5'"),
        ({"length": [0, 5]}, None, ValueError, "0"),  # outside the slider's range
        ({"layout": ["sideways"]}, None, ValueError, "'sideways'"),
        ({"length": [5, 5]}, None, ValueError, "[5, 5]"),  # a frame twice
        ({"length": [5]}, "length", TypeError, "'length'"),  # a name, not a Play
        ({"length": [5]}, 3, TypeError, "3"),
    ],
)
def test_static_view_names_a_bad_axis_and_draws_nothing(
    explorer, axes, play, error, naming
) -> None:
    explorer.set(block_size=4, length=5)

    def state() -> tuple:
        return explorer.values, bytes(explorer.picture.value), explorer.readout.value

    refused = refuses(lambda: static.static_view(explorer, axes, play), error, state=state)
    message = str(refused)
    assert naming in message, message
    assert "static axis" in message or "play" in message, message
