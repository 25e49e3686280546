"""The widget's Play is the declared Play: built by the base, its mode from the declaration.

A ``"step"`` Play steps on from the value shown (on a slider: its value; on a choice: its
index), mirrored both ways for moves made by code; a ``"replay"`` Play replays from the first
value up to the one shown (tests/explorers/test_allocation_explorer.py has the growth).
"""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.hit_rate import HitRateExplorer
from pagedlab.explorers.sharing import EvictionExplorer
from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.pictures.drawing import Drawing


def test_a_step_play_on_a_slider_moves_the_slider_both_ways() -> None:
    explorer = EvictionExplorer(others=2)
    play = explorer.play
    assert isinstance(play, widgets.Play) and play in explorer.widget.children  # first row
    assert (play.min, play.value, play.max, play.interval) == (0, 2, 6, 700)
    assert play.show_repeat  # step mode
    play.value = 4  # a tick
    assert explorer.values["others"] == 4 and "others" in repr(explorer)
    explorer.set(others=1)  # code moves the slider: the Play follows
    assert play.value == 1


def test_a_step_play_on_a_choice_moves_its_index() -> None:
    explorer = HitRateExplorer()
    play, control = explorer.play, explorer.controls["block_size"]
    assert play is not None and (play.min, play.max) == (0, len(control.options) - 1)
    assert play.value == control.index
    play.value = 0
    assert explorer.values["block_size"] == control.options[0]


class _Grow(Explorer):
    DECLARATION = Declaration(
        "_Grow",
        (Slider("n", 2, 20, "n", 6, step=2), Choice("colour", ("red", "blue"), "colour", "red")),
        frames={"n": [2, 4, 6]},
        play=Play("n", "replay", interval_ms=100),
    )

    def render(self, n: int, colour: str) -> View:
        return View((n, colour), Drawing(size=(1.0, 1.0)), f"{n} {colour}")


def test_a_replay_play_follows_the_declared_mode_range_and_step() -> None:
    explorer = _Grow()
    play = explorer.play
    assert play is not None and not play.show_repeat and play.interval == 100
    assert (play.min, play.value, play.max, play.step) == (2, 6, 6, 2)  # rests at its end
    play.playing = True
    for tick in (2, 4, 6):
        play.value = tick
        assert explorer.state == (tick, "red")
    play.playing = False
    explorer.set(n=10)
    assert (play.value, play.max) == (10, 10)


def test_no_declared_play_no_play_and_play_is_not_a_control_name() -> None:
    class Still(Explorer):
        DECLARATION = Declaration("Still", (Slider("n", 1, 3, "n", 1),), frames={"n": [1]})

        def render(self, n: int) -> View:
            return View(n, Drawing(size=(1.0, 1.0)), str(n))

    assert Still().play is None

    class Clash(Still):
        DECLARATION = Declaration("Clash", (Slider("play", 1, 3, "play", 1),))

    with pytest.raises(ValueError, match="'play' is taken"):
        Clash()


def test_a_play_declaration_refuses_a_bad_mode_or_interval() -> None:
    with pytest.raises(ValueError, match="'bounce'"):
        Play("n", "bounce")
    with pytest.raises(ValueError, match="10"):
        Play("n", interval_ms=10)
    with pytest.raises(ValueError, match="None"):
        Play(None)  # type: ignore[arg-type]
    assert Play("n").run([1, 2, 3, 4], 2) == [2, 3, 4]
    assert Play("n", "replay").run([1, 2, 3, 4], 2) == [1, 2]
