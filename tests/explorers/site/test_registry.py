"""The registry, the widget classes and the live page agree: one declaration per explorer.

Every ``Explorer`` subclass in ``pagedlab.explorers`` has exactly one registry entry (naming
the module that defines it); the static site draws each over its class's declared frames and
Play; the live page runs exactly the entries with a live half, from the class's own
declaration (the very object), and writes one input per declared control.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import random
import re

import ipywidgets as widgets
import pytest

import pagedlab.explorers
from pagedlab.explorers.base import Explorer
from pagedlab.explorers.site import live, markup, static
from pagedlab.explorers.site.registry import REGISTRY, Entry
from pagedlab.ground.checks import Refused


def _explorer_classes() -> dict[str, type[Explorer]]:
    """Every Explorer subclass defined in a module of pagedlab.explorers, by class name."""
    found: dict[str, type[Explorer]] = {}
    for module in pkgutil.iter_modules(pagedlab.explorers.__path__):
        loaded = importlib.import_module(f"pagedlab.explorers.{module.name}")
        for value in vars(loaded).values():
            if (isinstance(value, type) and issubclass(value, Explorer) and value is not Explorer
                    and value.__module__ == loaded.__name__):  # fmt: skip
                found[value.__name__] = value
    return found


CLASSES = _explorer_classes()


def _class(entry: Entry) -> type[Explorer]:
    return getattr(importlib.import_module(f"pagedlab.explorers.{entry.module}"), entry.name)


def test_every_explorer_class_has_one_entry_naming_its_module() -> None:
    names = [entry.name for entry in REGISTRY]
    assert len(names) == len(set(names)), names
    assert set(names) == set(CLASSES)
    for entry in REGISTRY:
        assert _class(entry) is CLASSES[entry.name], entry


@pytest.mark.parametrize("entry", REGISTRY, ids=[e.name for e in REGISTRY])
def test_each_class_is_declared_once_and_the_site_reads_that_declaration(entry: Entry) -> None:
    cls = CLASSES[entry.name]
    declared = cls.DECLARATION
    assert declared is not None and declared.name == entry.name
    assert cls.CONTROLS is declared.controls  # the widget's controls
    assert declared.frames  # the static site draws every explorer
    assert static.declared_axes(cls) == (declared.frames, declared.play)
    if entry.live is None:
        assert entry.name not in live.EXPLORERS
    else:
        assert entry.live.declaration is declared  # the class's own object, not a copy
        assert live.EXPLORERS[entry.name] is entry.live


def test_the_live_page_runs_exactly_the_live_entries() -> None:
    assert list(live.EXPLORERS) == [e.name for e in REGISTRY if e.live is not None]
    assert set(live.EXPLORERS) == {
        "AllocationExplorer", "SharingExplorer", "PrefixCacheExplorer", "SchedulerExplorer"
    }  # fmt: skip


@pytest.mark.parametrize("name", list(live.EXPLORERS))
def test_each_live_panel_writes_the_declared_controls(name: str) -> None:
    explorer = CLASSES[name]()
    panel = markup.explorer_panel(explorer)
    assert f'data-explorer="{name}"' in panel and "data-readout" in panel
    for control in live.EXPLORERS[name].declaration.controls:
        assert len(re.findall(f'<input[^>]*data-control="{control.name}"', panel)) == 1
    assert live.render(name, explorer.values)["ok"]  # the widget's values render live


SWEEP = 12  # settings per explorer: its controls' first values, last values, then seeded draws


@pytest.mark.parametrize("entry", REGISTRY, ids=[e.name for e in REGISTRY])
def test_a_learners_move_raises_nothing_but_a_refusal(entry: Entry) -> None:
    """The base catches only :class:`Refused` on a learner's move (anything else is a bug it
    must not hide): no reachable setting (clamped as a browser move is) raises anything else."""
    from tests.explorers.test_explorers import FACTORIES

    explorer = FACTORIES.get(entry.name, CLASSES[entry.name])()
    rng = random.Random(entry.name)
    for i in range(SWEEP):
        values = {}
        for name, widget in explorer.controls.items():
            if isinstance(widget, widgets.IntSlider):
                choices: list[object] = list(range(widget.min, widget.max + 1, widget.step))
            elif isinstance(widget, widgets.Checkbox):
                choices = [False, True]
            else:
                choices = list(widget.options)
            values[name] = choices[0] if i == 0 else choices[-1] if i == 1 else rng.choice(choices)
        values = explorer._clamped(values)
        with contextlib.suppress(Refused):  # a refusal: explained in the readout
            explorer.finish(explorer.render(**values))
