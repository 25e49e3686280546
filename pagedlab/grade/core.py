"""THE judge: the notebook's ``check``, the live page's ``grade()`` and instructor mode
(:mod:`pagedlab.grade.runner`) say every verdict with :meth:`Exercise._verdict`.

Three kinds: :class:`Function` (called on each case's arguments), :class:`Replay` (a class or
step function run through an event trace beside pagedlab's own, :func:`pagedlab.grade.drivers.
replay`; a miss names the first step that differs), :class:`Kernel` (a ``@triton.jit`` kernel
launched in fenced, watched buffers, :mod:`pagedlab.grade.kernel_drivers`).

Invariants
    * ``check`` never raises, whatever ``fn`` is or does (not callable, raising anything,
      ``KeyboardInterrupt`` included, a wrong kind of answer, a lying ``==``, past the budget).
      Where ``os.fork`` exists every case runs in ONE child forked before the cases are built
      (it never holds an expected value), killed whole at the budget; so does the diagnosis.
    * An answer is made a plain value of the expected kind before it is compared
      (:func:`pagedlab.grade.wire.to_plain`): no method of the learner's object decides, and no
      code of it runs here (its name and stub-ness are read off plain function objects only).
    * The learner's function gets a copy of each case's arguments; a miss that the same case,
      run alone in a fresh child, gets right is blamed on state kept from an earlier case.
    * A hint is named only where the case's purpose determines it; hints never give the formula.
    * A body still empty (``...``) or raising ``NotImplementedError`` is "not done yet"; a
      written body that returns ``None`` is asked whether it forgot ``return``.
"""

from __future__ import annotations

import dis
import inspect
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pagedlab.grade.cases import (
    FAILED,
    PASSED,
    RESULTS,
    TODO,
    Case,
    CheckResult,
    Mistake,
    equal,
    short,
    with_article,
)
from pagedlab.grade.drivers import ADAPTERS
from pagedlab.grade.sandbox import ENDED, Worker, run_isolated
from pagedlab.grade.wire import PRINT_LIMIT, Outcome, Raised, WrongKind, printable, to_plain

GENERATED_WHY = "a seeded random case: the fixed cases passed, so try these inputs by hand"
GENERATED_HINT = "work this case out by hand and compare each step with your code."
FIXED_HINT = (
    "the why above says what this case was built to catch: compare your answer with the "
    "expected one, step by step."
)
STATE_HINT = (
    "run alone, in a fresh process, this case gets the right answer: your code keeps "
    "something from an earlier case (a class or module attribute, a default argument, a list "
    "it changes). Each call must start from what it is given."
)


def _call_label(name: str, params: Sequence[str], args: Sequence[Any]) -> str:
    parts = [f"{p}={short(a, 120)}" for p, a in zip(params, args, strict=False)]
    return f"{name}({', '.join(parts)})"


_EMPTY_OPS = {"RESUME", "NOP", "CACHE", "LOAD_CONST", "RETURN_CONST", "RETURN_VALUE", "POP_TOP"}


def body_is_empty(fn: Any) -> bool:
    """True for a function whose body does nothing (``...``, ``pass``, a docstring): a stub."""
    code = fn.__code__ if type(fn) is types.FunctionType else None  # not isinstance: a
    # learner's object can claim any __class__ (and then run code when its attributes are read)
    if code is None:
        return False
    try:
        ops = list(dis.get_instructions(code))
    except BaseException:  # not Python bytecode we can read
        return False
    loads = ("LOAD_CONST", "RETURN_CONST")
    return all(
        op.opname in _EMPTY_OPS and (op.opname not in loads or op.argval is None) for op in ops
    )


