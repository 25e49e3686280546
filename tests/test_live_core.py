"""The live site's core: it runs without torch, numpy, matplotlib or ipywidgets, it shows what
the notebook's explorers show, and it grades with the notebook's own checks and messages.

The browser itself is tested in tests/browser/test_live_site.py; here the same Python runs in
CPython, once in a child process where those packages cannot be imported (as in Pyodide).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pagedlab.exercises import EXERCISES, solution
from pagedlab.explorers.allocation import AllocationExplorer
from pagedlab.explorers.scheduler import SchedulerExplorer, explorer_state
from pagedlab.explorers.sharing import PrefixCacheExplorer, SharingExplorer
from pagedlab.explorers.site import live, markup
from pagedlab.explorers.views.controls import Choice, Slider
from pagedlab.explorers.views.scheduler import scheduler_view
from pagedlab.pictures.control_scenes import example_table
from pagedlab.pictures.drawing import Arrow, Box, Drawing, Label, Rect
from pagedlab.pictures.scheduler import scheduler_drawing
from pagedlab.pictures.svg import PT, to_svg

REPO = Path(__file__).resolve().parents[1]
ABSENT = ("torch", "numpy", "matplotlib", "ipywidgets", "PIL", "IPython", "triton")

# A child Python in which ABSENT packages are not installed, as far as imports can tell.
WITHOUT = textwrap.dedent(
    f"""
    import importlib.abc, importlib.util, json, sys
    ABSENT = {ABSENT!r}
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ABSENT:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
    real = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: (
        None if name.split(".")[0] in ABSENT else real(name, package))
    sys.meta_path.insert(0, Absent())
    """
)


def _without_heavy_packages(code: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT + textwrap.dedent(code)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pure() -> dict:
    """What the live core does in a Python without torch, numpy, matplotlib or ipywidgets."""
    return _without_heavy_packages(
        """
        import pagedlab.explorers.site.live as live
        from pagedlab.exercises import EXERCISES, solution, stub
        names = live.exercise_names()
        graded = {}
        for name in names:
            fn = EXERCISES[name].solution
            code = f"from {fn.__module__} import *\\n\\n" + solution(name)
            right, starter = live.grade(name, code), live.grade(name, stub(name))
            graded[name] = [right["status"], starter["status"]]
        alloc = live.render("AllocationExplorer", {"block_size": "3", "length": "11"})
        others = {
            name: live.render(name, settings)["ok"]
            for name, settings in (
                ("SharingExplorer", {"mode": "beam search", "width": "3", "prompt_len": "7",
                                     "steps": "4"}),
                ("PrefixCacheExplorer", {"shared": "8", "prompt_len": "10", "requests": "3",
                                         "block_size": "4"}),
                ("SchedulerExplorer", {"mode": "swap", "block_size": "4", "token_budget": "16",
                                       "chunked_prefill": True, "step": "12"}),
            )
        }
        loaded = sorted({m.split(".")[0] for m in sys.modules} & set(ABSENT))
        print(json.dumps({"names": names, "graded": graded, "alloc": alloc, "others": others,
                          "loaded": loaded}))
        """
    )


def test_the_core_imports_and_runs_with_no_heavy_package(pure) -> None:
    assert pure["loaded"] == []
    assert pure["others"] == {
        "SharingExplorer": True, "PrefixCacheExplorer": True, "SchedulerExplorer": True
    }  # fmt: skip


def test_every_exercise_without_torch_is_gradable_in_the_page(pure) -> None:
    names = pure["names"]
    assert len(names) >= 13
    assert set(names) <= set(EXERCISES)
    assert [n for n in EXERCISES if n in names] == names  # the notebooks' order
    for name, (right, starter) in pure["graded"].items():
        assert right == "passed", name  # the reference solution passes the notebook's check
        assert starter == "not done", name  # the notebook's own starter cell is "not done"


def test_allocation_in_the_page_is_the_real_allocators(pure) -> None:
    readout = pure["alloc"]["readout"]
    table = example_table(3, 11).table  # the notebook's model, in this Python
    assert len(table.blocks) == 4
    assert f"blocks 4, physical {table.blocks}" in readout
    here = live.render_view("AllocationExplorer", {"block_size": 3, "length": 11})
    assert pure["alloc"]["svg"] == to_svg(here.picture, title="AllocationExplorer")


@pytest.mark.parametrize(
    ("explorer", "settings"),
    [
        (AllocationExplorer, {"block_size": 3, "length": 11}),
        (AllocationExplorer, {"block_size": 1, "length": 40, "layout": "shuffled"}),
        (SharingExplorer, {"mode": "beam search", "width": 3, "steps": 5}),
        (PrefixCacheExplorer, {"shared": 4, "requests": 5, "block_size": 2}),
    ],
)
def test_live_views_draw_what_the_notebook_explorer_draws(explorer, settings) -> None:
    widget = explorer()
    widget.set(**settings)
    name = explorer.__name__
    shown = live.render_view(name, {n: c.value for n, c in widget.controls.items()})
    assert shown.picture == widget.canvas.drawing
    rendered = live.render(name, {n: str(c.value) for n, c in widget.controls.items()})
    assert rendered["ok"] and rendered["svg"] == to_svg(shown.picture, title=name)


@pytest.mark.parametrize("setting", [("swap", 4, 16, True, 12), ("recompute", 2, 8, False, 30)])
def test_live_scheduler_makes_the_notebooks_block_decisions(setting) -> None:
    """No K/V store in the page, and still the same blocks, queues and counters every step."""
    state = explorer_state(*setting)
    shown = scheduler_view(*setting)
    assert shown.picture == scheduler_drawing(state.scheduler, state.result)
    assert shown.state.preemptions == state.scheduler.preemptions


def test_refused_settings_say_why_and_draw_nothing() -> None:
    bad = live.render("AllocationExplorer", {"block_size": "0", "length": "5"})
    assert not bad["ok"] and "block_size" in bad["readout"] and "0" in bad["readout"]
    assert bad["svg"] == ""
    colour = live.render("SharingExplorer", {"colour": 1})["readout"]
    assert "unknown controls [&#x27;colour&#x27;]" in colour
    assert (
        "no live explorer &#x27;KernelExplorer&#x27;"
        in live.render("KernelExplorer", {})["readout"]
    )
    full = live.render("AllocationExplorer", {"block_size": "1", "length": "40"})
    assert full["ok"] and "OutOfBlocksError" in full["readout"]  # the pool holds 32: no error


def test_grading_is_the_notebooks_check_with_its_message() -> None:
    wrong = (
        "def my_slot_mapping(blocks, num_tokens, block_size):\n    return list(range(num_tokens))\n"
    )
    namespace: dict = {}
    exec(wrong, namespace)
    expected = EXERCISES["slot_mapping"].check(namespace["my_slot_mapping"])
    got = live.grade("slot_mapping", wrong)
    assert got == {"status": "failed", "message": expected.message}
    assert got["message"].startswith("✗ slot_mapping: case 1") and "hint:" in got["message"]
    right = live.grade("slot_mapping", solution("slot_mapping"))
    assert right["status"] == "passed" and right["message"].startswith("✓ slot_mapping")


def test_code_that_does_not_run_is_a_cross_with_the_error() -> None:
    syntax = live.grade("slot", "def my_slot(:\n")
    assert syntax["status"] == "failed" and "SyntaxError" in syntax["message"]
    raised = live.grade("slot", "raise KeyError('x')")
    assert (
        raised["message"].startswith("✗ slot: the code did not run")
        and "KeyError" in raised["message"]
    )
    nothing = live.grade("slot", "x = 1")
    assert "defines no function" in nothing["message"]
    assert "not gradable" in live.grade("no_such_exercise", "")["message"]


def test_the_learners_function_is_my_name_else_the_last_defined() -> None:
    code = "def helper(x):\n    return x\n\ndef answer(pos, blocks, block_size):\n    return 0\n"
    namespace: dict = {"__name__": "__learner__"}
    exec(code, namespace)
    keys = [k for k in namespace if k not in ("__name__", "__builtins__")]
    assert live.learner_function("slot", namespace, keys) is namespace["answer"]
    namespace["my_slot"] = namespace["helper"]
    assert live.learner_function("slot", namespace, keys) is namespace["helper"]


def test_svg_has_every_shape_of_the_drawing_flipped_and_escaped() -> None:
    d = Drawing(size=(2.0, 1.0))
    d.rects.append(Rect(Box(0.5, 0.25, 1.0, 0.5), "#ff0000", "#000000", "free-block", "pool"))
    d.labels.append(Label(1.0, 0.5, "a<b & c", 7.0, ha="left"))
    d.arrows.append(Arrow((0.0, 0.0), (1.0, 1.0), "#00ff00", 0, 1))
    svg = to_svg(d, title="t")
    assert svg.startswith("<svg") and 'viewBox="0 0 144 72"' in svg
    # y flipped: bottom 0.25 in, height 0.5 in -> top edge 0.25 in below the top (18 pt)
    assert f'<rect x="{0.5 * PT:g}" y="18" width="72" height="36"' in svg
    assert "a&lt;b &amp; c" in svg and 'text-anchor="start"' in svg
    assert svg.count("<polyline") == 1 and svg.count("<polygon") == 1
    assert len(re.findall(r'data-kind="free-block"', svg)) == 1


def test_live_markup_keeps_the_outside_contract() -> None:
    widget = AllocationExplorer(block_size=4, length=5)
    panel = markup.explorer_panel(widget)
    assert 'data-explorer="AllocationExplorer"' in panel and "data-readout" in panel
    for name in ("block_size", "length", "layout"):
        assert len(re.findall(f'<input[^>]*data-control="{name}"', panel)) == 1
    assert "blocks 2, physical [4, 1]" in panel  # the first readout, written at build time
    assert not re.search(r'data-control="length"[^>]*max=', panel)  # any length
    block = markup.exercise_block("slot")
    for attribute in ('textarea data-exercise="slot"', 'data-check="slot"', 'data-result="slot"'):
        assert attribute in block
    assert "def my_slot(" in block  # the notebook's starter cell, escaped into the textarea
    assert markup.explorer_panel(object()) == ""


LIVE = {
    "AllocationExplorer": AllocationExplorer,
    "SharingExplorer": SharingExplorer,
    "PrefixCacheExplorer": PrefixCacheExplorer,
    "SchedulerExplorer": SchedulerExplorer,
}


@pytest.mark.parametrize("name", list(LIVE))
def test_live_inputs_are_the_explorers_declared_controls(name: str) -> None:
    """live.EXPLORERS takes the explorer's own declarations; the page writes them as inputs."""
    controls = live.EXPLORERS[name].declaration.controls
    explorer = LIVE[name]()
    assert controls is LIVE[name].CONTROLS
    assert [c.name for c in controls] == list(explorer.controls)
    panel = markup.explorer_panel(explorer)
    for c in controls:
        found = rf'<label>([^<]*) (<input[^>]*data-control="{c.name}"[^>]*>)'
        ((description, field),) = re.findall(found, panel)
        assert description == html.escape(c.description), c
        if isinstance(c, Slider):
            assert f'min="{c.min}"' in field and f'value="{explorer.values[c.name]}"' in field
            assert (f'max="{c.max}"' in field) != c.unbounded and field.count("max=") <= 1
        elif isinstance(c, Choice):
            listed = re.findall(r'list="([^"]+)"', field)[0]
            (options,) = re.findall(f'<datalist id="{listed}">(.*?)</datalist>', panel)
            assert re.findall(r'value="([^"]*)"', options) == [str(o) for o in c.options]
        else:
            assert 'type="checkbox"' in field


