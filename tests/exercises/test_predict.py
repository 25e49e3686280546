"""The predict-then-reveal widget: unanswered until asked, ✓/✗ after, and harmless."""

from __future__ import annotations

import pytest

from pagedlab.explorers.predict import Predict


def test_starts_unanswered_and_hides_the_answer() -> None:
    widget = Predict("Which physical block does token 5 land in?", 1, "free list [4, 1, 0]")
    assert widget.feedback.value == ""
    assert "1" not in widget.children[0].value.replace("token 5", "")
    assert widget.entry.value == ""


def test_right_and_wrong_guesses() -> None:
    widget = Predict("block?", 1, "because")
    widget.entry.value = "4"
    widget.check_button.click()
    assert widget.feedback.value.startswith("<b>✗ not quite: you said 4.</b>")
    assert "The answer: <b>1</b>. because" in widget.feedback.value
    widget.entry.value = " 1 "
    widget.check_button.click()
    assert widget.feedback.value.startswith("<b>✓ right.</b>")


def test_unreadable_guess_asks_again() -> None:
    widget = Predict("block?", 1)
    for guess in ("", "one", "1 or 4"):
        widget.entry.value = guess
        widget.check_button.click()
        shown = widget.feedback.value
        assert "Type your prediction" in shown and "answer" not in shown


def test_list_answers_and_show() -> None:
    widget = Predict("ref counts of blocks 7, 1 and the copy?", [2, 1, 1])
    assert widget.verdict("2, 1, 1") and widget.verdict("[2 1 1]") and not widget.verdict("2, 2")
    widget.show_button.click()
    assert widget.feedback.value == "The answer: <b>2, 1, 1</b>."


def test_choices() -> None:
    widget = Predict("share?", "under 30 %", choices=["under 30 %", "30-60 %", "over 90 %"])
    widget.entry.value = "over 90 %"
    widget.check_button.click()
    assert "✗" in widget.feedback.value
    widget.entry.value = ""
    widget.check_button.click()
    assert "expected a choice" in widget.feedback.value
    with pytest.raises(ValueError, match="not one of the choices"):
        Predict("share?", "50 %", choices=["under 30 %"])


def test_a_broken_answer_never_raises() -> None:
    widget = Predict("block?", 1)
    widget.answer = object()  # type: ignore[assignment]
    widget.entry.value = "1"
    widget.check_button.click()  # compares, shows, does not raise
    assert "✗" in widget.feedback.value


def test_odd_guesses_are_not_taken_as_right() -> None:
    """Only a plain integer (or integers, for a list) is read: no digits fished out of words."""
    widget = Predict("block?", 1)
    for guess in ("block 1", "1.5", "1e0", "1 or 4", "x1", "1/4"):
        assert widget.verdict(guess) is None, guess
    assert widget.verdict("+1") and widget.verdict(" 1 ") and widget.verdict("-1") is False
    counts = Predict("ref counts?", [2, 1, 1])
    for guess in ("2.1.1", "2, 1, 1,", "counts 2 1 1", "2; 1; 1"):
        assert counts.verdict(guess) is None, guess
    assert counts.verdict("2 1 1") and counts.verdict("[2,1,1]") and not counts.verdict("2, 1")


def test_every_prediction_computes_its_answer_from_the_scene() -> None:
    from pagedlab.explorers.predictions import PREDICTIONS, predict

    answers = {key: make().answer for key, make in PREDICTIONS.items()}
    assert answers == {
        "01": 2038,
        "02": 0,
        "05": [2, 1, 1],
        "06": 2,
        "07": "under 30 %",
        "09": "E",
        "12": 0,
    }
    assert predict("05_sharing").answer == [2, 1, 1]
    with pytest.raises(ValueError, match="no Predict cell for notebook '03'"):
        predict("03")


@pytest.mark.parametrize(
    ("question", "answer", "explain", "choices", "error"),
    [
        (None, 1, "", None, TypeError),
        ("  ", 1, "", None, TypeError),
        ("q?", 1, 3, None, TypeError),
        ("q?", True, "", None, TypeError),
        ("q?", 2.5, "", None, TypeError),
        ("q?", [], "", None, TypeError),
        ("q?", [1, "2"], "", None, TypeError),
        ("q?", "a sentence", "", None, ValueError),
        ("q?", "a", "", "ab", TypeError),
        ("q?", "a", "", ["a"], ValueError),
        ("q?", "a", "", ["a", "a"], ValueError),
        ("q?", "c", "", ["a", "b"], ValueError),
    ],
)
def test_refuses_bad_questions_answers_and_choices(
    question: object, answer: object, explain: object, choices: object, error: type
) -> None:
    with pytest.raises(error):
        Predict(question, answer, explain, choices)  # type: ignore[arg-type]


def test_every_solution_pastes_as_a_cell() -> None:
    """``solution(name)`` compiles as a top-level cell (the ladder's were indented)."""
    from pagedlab.exercises import EXERCISES, solution

    for name in EXERCISES:
        compile(str(solution(name)), f"<solution {name}>", "exec")
