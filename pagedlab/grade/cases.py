"""What an exercise is made of: its cases (each with why it exists), the secret salt of
held-back cases, the comparison, and the result a check returns.

Invariants
    * Every fixed case carries ``why``, one line saying what it exists to catch, shown when it
      fails; a :class:`Mistake` is named only on a case that lists it in ``catches``.
    * Each case's expected answer comes from the real pagedlab implementation (``expect``),
      never from the reference solution: a solution that drifts from pagedlab fails.
    * Cases are the same on every run (fixed ones, then ones drawn from a seeded
      ``random.Random``), so a saved notebook output is deterministic; under :func:`held_back`
      (``python -m pagedlab.grade``) the generated cases and seeded data come from a secret salt.
"""

from __future__ import annotations

import hashlib
import html
import math
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

PASSED, FAILED, TODO = "passed", "failed", "not done"
_SALT: list[str] = []  # while grading held back (python -m pagedlab.grade): the secret salt


def seed_of(seed: int) -> int:
    """The seed generated cases and seeded tensors use: ``seed`` in a notebook; under
    :func:`held_back`, one derived from ``seed`` and the salt."""
    if not _SALT:
        return seed
    digest = hashlib.sha256(f"{seed}:{_SALT[-1]}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def per_salt(build: Callable[[], list[Case]]) -> Callable[[], list[Case]]:
    """``build``, run once per salt (the innermost :func:`held_back`'s, "" outside): cases
    slow to build (an engine)."""
    made: dict[str, list[Case]] = {}

    def get() -> list[Case]:
        salt = _SALT[-1] if _SALT else ""
        return list(made.get(salt) or made.setdefault(salt, build()))

    return get


@contextmanager
def held_back(salt: str) -> Iterator[None]:
    """Inside: every case builder draws its generated cases from ``salt`` as well."""
    if not isinstance(salt, str) or not salt:
        raise ValueError(f"held_back needs a non-empty str salt, got {salt!r}")
    _SALT.append(salt)
    try:
        yield
    finally:
        _SALT.pop()


@dataclass(frozen=True)
class Case:
    """One call of the learner's function, the answer pagedlab gives for it, and why it exists."""

    args: tuple[Any, ...]
    expected: Any
    label: str = ""  # the inputs in words; built from the parameter names when empty
    kind: str = "fixed"  # "fixed" (chosen by hand) or "generated" (seeded random)
    why: str = ""  # one line: what this case exists to catch (shown when it fails)
    catches: tuple[str, ...] = ()  # keys of the mistakes this case's purpose determines


@dataclass(frozen=True)
class Mistake:
    """A common wrong implementation: on a case whose ``catches`` holds ``key``, when the
    learner's answer equals ``answer(*args)`` (and not the expected one), ``hint`` names it."""

    hint: str
    answer: Callable[..., Any]
    key: str = ""


@dataclass(frozen=True)
class CheckResult:
    """What ``check`` found: passed, failed on a named case, or not done yet."""

    exercise: str
    status: str  # PASSED | FAILED | TODO
    message: str
    cases_passed: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.message)

    def _repr_html_(self) -> str:
        color = {PASSED: "#1a7f37", FAILED: "#b42318", TODO: "#6b7280"}[self.status]
        return (
            f'<pre style="border-left: 4px solid {color}; padding: 4px 8px; '
            f'white-space: pre-wrap">{html.escape(self.message)}</pre>'
        )


def short(value: Any, limit: int = 300) -> str:
    """A readable, bounded repr: tensors by shape, dtype and (a few) values."""
    try:
        torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
        if torch is not None and isinstance(value, torch.Tensor):
            values = value.detach().flatten()[:12].tolist()
            rounded = [round(v, 4) if isinstance(v, float) else v for v in values]
            more = ", ..." if value.numel() > 12 else ""
            body = ", ".join(map(str, rounded)) + more
            return f"tensor of shape {list(value.shape)}, {value.dtype}: [{body}]"
        text = repr(value)
    except BaseException as error:  # a learner's object whose repr raises
        return f"<{type(value).__name__} whose repr raised {type(error).__name__}>"
    return text if len(text) <= limit else text[: limit - 5] + " ...]"


def equal(expected: Any, got: Any) -> bool:
    """Equal plain values of the same type (a bool is not an int, a list not a tuple); floats
    within a relative 1e-4 (NaN never matches)."""
    if isinstance(expected, (list, tuple)):
        return type(got) is type(expected) and len(got) == len(expected) and all(
            equal(e, g) for e, g in zip(expected, got, strict=True))  # fmt: skip
    if type(expected) is float and type(got) is float:
        return math.isclose(expected, got, rel_tol=1e-4, abs_tol=1e-6)  # inf: only itself
    return type(got) is type(expected) and bool(expected == got)


RESULTS: dict[str, bool] = {}  # exercise name -> passed, for the checks run in this process

Spec = tuple[Any, ...]  # a fixed case: (*args, why) or (*args, why, catches)


def cases(fixed: Sequence[Spec], generate: Callable[[random.Random], Sequence[Any]] | None = None,
          count: int = 0, seed: int = 0, *, expect: Callable[..., Any],
          label: Callable[..., str] | None = None,
          given: Callable[..., tuple[Any, ...]] | None = None) -> list[Case]:  # fmt: skip
    """The fixed cases (each with its ``why``, and the mistakes it ``catches``), then ``count``
    cases ``generate(rng)`` draws from ``random.Random(seed_of(seed))``. Each expected answer is
    ``expect(*spec)``; the learner's function is called on ``given(*spec)`` (None: the spec)."""
    specs: list[tuple[tuple[Any, ...], str, str, tuple[str, ...]]] = []
    for spec in fixed:
        *args, why, catches = spec if isinstance(spec[-1], tuple) else (*spec, ())
        if not isinstance(why, str) or not why:
            raise ValueError(f"a fixed case needs a one-line why, got {spec!r}")
        specs.append((tuple(args), "fixed", why, tuple(catches)))
    rng = random.Random(seed_of(seed))
    for _ in range(count if generate is not None else 0):
        specs.append((tuple(generate(rng)), "generated", "", ()))  # type: ignore[misc]
    return [
        Case(given(*args) if given else args, expect(*args), label(*args) if label else "",
             kind, why, catches)
        for args, kind, why, catches in specs
    ]  # fmt: skip


def with_article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def results() -> dict[str, bool]:
    """Exercise name -> passed, for every check run in this kernel (latest run wins)."""
    return dict(RESULTS)


def forget_results() -> None:
    """Clear the record of checks run (tests start each from nothing)."""
    RESULTS.clear()