def test_each_exercise_is_live_once_per_page_under_its_first_check() -> None:
    printer = markup.check_result_printer()
    first = EXERCISES["slot"].check(lambda pos, blocks, block_size: None)
    again = EXERCISES["slot"].check(lambda pos, blocks, block_size: (0, 0))
    assert 'data-exercise="slot"' in printer(first)
    assert printer(again) == again._repr_html_()  # the result alone the second time
    assert 'data-exercise="slot"' in markup.check_result_printer()(again)  # a new page


def test_simulate_names_load_on_first_use_and_are_the_modules_own() -> None:
    import pagedlab.simulate as simulate
    from pagedlab.simulate import engine, policies, reservation

    for name in simulate.__all__:
        assert getattr(simulate, name) is not None, name
    assert simulate.simulate is engine.simulate
    assert simulate.OneRequest is policies.OneRequest is reservation.OneRequest
    assert simulate.reserved_slots is reservation.reserved_slots
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = simulate.nothing  # type: ignore[attr-defined]


def test_the_pages_play_is_the_declared_play_over_the_controls_values() -> None:
    """live.play runs the same declared Play (axis, mode) as the widget and the frames."""
    grow = live.play("AllocationExplorer", {"block_size": "4", "length": "5"})
    assert grow == {"ok": True, "axis": "length", "values": [1, 2, 3, 4, 5], "interval_ms": 700}
    far = live.play("AllocationExplorer", {"length": "70"})  # the page's length has no max
    assert far["ok"] and far["values"] == list(range(1, 71))
    steps = live.play("SchedulerExplorer", {"step": "57"})  # step mode: on to the last
    assert steps["values"] == [57, 58, 59, 60]
    for name, entry in live.EXPLORERS.items():
        declared = entry.declaration.play
        assert declared is not None, name  # every live explorer declares one
        panel = markup.explorer_panel(
            {"AllocationExplorer": AllocationExplorer, "SchedulerExplorer": SchedulerExplorer,
             "SharingExplorer": SharingExplorer, "PrefixCacheExplorer": PrefixCacheExplorer}[name]()
        )  # fmt: skip
        assert f'data-play="{declared.axis}" data-play-mode="{declared.mode}"' in panel
    bad = live.play("AllocationExplorer", {"length": "0"})
    assert not bad["ok"] and "length" in bad["readout"] and "0" in bad["readout"]
    assert not live.play("KernelExplorer", {})["ok"]
