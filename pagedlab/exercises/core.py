"""The one harness every exercise shares: cases, a time budget, and feedback that names the case.

An :class:`Exercise` holds a task, a reference solution and a function that builds its cases.
Each case's expected answer comes from the real pagedlab implementation (the allocator, the
block table, the prefix cache, ``reference_attention`` ...), never from the solution, so a
solution that drifts from pagedlab fails its own tests. ``check(fn)`` runs the learner's
function on every case in order and stops at the first one it gets wrong.

Invariants
    * ``check`` never raises, whatever ``fn`` is or does: not callable, raising any exception
      (``KeyboardInterrupt`` and ``SystemExit`` included), returning a value of the wrong type
      or one that cannot even be compared, or running past the time budget.
    * Cases are the same on every run (fixed cases, then cases generated from a seeded
      ``random.Random``), so a saved notebook output is deterministic.
    * The learner's function gets a deep copy of each case's arguments: it cannot change a
      case, the expected answer or a later case.
    * A function that raises ``NotImplementedError`` or returns ``None`` on the first case is
      "not done yet" (a stub), not wrong.

The time budget and the exception handling live in :mod:`pagedlab.exercises.sandbox`.
"""

from __future__ import annotations

import copy
import html
import math
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pagedlab.exercises.sandbox import Outcome, _in_chain, raised_at, run_limited

PASSED, FAILED, TODO = "passed", "failed", "not done"


@dataclass(frozen=True)
class Case:
    """One call of the learner's function and the answer pagedlab gives for it."""

    args: tuple[Any, ...]
    expected: Any
    label: str = ""  # the inputs in words; built from the parameter names when empty
    kind: str = "fixed"  # "fixed" (chosen by hand) or "generated" (seeded random)


@dataclass(frozen=True)
class Mistake:
    """A common wrong implementation: when the learner's answer equals ``answer(*args)`` (and
    not the expected one), ``hint`` says what went wrong."""

    hint: str
    answer: Callable[..., Any]


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

    def __repr__(self) -> str:
        return self.message

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
    """Equal values of the same kind: a bool is not an int, an int not a float, a list not a
    tuple. numpy and 0-d torch scalars count as the Python number they hold.

    Floats compare with a relative tolerance of 1e-4 (and NaN never matches).
    """
    if isinstance(expected, bool) or _is_bool(got):
        return isinstance(expected, bool) and _is_bool(got) and expected == bool(got)
    if isinstance(expected, float):
        return _is_number(got) and _close(expected, float(got))
    if isinstance(expected, int):
        return _is_integer(got) and expected == int(got)
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(got, type(expected))
            and len(got) == len(expected)
            and all(equal(e, g) for e, g in zip(expected, got, strict=True))
        )
    return bool(expected == got)


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or str(getattr(x, "dtype", "")) in ("bool", "torch.bool")


def _is_integer(x: Any) -> bool:
    if _is_bool(x) or isinstance(x, float):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _is_number(x: Any) -> bool:
    if _is_bool(x) or isinstance(x, (str, bytes)):
        return False
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return getattr(x, "ndim", 0) == 0


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)


def _is_stub_error(error: BaseException) -> bool:
    return _in_chain(error, NotImplementedError) or "NotImplementedError" in short(error, 2000)


def _call_label(name: str, params: Sequence[str], args: Sequence[Any]) -> str:
    parts = [f"{p}={short(a, 120)}" for p, a in zip(params, args, strict=False)]
    return f"{name}({', '.join(parts)})"


_RESULTS: dict[str, bool] = {}  # exercise name -> passed, for the checks run in this process


