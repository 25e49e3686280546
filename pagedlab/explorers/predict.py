"""Predict, then reveal: a small widget that asks for the learner's guess before showing a result.

Until "Check my prediction" or "Just show me" is pressed the answer is not on the page.
Answers are one int ("4", not "block 4"), a list of ints ("2, 1, 1" or "[2 1 1]") or one of
``choices``. Invariants: a callback changes only this widget's ``feedback.value`` (no
printing, so nbval sees the same outputs), never raises (an unreadable guess asks again) and
touches no pagedlab state.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

ASK = "Type your prediction, then check it."
_INT = re.compile(r"[+-]?[0-9]+")
_INT_LIST = re.compile(r"\[?\s*[+-]?[0-9]+(?:\s*[,\s]\s*[+-]?[0-9]+)*\s*\]?")


def _validate(question: Any, answer: Any, explain: Any, choices: Any) -> None:
    """Refuse what no guess could match or no learner could read (TypeError/ValueError)."""
    if not isinstance(question, str) or not question.strip():
        raise TypeError(f"question must be a non-empty str, got {question!r}")
    if not isinstance(explain, str):
        raise TypeError(f"explain must be a str, got {explain!r}")
    if choices is not None:
        if isinstance(choices, str) or not isinstance(choices, Sequence):
            raise TypeError(f"choices must be a list of str, got {choices!r}")
        if answer not in choices:
            raise ValueError(f"answer {answer!r} is not one of the choices {list(choices)!r}")
        if len(choices) < 2 or not all(isinstance(c, str) and c.strip() for c in choices):
            raise ValueError(f"choices must be two or more non-empty str, got {list(choices)!r}")
        if len(set(choices)) != len(choices):
            raise ValueError(f"choices must differ from one another, got {list(choices)!r}")
        return
    numbers = answer if isinstance(answer, list) and answer else [answer]
    if all(type(n) is int for n in numbers):  # an int, or a non-empty list of ints (no bool)
        return
    if isinstance(answer, str):
        raise ValueError(f"a str answer {answer!r} needs choices (a guess typed freely never "
                         "matches a sentence exactly)")  # fmt: skip
    raise TypeError(
        f"answer must be an int, a non-empty list of int or one of choices, got {answer!r}"
    )


class Predict(widgets.VBox):
    """A question, an entry for the guess, and a reveal that says ✓ or ✗."""

    def __init__(
        self,
        question: str,
        answer: int | list[int] | str,
        explain: str = "",
        choices: Sequence[str] | None = None,
    ) -> None:
        _validate(question, answer, explain, choices)
        self.answer = answer
        self.explain = explain
        self.entry: widgets.ValueWidget
        layout = widgets.Layout(width="16em")
        if choices is not None:
            options = [("choose ...", "")] + [(c, c) for c in choices]
            self.entry = widgets.Dropdown(options=options, value="", layout=layout)
        else:
            self.entry = widgets.Text(value="", placeholder="your prediction", layout=layout)
        fit = widgets.Layout(width="auto")  # the whole label, never cut short
        self.check_button = widgets.Button(
            description="Check my prediction", button_style="info", layout=fit
        )
        self.show_button = widgets.Button(description="Just show me", layout=fit)
        self.feedback = widgets.HTML(value="")
        self.check_button.on_click(lambda _: self._safely(self.reveal_guess))
        self.show_button.on_click(lambda _: self._safely(self.show))
        prompt = widgets.HTML(value=f"<b>Predict:</b> {html.escape(question)}")
        row = widgets.HBox([self.entry, self.check_button, self.show_button])
        super().__init__([prompt, row, self.feedback])

    # --- reading a guess -------------------------------------------------------------------
    def parse(self, guess: str) -> int | list[int] | str | None:
        """The guess in the answer's type, or None if it cannot be read as one."""
        text = str(guess).strip()
        if not text:
            return None
        if isinstance(self.answer, str):
            return text
        if isinstance(self.answer, list):
            return [int(n) for n in _INT.findall(text)] if _INT_LIST.fullmatch(text) else None
        return int(text) if _INT.fullmatch(text) else None

    def verdict(self, guess: str) -> bool | None:
        """True / False for a readable guess, None for one that cannot be read."""
        value = self.parse(guess)
        if value is None:
            return None
        return type(value) is type(self.answer) and value == self.answer  # a choice: exactly

    # --- callbacks: only feedback.value changes --------------------------------------------
    def reveal_guess(self) -> None:
        right = self.verdict(str(self.entry.value))
        if right is None:
            kind = "a choice" if isinstance(self.answer, str) else "a number"
            if isinstance(self.answer, list):
                kind = "numbers (e.g. 2, 1)"
            self.feedback.value = f"<i>{html.escape(ASK)} (expected {kind})</i>"
            return
        mark = "✓ right" if right else f"✗ not quite: you said {html.escape(str(self.entry.value))}"
        self.feedback.value = f"<b>{mark}.</b> {self._answer_text()}"

    def show(self) -> None:
        self.feedback.value = self._answer_text()

    def _answer_text(self) -> str:
        answer = ", ".join(map(str, self.answer)) if isinstance(self.answer, list) else self.answer
        text = f"The answer: <b>{html.escape(str(answer))}</b>."
        return text + (f" {html.escape(self.explain)}" if self.explain else "")

    def _safely(self, action: Any) -> None:
        try:
            action()
        except Exception as error:  # a widget never shows a traceback
            self.feedback.value = f"<i>could not check that: {html.escape(str(error))}</i>"