@dataclass
class Exercise:
    """One graded exercise, the base of the three kinds."""

    solution: Callable[..., Any]
    notebook: str  # the notebook's file stem, e.g. "01_why_paging"
    task: str
    cases: Callable[[], list[Case]]
    name: str = ""  # "": the solution's own name
    params: tuple[str, ...] = ()  # a case's arguments, named; (): the solution's parameters
    returns: str = ""  # the answer's type in words ("int", "list[int]"); "": the solution's
    mistakes: Sequence[Mistake] = ()
    budget_s: float = 3.0  # per case
    compare: Callable[[Any, Any], bool] = equal
    diagnose: Callable[[Callable[..., Any], Case], str] | None = None  # extra words on a miss
    todo: str = ""  # what "not done yet" asks for, when "write its body" is not enough
    setup: str = ""  # imports the starter cell begins with (names the task refers to)
    stub_code: str = field(default="", repr=False)  # the starter cell, if not made from the task
    entry: str = ""  # the name the starter cell defines, when not my_<name> (a class, a kernel)
    driver: str = ""  # the driver (drivers.ADAPTERS) that runs the learner's object on a case
    isolate: bool = True  # run the calls in a child process where os.fork exists
    convert = True  # an answer is made a plain value like the expected one (not a log, a tensor)

    def __post_init__(self) -> None:
        """``name``, ``params``, ``returns`` left empty: the solution's (its function's)."""
        inner = getattr(self.solution, "fn", self.solution)
        signature = inspect.signature(inner)
        self.name = self.name or inner.__name__
        self.params = self.params or tuple(signature.parameters)
        self.returns = self.returns or str(signature.return_annotation)

    @property
    def adapt(self) -> Callable[[Any], Callable[..., Any]] | None:
        """The learner's object -> a function of a case's arguments (None: a plain call)."""
        return ADAPTERS[self.driver] if self.driver else None

    def where(self, fn: Callable[..., Any], case: Case) -> str:
        """Extra words on a miss (run in a child): where the answer goes wrong."""
        return self.diagnose(fn, case) if self.diagnose is not None else ""

    @property
    def narrows(self) -> bool:
        return self.diagnose is not None

    def check(self, fn: Any) -> CheckResult:
        """Run ``fn`` on every case; the first wrong answer ends the check (never raises)."""
        try:
            result = self._check(fn)
        except BaseException as error:  # a bug in a grader must not break a learner's cell
            result = self._result(FAILED, f"the grader itself failed: {short(error)}", 0)
        RESULTS[self.name] = result.passed
        return result

    def _result(self, status: str, text: str, passed: int) -> CheckResult:
        mark = {PASSED: "✓", FAILED: "✗", TODO: "…"}[status]
        message = printable(f"{mark} {self.name}: {text}")  # a learner's name may hold anything
        return CheckResult(self.name, status, message, passed)

    def answer_of(self, case: Case, outcome: Outcome) -> Outcome:
        """The answer as a plain value of the case's expected kind (when ``convert``)."""
        value = to_plain(outcome.value, case.expected) if self.convert else outcome.value
        return Outcome(value, outcome.raised, outcome.timed_out, outcome.printed)

    def _check(self, fn: Any) -> CheckResult:
        fn_name = _name_of(fn)
        if self.adapt is None and not callable(fn):
            return self._result(
                FAILED, f"expected a function, got {_said(fn)} ({type_name(fn)})", 0
            )
        if self.adapt is not None and body_is_empty(fn):
            return self._todo(fn_name, returned_none=True)
        adapt = self.adapt

        def make() -> Callable[..., Any]:  # runs where the calls run (the child)
            return fn if adapt is None else adapt(fn)

        # Forked before any case exists: the child never holds an expected value.
        with Worker(make, self.isolate) as worker:
            cases = self.cases()
            answers: dict[int, Outcome] = {}
            room = PRINT_LIMIT  # what the learner's code may print in one check, all cases
            for number, case in enumerate(cases, start=1):
                outcome = self.answer_of(case, worker.call(case.args, self.budget_s))
                answers[id(case)] = outcome
                if outcome.printed and room > 0:
                    shown, room = outcome.printed[:room], room - len(outcome.printed)
                    cut = "" if room >= 0 else "\n[... more printed output cut: one check shows "
                    cut += f"{PRINT_LIMIT} characters at most]" if cut else ""
                    print(shown + cut, end="" if (shown + cut).endswith("\n") else "\n")
                if outcome.raised is not None and outcome.raised.stub:
                    return self._todo(fn_name)
                if _returned_none(case, outcome) and body_is_empty(fn):
                    return self._todo(fn_name, returned_none=True)
                if self._verdict(case, outcome) is None:
                    continue
                for later in cases[number:]:  # the hint reads the fixed cases' answers too,
                    if outcome.timed_out or worker.gone is not None:  # until one finds none
                        break
                    if later.kind == "fixed":
                        outcome = self.answer_of(later, worker.call(later.args, self.budget_s))
                        answers[id(later)] = outcome
                worker.close()
                verdict = self._verdict(case, answers[id(case)], cases, answers, make) or ""
                text = self.failure(number, cases, fn_name, verdict)
                return self._result(FAILED, text, number - 1)
        return self._result(PASSED, f"passed {len(cases)} cases", len(cases))

    def _todo(self, fn_name: str, returned_none: bool = False) -> CheckResult:
        why = "returned None" if returned_none else "raised NotImplementedError"
        todo = self.todo or f"Write its body (its answer: {self.returns})"
        text = f"not done yet: {fn_name} {why}. {todo}, then run this cell again."
        return self._result(TODO, text, 0)

    def failure(self, number: int, cases: Sequence[Case], fn_name: str, verdict: str,
                hidden: bool = False) -> str:  # fmt: skip
        """A wrong case in words: which, why it exists, its inputs and expected answer (none of
        them for a ``hidden`` one: a held-back case), then the ``verdict``'s lines."""
        case, total = cases[number - 1], len(cases)
        if hidden:
            head = "held back: its inputs and answer are not shown"
            return f"case {number} of {total} ({head}) is wrong\n{verdict}"
        where = case.label or _call_label(fn_name, self.params, case.args)
        why = case.why or (GENERATED_WHY if case.kind == "generated" else "")
        return (
            f"case {number} of {total} ({case.kind}) is wrong\n"
            + (f"  why:      {why}\n" if why else "")
            + f"  inputs:   {where}\n"
            f"  expected: {short(case.expected)}\n{verdict}"
        )

    def _verdict(
        self,
        case: Case,
        outcome: Outcome,
        cases: Sequence[Case] = (),
        answers: dict[int, Outcome] | None = None,
        make: Callable[[], Callable[..., Any]] | None = None,
    ) -> str | None:
        """None if the answer (converted: :meth:`answer_of`) is right, else the 'got' lines;
        with ``answers`` (id of a case -> its outcome) the hint too, and with ``make`` the
        diagnosis, run in a child of its own. The notebook's check and the instructor's
        grader (:mod:`pagedlab.grade.runner`) both say a wrong answer with it."""
        if outcome.timed_out:
            return (
                f"  got:      no answer within {self.budget_s:g} s (stopped)\n"
                "  hint:     a loop that never ends? Check its condition and that it advances."
            )
        if outcome.raised is not None:
            return self._raised(outcome.raised)
        got = outcome.value
        if _returned_none(case, outcome):
            return "  got:      None\n  hint:     did you forget `return`?"
        try:
            right = bool(self.compare(case.expected, got))
        except BaseException:
            right = False
        if right:
            return None
        if answers is None:
            return ""
        hint = self._hint(case, got, cases, answers)
        if make is not None and hint in (GENERATED_HINT, FIXED_HINT) and self._alone_right(
                make, case):  # fmt: skip
            hint = STATE_HINT
        text = f"  got:      {short(got)}\n  hint:     {hint}"
        if make is not None and self.narrows:
            found = run_isolated(lambda: self.where(make(), case), (), 3 * self.budget_s,
                                 self.isolate)  # fmt: skip
            extra = found.value if isinstance(found.value, str) else "(could not narrow it down)"
            if extra:
                text += "\n  where:    " + extra
        return text

    @staticmethod
    def _raised(raised: Raised) -> str:
        if raised == ENDED:  # no exception to show: the child process is gone
            return (
                "  got:      no answer: the process running it ended (os._exit, a crash in C "
                "code or in Triton's interpreter, or a signal)\n"
                "  hint:     look for os._exit, or a pointer or an index past a buffer's end."
            )
        at = f"\n            at {raised.where}" if raised.where else ""
        return (
            f"  got:      it raised {raised.kind}: {raised.text}{at}\n"
            "  hint:     read the error and the line it names; these inputs are valid ones."
        )

    def _hint(self, case: Case, got: Any, cases: Sequence[Case],
              answers: dict[int, Outcome]) -> str:  # fmt: skip
        if isinstance(got, WrongKind):
            wanted, kind = with_article(self.returns), with_article(got.type_name)
            return f"the answer should be {wanted}, got {kind}."
        for mistake in self.mistakes:
            if mistake.key not in case.catches:
                continue  # this case's purpose does not determine that mistake
            if not self._answers_like(mistake, case, got):
                continue
            fixed = [(c, answers.get(id(c))) for c in cases if c.kind == "fixed" and c is not case]
            if all(a is not None and a.raised is None and not a.timed_out
                   and self._answers_like(mistake, c, a.value) for c, a in fixed):  # fmt: skip
                return mistake.hint  # it answers as that mistake does on every fixed case
        return GENERATED_HINT if case.kind == "generated" else FIXED_HINT

    def _alone_right(self, make: Callable[[], Callable[..., Any]], case: Case) -> bool:
        """Whether ``case``, run alone in a fresh child, gets the right answer: then the miss
        came from something the earlier cases left behind."""
        alone = run_isolated(lambda *args: make()(*args), case.args, self.budget_s, self.isolate)
        return self._verdict(case, self.answer_of(case, alone)) is None

    def _answers_like(self, mistake: Mistake, case: Case, got: Any) -> bool:
        """Whether ``got`` (the learner's answer to ``case``) is the one ``mistake`` gives."""
        outcome = run_isolated(mistake.answer, case.args, self.budget_s, isolate=False)
        if outcome.raised is not None or outcome.timed_out:
            return False
        value = to_plain(outcome.value, case.expected) if self.convert else outcome.value
        if isinstance(value, WrongKind):
            return False
        try:
            return bool(self.compare(value, got)) or _same_nans(value, got)
        except BaseException:
            return False