@dataclass
class Exercise:
    """One graded exercise; see the module docstring for what ``check`` promises."""

    name: str
    notebook: str  # the notebook's file stem, e.g. "01_why_paging"
    task: str
    params: tuple[str, ...]
    returns: str  # the answer's type, in words: "int", "list[int]", "tuple[int, int]"
    cases: Callable[[], list[Case]]
    solution: Callable[..., Any]
    mistakes: Sequence[Mistake] = ()
    hints: Sequence[str] = ()
    budget_s: float = 3.0  # per case
    compare: Callable[[Any, Any], bool] = equal
    diagnose: Callable[[Callable[..., Any], Case], str] | None = None  # extra words on a miss
    adapt: Callable[[Any], Callable[..., Any]] | None = None  # learner's object -> a function
    todo: str = ""  # what "not done yet" asks for, when "write its body" is not enough
    stub_code: str = field(default="", repr=False)  # the notebook's starter cell, if not made
    setup: str = ""  # imports the starter cell begins with (names the task refers to)

    def check(self, fn: Any) -> CheckResult:
        """Run ``fn`` on every case; the first wrong answer ends the check (never raises)."""
        try:
            result = self._check(fn)
        except BaseException as error:  # a bug in a grader must not break a learner's cell
            result = self._result(FAILED, f"the grader itself failed: {short(error)}", 0)
        _RESULTS[self.name] = result.passed
        return result

    def _result(self, status: str, text: str, passed: int) -> CheckResult:
        mark = {PASSED: "✓", FAILED: "✗", TODO: "…"}[status]
        return CheckResult(self.name, status, f"{mark} {self.name}: {text}", passed)

    def _check(self, fn: Any) -> CheckResult:
        fn_name = getattr(fn, "__name__", None) or type(fn).__name__
        if self.adapt is None and not callable(fn):
            return self._result(
                FAILED, f"expected a function, got {short(fn)} ({type(fn).__name__})", 0
            )
        run = fn if self.adapt is None else self.adapt(fn)
        cases = self.cases()
        for number, case in enumerate(cases, start=1):
            outcome = run_limited(run, copy.deepcopy(case.args), self.budget_s)
            if outcome.error is not None and _is_stub_error(outcome.error):
                return self._todo(fn_name)
            first_none = number == 1 and outcome.error is None and not outcome.timed_out
            if first_none and outcome.value is None and case.expected is not None:
                return self._todo(fn_name, returned_none=True)
            verdict = self._verdict(run, case, outcome)
            if verdict is not None:
                where = case.label or _call_label(fn_name, self.params, case.args)
                text = (
                    f"case {number} of {len(cases)} ({case.kind}) is wrong\n"
                    f"  inputs:   {where}\n"
                    f"  expected: {short(case.expected)}\n{verdict}"
                )
                return self._result(FAILED, text, number - 1)
        return self._result(PASSED, f"passed {len(cases)} cases", len(cases))

    def _todo(self, fn_name: str, returned_none: bool = False) -> CheckResult:
        why = "returned None" if returned_none else "raised NotImplementedError"
        todo = self.todo or f"Write its body (its answer: {self.returns})"
        text = f"not done yet: {fn_name} {why}. {todo}, then run this cell again."
        return self._result(TODO, text, 0)

    def _verdict(self, fn: Callable[..., Any], case: Case, outcome: Outcome) -> str | None:
        """None if the answer is right, else the 'got' and 'hint' lines."""
        if outcome.timed_out:
            return (
                f"  got:      no answer within {self.budget_s:g} s (stopped)\n"
                "  hint:     a loop that never ends? Check its condition and that it advances."
            )
        if outcome.error is not None:
            error = f"{type(outcome.error).__name__}: {_error_text(outcome.error)}"
            where = raised_at(outcome.error)
            at = f"\n            at {where}" if where else ""
            return f"  got:      it raised {error}{at}\n  hint:     {self._hint(case, None)}"
        got = outcome.value
        try:
            right = bool(self.compare(case.expected, got))
        except BaseException:
            right = False
        if right:
            return None
        text = f"  got:      {short(got)}\n  hint:     {self._hint(case, got)}"
        if self.diagnose is not None:
            found = run_limited(self.diagnose, (fn, case), 3 * self.budget_s)
            extra = found.value if isinstance(found.value, str) else "(could not narrow it down)"
            if extra:
                text += "\n  where:    " + extra
        return text

    def _hint(self, case: Case, got: Any) -> str:
        if got is not None:
            for mistake in self.mistakes:
                outcome = run_limited(mistake.answer, copy.deepcopy(case.args), self.budget_s)
                try:
                    matches = outcome.error is None and self.compare(outcome.value, got)
                except BaseException:
                    matches = False
                if matches:
                    return mistake.hint
            if not _same_kind(case.expected, got):
                wanted, kind = with_article(self.returns), with_article(type(got).__name__)
                hint = self.hints[0] if self.hints else ""
                return f"the answer should be {wanted}, got {kind}. {hint}".strip()
        elif case.expected is not None and self.hints:
            return self.hints[0]
        return self.hints[0] if self.hints else "compare your steps with the task text."


def _error_text(error: BaseException, limit: int = 200) -> str:
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        return "(its message could not be read)"
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _same_kind(expected: Any, got: Any) -> bool:
    if isinstance(expected, bool) or _is_bool(got):
        return isinstance(expected, bool) and _is_bool(got)
    if isinstance(expected, int):
        return _is_integer(got)
    if isinstance(expected, float):
        return _is_number(got)
    return isinstance(got, type(expected)) or isinstance(expected, type(got))


def with_article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def results() -> dict[str, bool]:
    """Exercise name -> passed, for every check run in this kernel (latest run wins)."""
    return dict(_RESULTS)


def forget_results() -> None:
    """Clear the record of checks run (tests start each from nothing)."""
    _RESULTS.clear()
