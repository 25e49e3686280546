"""A learner's first exercise and a capstone, in JupyterLab in Chromium: wrong, the message,
right, ✓.

Notebook 01 is run top to bottom; then the test types into the `my_blocks_needed` stub as a
learner would (select the cell's text, replace it), runs the stub and its check with
Shift+Enter, and reads the check's output: first the failing case with its hint, then ✓. The
last cell's count then says 1 exercise done.
"""

from __future__ import annotations

import pytest

from .conftest import NOTEBOOKS_DIR, NotebookPages
from .jlab import problems, text, wait_until

NOTEBOOK = "01_why_paging.ipynb"
WRONG = "def my_blocks_needed(num_tokens, block_size):\n    return num_tokens // block_size"
RIGHT = "def my_blocks_needed(num_tokens, block_size):\n    return -(-num_tokens // block_size)"


def _cell(page, code: str):  # type: ignore[no-untyped-def]
    """The code cell whose source contains ``code``."""
    editor = page.locator(".cm-content", has_text=code)  # relative to the cell
    return page.locator(".jp-CodeCell", has=editor).first


def _output(cell) -> str:  # type: ignore[no-untyped-def]
    outputs = cell.locator(".jp-OutputArea-output")
    return text(outputs.first) if outputs.count() else ""


def _type_and_run(page, stub, check, code: str, expect: str) -> str:  # type: ignore[no-untyped-def]
    """Replace the stub's source, run it and its check (Shift+Enter twice), wait for ``expect``."""
    stub.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)  # as pasted: no auto-indent, no auto-closed brackets
    page.keyboard.press("Shift+Enter")  # runs the stub, selects the check cell
    page.keyboard.press("Shift+Enter")  # runs the check
    return wait_until(lambda: expect in _output(check), lambda: _output(check), expect)


@pytest.mark.browser
@pytest.mark.skipif(not (NOTEBOOKS_DIR / NOTEBOOK).exists(), reason=f"{NOTEBOOK} not found")
@pytest.mark.parametrize("name", [NOTEBOOK])  # "name": run beside that notebook's other tests
def test_wrong_answer_then_right_answer(notebooks: NotebookPages, name: str) -> None:
    notebook = notebooks.open(f"notebooks/{name}")
    page = notebook.page
    stub = _cell(page, "def my_blocks_needed")
    check = _cell(page, 'EXERCISES["blocks_needed"].check(my_blocks_needed)')
    tally = _cell(page, 'progress("01")')
    assert "not done yet" in _output(check)
    assert "0 of 4 done" in _output(tally)

    got = _type_and_run(page, stub, check, WRONG, "✗ blocks_needed")
    notebook.shot("exercise-wrong", check)
    for part in ("case 1 of", "num_tokens=5, block_size=4", "expected: 2", "got:      1",
                 "why:      5 tokens in blocks of 4",
                 "the partly filled last block counts"):  # fmt: skip
        assert part in got, f"{part!r} not in {got!r}"

    got = _type_and_run(page, stub, check, RIGHT, "✓ blocks_needed")
    notebook.shot("exercise-right", check)
    assert "passed" in got and "cases" in got

    tally.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    wait_until(lambda: "1 of 4 done" in _output(tally), lambda: _output(tally), "1 of 4 done")
    assert not problems(page), problems(page)
    assert not notebook.page_errors, notebook.page_errors


CAPSTONE_NOTEBOOK = "02_block_table.ipynb"
RIGHT_TABLE_SOURCE = """class MyBlockTable:
    def __init__(self, allocator):
        self.allocator = allocator
        self.blocks = []
        self.num_tokens = 0

    def append_tokens(self, n):
        size = self.allocator.block_size
        while len(self.blocks) * size < self.num_tokens + n:
            self.blocks.append(self.allocator.allocate())
        self.num_tokens += n

    def free(self):
        for block in reversed(self.blocks):
            self.allocator.free(block)
        self.blocks = []
        self.num_tokens = 0
"""
# wrong as a learner first builds it: new blocks for the n tokens, the last block's room unused
WRONG_TABLE_SOURCE = RIGHT_TABLE_SOURCE.replace(
    "        while len(self.blocks) * size < self.num_tokens + n:\n"
    "            self.blocks.append(self.allocator.allocate())\n",
    "        for _ in range(-(-n // size)):\n"
    "            self.blocks.append(self.allocator.allocate())\n",
)


@pytest.mark.browser
@pytest.mark.skipif(
    not (NOTEBOOKS_DIR / CAPSTONE_NOTEBOOK).exists(), reason=f"{CAPSTONE_NOTEBOOK} not found"
)
@pytest.mark.parametrize("name", [CAPSTONE_NOTEBOOK])
def test_a_capstone_built_wrong_then_right(notebooks: NotebookPages, name: str) -> None:
    """Notebook 02's block table: a class that ignores the last block's empty slots is named
    at the first event it gets wrong; the right class passes every replay."""
    notebook = notebooks.open(f"notebooks/{name}")
    page = notebook.page
    stub = _cell(page, "class MyBlockTable")
    check = _cell(page, 'EXERCISES["block_table"].check(MyBlockTable)')
    assert "not done yet" in _output(check)
    got = _type_and_run(page, stub, check, WRONG_TABLE_SOURCE, "✗ block_table")
    notebook.shot("capstone-wrong", check)
    for part in ("why:", "where:", "after event 2 (T0.append_tokens(1)): blocks"):
        assert part in got, f"{part!r} not in {got!r}"
    got = _type_and_run(page, stub, check, RIGHT_TABLE_SOURCE, "✓ block_table")
    notebook.shot("capstone-right", check)
    assert "passed" in got
    assert not problems(page), problems(page)


PREDICT_NOTEBOOK = "05_sharing.ipynb"


@pytest.mark.browser
@pytest.mark.skipif(
    not (NOTEBOOKS_DIR / PREDICT_NOTEBOOK).exists(), reason=f"{PREDICT_NOTEBOOK} not found"
)
@pytest.mark.parametrize("name", [PREDICT_NOTEBOOK])
def test_predict_then_reveal(notebooks: NotebookPages, name: str) -> None:
    notebook = notebooks.open(f"notebooks/{name}")
    page = notebook.page
    widget = page.locator(".widget-vbox", has=page.locator("text=Predict:")).first
    entry = widget.locator("input[type=text]")
    check = widget.get_by_role("button", name="Check my prediction")
    feedback = widget.locator(".widget-html").last
    assert text(feedback).strip() == ""  # unanswered until asked

    for guess, expect in (("2, 2, 1", "✗ not quite"), ("2, 1, 1", "✓ right")):
        entry.fill(guess)
        entry.press("Enter")  # a Text widget sends its value on Enter (continuous_update)
        check.click()
        got = wait_until(lambda e=expect: e in text(feedback), lambda: text(feedback), expect)
        assert "The answer: 2, 1, 1" in got
    notebook.shot("predict-revealed", widget)
    assert not problems(page), problems(page)
