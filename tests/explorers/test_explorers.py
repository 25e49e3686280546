"""Every explorer on the one Explorer base: the same parts, the display bundle, atomic set().

Misuse: an unknown keyword, a wrong kind or a wrong value raises a clear error
naming it, and on any error no widget value, readout, picture or state has changed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import ipywidgets as widgets
import pytest

from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.explorers.base import WIDGET_VIEW, Explorer, View
from pagedlab.explorers.batch import BatchExplorer
from pagedlab.explorers.engine import EngineExplorer
from pagedlab.explorers.kernel import KernelExplorer
from pagedlab.explorers.sharing import PrefixCacheExplorer, SharingExplorer
from pagedlab.explorers.views.controls import Choice, Slider, Toggle
from pagedlab.explorers.waste import BlockSizeExplorer, ReservationExplorer
from pagedlab.ground.checks import Refused
from pagedlab.simulate import block_size_sweep, make_trace


def _block_size_explorer() -> BlockSizeExplorer:
    return BlockSizeExplorer(block_size_sweep(make_trace(2.0, 30.0, seed=0), sizes=(4, 16)))


def _engine_explorer() -> EngineExplorer:
    from pagedlab import reference_attention
    from pagedlab.model import TINY, TinyLlama

    model = TinyLlama(TINY, seed=0, init_std=0.3)
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5], [3, 5]]
    return EngineExplorer(
        model,
        prompts,
        lambda ids: " ".join(map(str, ids)),
        max_new_tokens=4,
        num_blocks=3,
        block_size=4,
        decode_attention=reference_attention,
    )


FACTORIES: dict[str, Callable[[], Explorer]] = {
    "AllocationExplorer": AllocationExplorer,
    "KernelExplorer": lambda: KernelExplorer(num_seqs=1, block_size=4, head_dim=8),
    "SharingExplorer": SharingExplorer,
    "PrefixCacheExplorer": PrefixCacheExplorer,
    "ReservationExplorer": ReservationExplorer,
    "BlockSizeExplorer": _block_size_explorer,
    "BatchExplorer": lambda: BatchExplorer(num_seqs=2),
    "EngineExplorer": lambda: _engine_explorer(),
}


@pytest.fixture(scope="module", params=list(FACTORIES))
def explorer(request: pytest.FixtureRequest) -> Explorer:
    return FACTORIES[request.param]()


def snapshot(e: Explorer) -> tuple:
    parts = (e.widget, e.picture, e.readout, *e.controls.values())
    ranges = [(getattr(c, "min", None), getattr(c, "max", None)) for c in e.controls.values()]
    shown = (e.readout.value, bytes(e.picture.value), e.state)
    return (e.values, ranges, *shown, [id(p) for p in parts])


def bad_values(control: widgets.ValueWidget) -> list[object]:
    """Values of the wrong kind or out of range for ``control``."""
    if isinstance(control, widgets.IntSlider):
        return [control.max + 1, control.min - 1, 1.5, "3", True, None]
    return ["no such option", 1.5, None, True]


def test_every_explorer_has_the_same_parts(explorer: Explorer) -> None:
    assert isinstance(explorer, Explorer)
    assert isinstance(explorer.widget, widgets.VBox)
    assert explorer.picture in explorer.widget.children
    assert explorer.readout in explorer.widget.children
    assert "pagedlab-picture" in explorer.picture._dom_classes
    assert "pagedlab-readout" in explorer.readout._dom_classes
    assert bytes(explorer.picture.value).startswith(b"\x89PNG") and explorer.readout.value
    assert explorer.state is not None
    for name, control in explorer.controls.items():
        assert getattr(explorer, name) is control and control.description


def test_display_bundle_is_widget_png_and_short_text(explorer: Explorer) -> None:
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {WIDGET_VIEW, "image/png", "text/plain"}
    assert bundle[WIDGET_VIEW]["model_id"] == explorer.widget.model_id
    assert base64.b64decode(bundle["image/png"]) == bytes(explorer.picture.value)
    name = type(explorer).__name__
    assert bundle["text/plain"] == repr(explorer) and bundle["text/plain"].startswith(name + "(")
    assert "0x" not in bundle["text/plain"]  # no memory address: nbval compares this text


def test_unknown_keywords_are_refused_and_change_nothing(explorer: Explorer) -> None:
    before = snapshot(explorer)
    first = next(iter(explorer.controls))
    for name in ("nonexistent", "picture", "readout", "widget", "state"):
        with pytest.raises(TypeError, match=f"unknown control '{name}'; valid: {first}"):
            explorer.set(**{name: 1})
        assert snapshot(explorer) == before


def test_bad_values_are_named_and_change_nothing(explorer: Explorer) -> None:
    before = snapshot(explorer)
    for name, control in explorer.controls.items():
        for value in bad_values(control):
            with pytest.raises((TypeError, ValueError)) as raised:
                explorer.set(**{name: value})
            message = str(raised.value)
            assert name in message and repr(value) in message, message
            assert snapshot(explorer) == before, (name, value)


def test_a_good_move_with_a_bad_one_is_refused_whole(explorer: Explorer) -> None:
    names = list(explorer.controls)
    before = snapshot(explorer)
    good = _another_value(explorer.controls[names[0]])
    with pytest.raises((TypeError, ValueError)):
        explorer.set(**{names[0]: good, names[-1]: "no such option", "extra": 1})
    with pytest.raises((TypeError, ValueError)):
        explorer.set(**{names[0]: good, names[-1]: bad_values(explorer.controls[names[-1]])[0]})
    assert snapshot(explorer) == before


def test_a_good_set_moves_the_controls_and_redraws(explorer: Explorer) -> None:
    name = next(iter(explorer.controls))
    value = _another_value(explorer.controls[name])
    picture = bytes(explorer.picture.value)
    state = explorer.set(**{name: value})
    assert explorer.values[name] == value and explorer.state is state
    assert bytes(explorer.picture.value) != picture


def _another_value(control: widgets.ValueWidget) -> object:
    if isinstance(control, widgets.IntSlider):
        return control.min if control.value != control.min else control.min + control.step
    options = list(control.options)
    return next(o for o in options if o != control.value)


def test_reservation_ranges_follow_each_other() -> None:
    e = ReservationExplorer()
    before = snapshot(e)
    with pytest.raises(ValueError, match="generated must be <= 2, got 3"):
        e.set(generated=3)
    with pytest.raises(ValueError, match="response must be <= 56, got 100"):
        e.set(reserved=64, response=100)
    assert snapshot(e) == before
    e.set(reserved=64, response=50, generated=50)
    assert (e.response.max, e.generated.max) == (56, 50)
    e.reserved.value = 128  # the learner widens the reservation: the ranges follow
    assert e.response.max == 120 and e.state.never_used == 128 - 8 - 50


def test_reservation_readout_counts_blocks_in_words() -> None:
    e = ReservationExplorer()  # 8 + 2 tokens in blocks of 16
    assert "<b>paged</b>: 1 block of 16" in e.readout.value
    assert "2 of them for future tokens" in e.readout.value
    e.set(block_size=4)
    assert "<b>paged</b>: 2 blocks of 4" in e.readout.value


def test_a_new_explorer_is_controls_plus_render() -> None:
    class Squares(Explorer):
        CONTROLS = (Slider("n", 0, 9, "n", 2),)

        def render(self, n: int) -> View:
            if n == 7:
                raise Refused("7 is not drawn")
            return View(n * n, b"\x89PNG" + bytes([n]), f"{n}² = {n * n}")

    assert Squares().state == 4  # the declared default
    e = Squares(n=3)
    assert (e.state, e.readout.value, repr(e)) == (9, "3² = 9", "Squares(n=3)")
    assert e.set(n=4) == 16 and e.n.value == 4
    e.n.value = 7  # a move the range allows but the model refuses: explained, not raised
    assert "not possible" in e.readout.value and "7 is not drawn" in e.readout.value
    assert e.state == 16  # the state shown is still the last one drawn
    with pytest.raises(Refused, match="7 is not drawn"):
        e.set(n=7)
    with pytest.raises(TypeError, match="unknown control 'm'; valid: n"):
        Squares(m=3)

    class Taken(Squares):
        CONTROLS = (Slider("picture", 0, 9, "picture", 2),)

    class Twice(Squares):
        CONTROLS = (Slider("n", 0, 9, "n", 2), Choice("n", ("a", "b"), "n", "a"))

    for bad in (Taken, Twice):
        with pytest.raises(ValueError, match="is taken"):
            bad()


def test_each_explorers_widgets_are_its_declarations(explorer: Explorer) -> None:
    assert_widgets_are_declarations(explorer)


def assert_widgets_are_declarations(explorer: Explorer) -> None:
    """Range, options, description and kind of each widget come from ``CONTROLS``."""
    assert list(explorer.controls) == [c.name for c in explorer.CONTROLS]
    bounds = explorer.bounds(explorer.values)
    for declared in explorer.CONTROLS:
        widget = explorer.controls[declared.name]
        assert widget.description == declared.description
        if isinstance(declared, Slider):
            assert isinstance(widget, widgets.IntSlider) and widget.step == declared.step
            low, high = bounds.get(declared.name, (declared.min, declared.max))
            assert (widget.min, widget.max) == (low, high)
            assert declared.min <= low <= high <= declared.max
        elif isinstance(declared, Choice):
            kind = widgets.SelectionSlider if declared.slider else widgets.ToggleButtons
            assert type(widget) is kind and tuple(widget.options) == declared.options
        else:
            assert isinstance(widget, widgets.Checkbox)


@pytest.mark.parametrize(
    "declare",
    [
        lambda: Slider("n", 1, 9, "n", 0),  # default below the range
        lambda: Slider("n", 1, 9, "n", 10),  # above
        lambda: Slider("n", 5, 4, "n", 5),  # max < min
        lambda: Slider("n", 0, 64, "n", 10, step=4),  # not on a step
        lambda: Slider("n", 0, 9, "n", True),  # a bool is no int
        lambda: Slider("not a name", 0, 9, "n", 1),
        lambda: Slider("n", 0, 9, "", 1),  # no description
        lambda: Choice("m", ("a", "b"), "m", "c"),  # default not an option
        lambda: Choice("m", (), "m", "a"),
        lambda: Choice("m", ("a", "a"), "m", "a"),
        lambda: Choice("m", ("a", 1), "m", "a"),  # mixed kinds
        lambda: Toggle("t", "t", 1),  # not a bool
    ],
)
def test_a_declaration_outside_its_own_range_is_refused(declare: Callable[[], object]) -> None:
    with pytest.raises((TypeError, ValueError)):
        declare()


def test_a_declaration_accepts_what_its_widget_can_hold() -> None:
    assert Slider("n", 1, 9, "n", 2).accept(9) == 9
    assert Choice("m", [2, 4], "m", 4).options == (2, 4)  # kept as a tuple
    with pytest.raises(ValueError, match=r"m must be one of \[2, 4\], got 3"):
        Choice("m", (2, 4), "m", 4).accept(3)
    with pytest.raises(TypeError, match="t must be True or False, got 1"):
        Toggle("t", "t", False).accept(1)


def test_a_browser_move_sends_the_picture_first_and_drops_stale_kernel_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a kernel, ``finish`` of a browser move is deferred; only the newest one runs."""
    import pagedlab.explorers.base as base

    pending: list[Callable[[], None]] = []
    monkeypatch.setattr(
        base, "_after_this_message", lambda callback: pending.append(callback) or True
    )
    e = AllocationExplorer(block_size=4, length=5)
    readout = e.readout.value
    e.length.value = 6  # two key presses before the kernel's slow part ran
    e.length.value = 7
    assert e.state.table.num_tokens == 7 and e.state.output is None  # picture drawn, no kernel
    assert e.readout.value == readout and len(pending) == 2
    for callback in pending:
        callback()
    assert e.state.output == 4.0 and "output 4.000 = (L+1)/2 = 4.000 ✓" in e.readout.value
    e.length.value = 8
    e.set(length=9)  # code moves are synchronous and supersede a pending browser move
    pending[-1]()
    assert e.state.table.num_tokens == 9 and "output 5.000 = (L+1)/2 = 5.000 ✓" in e.readout.value
