"""One helper for every misuse test: a refused call raises, names the value, changes nothing.

The rule it checks (ARCHITECTURE.md, "Public contract"): bad input gets a ``TypeError`` /
``ValueError`` / ``OutOfBlocksError`` whose message names the offending value, and every
structure the call could reach is left exactly as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest


def refuses(
    call: Callable[[], object],
    error: type[BaseException] | tuple[type[BaseException], ...] = ValueError,
    *,
    naming: object | None = None,
    match: str | None = None,
    state: Callable[[], Any] | None = None,
) -> BaseException:
    """Assert ``call()`` raises ``error``, its message contains ``repr(naming)`` or
    ``str(naming)`` (when given) and matches the regex ``match`` (when given), and ``state()``
    is equal before and after (when given). Returns the exception for further checks."""
    before = state() if state is not None else None
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    if naming is not None:
        assert repr(naming) in message or str(naming) in message, (
            f"the message does not name {naming!r}: {message!r}"
        )
    if match is not None:
        assert re.search(match, message), f"{match!r} not in {message!r}"
    if state is not None:
        assert state() == before, "a refused call changed the state"
    return raised.value
