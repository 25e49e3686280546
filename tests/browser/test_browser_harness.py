"""The harness itself, on notebooks generated here (never committed to notebooks/).

A probe notebook follows the explorer contract with plain ipywidgets (IntSliders, an HTML
readout, a PNG Image, layout ToggleButtons, a Play), so every check the real notebooks get is
shown to pass on a notebook known to be right. A broken notebook shows the checks fail.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from .checks import (
    check_layouts_keep_output,
    check_length_step,
    check_one_picture_each,
    check_play_steps_by_one,
    check_runs_clean,
)
from .conftest import NotebookPages
from .jlab import LabServer, problems

PROBE = """\
import io
import ipywidgets as w
from PIL import Image, ImageDraw

LAYOUTS = {"ascending": list(range(8)), "example [4, 1, …]": [4, 1, 6, 3, 0, 7, 2, 5],
           "shuffled": [2, 7, 5, 0, 3, 6, 1, 4]}
block = w.IntSlider(value=4, min=1, max=8, description="block size")
length = w.IntSlider(value=4, min=1, max=12, description="length")
layout = w.ToggleButtons(options=list(LAYOUTS), value="example [4, 1, …]", description="layout")
play = w.Play(value=4, min=1, max=12, interval=250, description="play")
w.jslink((play, "value"), (length, "value"))
readout = w.HTML().add_class("pagedlab-readout")
picture = w.Image(format="png").add_class("pagedlab-picture")

def png(physical, tokens, size):
    image = Image.new("RGB", (40 * 8 + 10, 50), "white")
    draw = ImageDraw.Draw(image)
    for logical, block_id in enumerate(physical):
        used = min(size, tokens - logical * size)
        draw.rectangle([5 + 40 * block_id, 5, 35 + 40 * block_id, 45], outline="black",
                       fill=(60, 120, 200 - 20 * used))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()

def update(_=None):
    n, size = length.value, block.value
    physical = LAYOUTS[layout.value][: -(-n // size)]
    mean = sum(range(1, n + 1)) / n
    readout.value = (f"blocks {len(physical)}, physical {physical}, "
                     f"output {mean:.3f} = (L+1)/2 = {(n + 1) / 2:.3f} ✓")
    picture.value = png(physical, n, size)

for control in (block, length, layout):
    control.observe(update, names="value")
update()
w.VBox([w.HBox([block, length, layout, play]), readout, picture])
"""

# A cell showing a widget and, beside it, its picture again as a plain PNG output: the
# "two pictures" mistake check_one_picture_each must catch.
TWICE = """\
import io
import ipywidgets as w
from IPython.display import Image, display
from PIL import Image as PILImage

buffer = io.BytesIO()
PILImage.new("RGB", (40, 20), "orange").save(buffer, format="PNG")
picture = w.Image(value=buffer.getvalue(), format="png").add_class("pagedlab-picture")
display(w.VBox([w.IntSlider(description="length"), picture]))
Image(buffer.getvalue())
"""

BROKEN = ['print("before")', 'raise ValueError("boom from the probe")', 'print("never")']


def _write(path: Path, sources: list[str]) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    notebook.cells = [nbformat.v4.new_markdown_cell("# probe")]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def probe(lab: LabServer) -> str:
    _write(lab.root / "probe" / "probe_explorer.ipynb", [PROBE])
    _write(lab.root / "probe" / "probe_broken.ipynb", BROKEN)
    _write(lab.root / "probe" / "probe_twice.ipynb", [TWICE])
    return "probe/probe_explorer.ipynb"


@pytest.mark.browser
def test_probe_runs_clean(notebooks: NotebookPages, probe: str) -> None:
    check_runs_clean(notebooks.open(probe))


@pytest.mark.browser
def test_probe_length_4_to_5(notebooks: NotebookPages, probe: str) -> None:
    check_length_step(notebooks.open(probe))


@pytest.mark.browser
def test_probe_layout_change_keeps_output(notebooks: NotebookPages, probe: str) -> None:
    check_layouts_keep_output(notebooks.open(probe))


@pytest.mark.browser
def test_probe_play_advances_one_token(notebooks: NotebookPages, probe: str) -> None:
    check_play_steps_by_one(notebooks.open(probe))


@pytest.mark.browser
def test_broken_notebook_is_reported(notebooks: NotebookPages, probe: str) -> None:
    notebook = notebooks.open("probe/probe_broken.ipynb")
    found = problems(notebook.page)
    assert any("ValueError" in item and "boom from the probe" in item for item in found), found
    assert any("never ran" in item and "[2]" in item for item in found), found
    with pytest.raises(AssertionError, match="boom from the probe"):
        check_runs_clean(notebook)


@pytest.mark.browser
def test_picture_shown_twice_is_reported(notebooks: NotebookPages, probe: str) -> None:
    notebook = notebooks.open("probe/probe_twice.ipynb")
    with pytest.raises(AssertionError, match="1 PNG output"):
        check_one_picture_each(notebook)