def _returned_none(case: Case, outcome: Outcome) -> bool:
    """An answer of None where one is due (a missing ``return``, or a body not written)."""
    answered = outcome.raised is None and not outcome.timed_out
    return answered and outcome.value is None and case.expected is not None


def _same_nans(a: Any, b: Any) -> bool:
    """Two tensors equal with NaN where NaN is (a mistake's NaN answer is recognised)."""
    torch = sys.modules.get("torch")
    if torch is None or not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.shape != b.shape or not bool(torch.isnan(a).any()):
        return False
    return bool(torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-4, equal_nan=True))


def _name_of(fn: Any) -> str:
    """The name of a learner's object, read without running any of its code (a function's
    or a plain class's own name, a @triton.jit kernel's function's, else its type's)."""
    if type(fn) is types.FunctionType or type(fn) is type:
        return str(fn.__name__)
    inner = inspect.getattr_static(fn, "fn", None)  # a @triton.jit kernel wraps a function
    if type(inner) is types.FunctionType:
        return str(inner.__name__)
    return type_name(fn)


def type_name(value: Any) -> str:
    """The name of ``value``'s type, read off the type object itself (a metaclass's
    ``__name__`` property, learner code, never runs)."""
    return str(type.__dict__["__name__"].__get__(type(value)))


