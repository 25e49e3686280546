"""The misuse helper itself fails where it should: a wrong error, an unnamed value, a change."""

from __future__ import annotations

import pytest

from tests.refuses import refuses


def _raise(message: str) -> None:
    raise ValueError(message)


def test_refuses_accepts_a_clean_refusal() -> None:
    box = [1]
    error = refuses(
        lambda: _raise("block 7 is free"), naming=7, match="free", state=lambda: list(box)
    )
    assert isinstance(error, ValueError)


def test_refuses_fails_when_nothing_is_raised_the_value_is_unnamed_or_state_changed() -> None:
    box = [1]

    def mutate_then_raise() -> None:
        box.append(2)
        raise ValueError("block 7 is free")

    with pytest.raises(pytest.fail.Exception):
        refuses(lambda: None)
    with pytest.raises(AssertionError, match="does not name"):
        refuses(lambda: _raise("bad block"), naming=7)
    with pytest.raises(AssertionError, match="changed the state"):
        refuses(mutate_then_raise, naming=7, state=lambda: list(box))
    with pytest.raises(TypeError):
        refuses(lambda: (_ for _ in ()).throw(TypeError("x")), ValueError)