def _said(value: Any) -> str:
    """``value`` in words without running its code: a plain scalar's repr, else its type."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return short(value)
    return f"a {type_name(value)} object"


class Function(Exercise):
    """The learner writes a function; each case calls it and compares its answer (through a
    ``driver`` when one is named: ``"unchanged"`` fails a call that changes its arguments)."""


def same_log(expected: Any, got: Any) -> bool:
    """A replay's log: a list of tuples equal to the expected one."""
    return isinstance(got, list) and got == expected and all(type(x) is tuple for x in got)


@dataclass
class Replay(Exercise):
    """The learner builds a working piece (a class or a step function); each case is an event
    trace run through it and through pagedlab's real one (:func:`drivers.replay`), compared
    after every step; a miss names the first step that differs and the parts that do."""

    returns: str = "replay log"
    convert = False
    compare: Callable[[Any, Any], bool] = same_log
    parts: tuple[str, ...] = ()  # the names of what a log entry holds
    steps: Callable[..., list[str]] = lambda *args: [f"step {k}" for k in range(1, 10_000)]

    @property
    def narrows(self) -> bool:
        return True

    def where(self, fn: Callable[..., Any], case: Case) -> str:
        got, labels = fn(*case.args), self.steps(*case.args)
        for k, (want, have) in enumerate(zip(case.expected, got, strict=False)):
            if want != have:
                wrong = [
                    f"{part}: expected {w}, got {h}"
                    for part, w, h in zip(self.parts, want, have, strict=False)
                    if w != h
                ]
                return f"after {labels[k]}: " + "; ".join(wrong)
        return "" if len(got) == len(case.expected) else "a different number of steps"


@dataclass
class Kernel(Exercise):
    """The learner writes a ``@triton.jit`` kernel; each case launches it on fenced buffers
    (:mod:`~pagedlab.grade.kernel_drivers`) and compares its output with torch's."""

    returns: str = "kernel output"
    convert = False
    budget_s: float = 30.0
