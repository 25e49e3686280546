"""Instructor mode's parent side: it builds every case, the child only answers.

:func:`grade` reads the submitted notebooks, picks the exercises (every exercise of each
notebook whose exercise cells the submission holds, or those asked for), builds their cases
here (fixed ones and held-back ones from a secret salt, :func:`pagedlab.grade.cases.
held_back`) and sends only arguments to a caged child (:mod:`pagedlab.grade.child`), one case
after another (state carries, as in real use); the verdict is the judge's own
(:meth:`pagedlab.grade.core.Exercise._verdict`), less the diagnosis (learner code, here).

Invariants
    * No method of a learner's object runs here: replies are plain values (:mod:`~pagedlab.
      grade.wire`); every string shown or written is encodable UTF-8.
    * A case past its budget (plus GRACE_S), or a child that dies, fails that case; the child's
      PID namespace is killed whole and a fresh child, with the same cells, goes on. A cell
      whose top-level code hangs or ends the process is left out, and said so.
    * An exercise scores 1 only if its entry is the submission's own (checked on the source
      here and on the object in the child), its watch saw nothing change, and every case
      passes. A held-back case's inputs and answer are never printed.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pagedlab
from pagedlab.exercises import EXERCISES, Exercise
from pagedlab.grade import cage
from pagedlab.grade.cases import Case, held_back, short
from pagedlab.grade.cells import Cell, entry_of, kind_of, read_cells, source_problem
from pagedlab.grade.drivers import BASES
from pagedlab.grade.wire import Gone, Outcome, Raised, outcome_of, printable, receive, send

GRACE_S = 5.0  # past a case's budget before the child is killed (it also starts torch)
CELL_BUDGET_S = 120.0  # one cell's top-level code (imports of torch and triton included)
REPLY_LIMIT = 64 * 1024 * 1024  # bytes of one reply; a larger one fails the case
UNFINISHED = "✗ grading did not finish (the grader was stopped before it could judge this)"


class UsageError(ValueError):
    """The grader was asked for something it cannot do (an exercise that does not exist):
    the command line's error, not the submission's."""


# --- the child --------------------------------------------------------------------------------
class GuardGone(Exception):
    """The child says its import guard fell (the submission removed it, or loaded a grader):
    the exercise fails, and that child grades nothing more."""


class OutOfTime(Exception):
    """The submission's whole grading ran past its bound (``total_s``): what is left scores 0."""


class ChildGone(Exception):
    """The child died, sent something unreadable, or ran past the deadline (it is killed)."""


class Child:
    """One grading child in its cage (:mod:`pagedlab.grade.jail`); every call has a deadline.
    ``layers``: what the cage holds, as the child said before any learner code ran."""

    def __init__(self, workdir: str, ready_s: float = CELL_BUDGET_S) -> None:
        self.reported = ""  # the first thing the child's audit hook reported
        to_child, self._requests = os.pipe()
        self._replies, from_child = os.pipe()
        self._audit, audit = os.pipe()  # the child's audit hook reports here (pagedlab.grade.watch)
        self._log = open(os.path.join(workdir, "child.log"), "ab")  # noqa: SIM115
        command = [sys.executable, "-m", "pagedlab.grade.child", str(to_child), str(from_child),
                   str(audit)]  # fmt: skip
        home = cage.home(workdir)
        self.process = subprocess.Popen(
            cage.wrap(command),
            pass_fds=(to_child, from_child, audit),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
            cwd=home,
            env=cage.environment(home),
        )
        for fd in (to_child, from_child, audit):
            os.close(fd)
        ready = self.ask(None, ready_s)  # ("ready", layers, the pagedlab it imported)
        self.layers: dict[str, str] = cage.layers(ready)
        theirs = ready[-1] if isinstance(ready, tuple) and isinstance(ready[-1], str) else ""
        if os.path.realpath(theirs) != os.path.realpath(pagedlab.__file__):
            self.kill()
            raise UsageError(
                f"the grading child did not import this pagedlab ({pagedlab.__file__}; it got "
                f"{theirs or 'none'}): the uid it runs as cannot read it, or PYTHONPATH differs"
            )

    def ask(self, message: Any, seconds: float) -> Any:
        """Send ``message`` (None: send nothing) and return the reply within ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            nonce = secrets.token_hex(8)
            if message is not None:
                send(self._requests, (nonce, message))
            reply = receive(self._replies, deadline, limit=REPLY_LIMIT)
            if message is None:
                return reply
            more, _, _ = select.select([self._replies], [], [], 0)
            if more or not isinstance(reply, tuple) or len(reply) != 2 or reply[0] != nonce:
                raise ChildGone("something else wrote to the grader's pipe")
            self.reported = self.reported or self.audited()  # sticky: that child is tainted
            return self.reported if self.reported and message[0] != "cell" else reply[1]
        except ChildGone:
            self.kill()
            raise
        except (Gone, OSError) as error:
            self.kill()
            raise ChildGone(str(error)) from error

    def audited(self) -> str:
        """What the child's audit hook reported since the last call ("" if nothing); a pipe
        closed is reported too."""
        said = b""
        while select.select([self._audit], [], [], 0)[0]:
            chunk = os.read(self._audit, 1 << 16)
            if not chunk:
                return "the submission closed the grader's audit pipe"
            said += chunk
        return said.decode("utf-8", "replace").splitlines()[0] if said else ""

    def kill(self) -> None:
        """Kill the child's whole process group and reap it: its cage's PID 1 dies, and the
        kernel kills every process of that PID namespace (one that left the group too)."""
        if self._log.closed:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for fd in (self._requests, self._replies, self._audit):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()


# --- grading ----------------------------------------------------------------------------------
@dataclass
class Verdict:
    """One exercise's grade: its Gradescope test."""

    name: str
    notebook: str
    score: float
    passed: int
    total: int
    output: str

    def __post_init__(self) -> None:
        self.output = printable(self.output)  # it holds what the learner's code printed or raised

    def test(self) -> dict[str, Any]:
        return {"name": self.name, "score": self.score, "max_score": 1.0, "output": self.output,
                "visibility": "visible"}  # fmt: skip


class Grader:
    """Grades exercises one after another with one child (a fresh one after a failure)."""

    def __init__(self, cells: list[Cell], salt: str, workdir: str,
                 cell_budget_s: float = CELL_BUDGET_S,
                 total_s: float = cage.TOTAL_S) -> None:  # fmt: skip
        self.cells = cells
        self.total_s = total_s
        self.deadline = time.monotonic() + total_s  # the whole submission's bound
        self.cell_budget_s = cell_budget_s
        self.salt = salt
        self.workdir = workdir
        self.left_out: dict[int, str] = {}  # cell index -> why its code was left out
        self.child: Child | None = None
        self.layers: dict[str, str] = {}  # the cage of the first child (pagedlab.grade.cage)

    def close(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None

    def _ready(self) -> Child:
        """A child with every cell loaded (in order) but those that hang or end it."""
        while self.child is None:
            child = Child(self.workdir, self._left(max(self.cell_budget_s, 60.0)))
            self.layers = self.layers or child.layers
            try:
                for cell in self.cells:
                    if cell.index in self.left_out:
                        continue
                    try:
                        cell_s = self._left(self.cell_budget_s)
                        error = child.ask(("cell", cell.index, cell.source), cell_s)
                    except ChildGone as gone:
                        why = "ran too long" if str(gone) == "timeout" else f"failed: {gone}"
                        why = f"{cell.where}: its top-level code {why}"
                        self.left_out[cell.index] = printable(why)
                        raise
                    if error:
                        why = printable(f"{cell.where} raised {error}")
                        self.left_out.setdefault(cell.index, why)
                self.child = child
            except ChildGone:
                continue
        return self.child

    def _left(self, seconds: float) -> float:
        """``seconds``, or what is left of the submission's bound if less (none: OutOfTime)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.close()
            raise OutOfTime(f"grading stopped: this submission used up its {self.total_s:g} s")
        return min(seconds, left)

    def _ask(self, message: Any, seconds: float) -> Any:
        child = self._ready()
        try:
            return child.ask(message, self._left(seconds))
        except ChildGone:
            self.child = None
            raise

    def grade(self, exercise: Exercise) -> Verdict:
        entry, kind = entry_of(exercise), kind_of(exercise)
        holders = [c for c in self.cells if entry in c.defines]
        if not holders:
            return self._zero(exercise, f"no cell defines {entry}")
        base = BASES.get(exercise.driver)
        problem = source_problem(self.cells, entry, kind, base.__name__ if base else "")
        if problem:
            return self._zero(exercise, problem)
        try:
            problem = self._ask(("entry", entry, kind, exercise.driver), self.cell_budget_s)
        except ChildGone:
            problem = "looking it up ended the process"
        left = [self.left_out[c.index] for c in holders if c.index in self.left_out]
        if problem:
            return self._zero(exercise, f"{entry}: {problem}" + "".join(f"\n  {w}" for w in left))
        with held_back(self.salt):
            cases = exercise.cases()
        return self._run_cases(exercise, entry, list(cases))

    def _zero(self, exercise: Exercise, why: str, total: int = 0) -> Verdict:
        return Verdict(exercise.name, exercise.notebook, 0.0, 0, total, f"✗ {why}")

    def _run_cases(self, exercise: Exercise, entry: str, cases: list[Case]) -> Verdict:
        """Every case in order (until one finds no answer), then the first wrong one said by
        the notebook's own :meth:`~pagedlab.grade.core.Exercise._verdict`, held-back
        cases without their inputs and answer."""
        answers: dict[int, Outcome] = {}
        for number, case in enumerate(cases, start=1):
            try:
                outcome = self._one(entry, exercise.driver, case, exercise.budget_s)
            except GuardGone as gone:  # that child is the learner's now: a fresh one goes on
                self.close()
                return self._zero(exercise, f"{entry}: {gone} (case {number})", len(cases))
            answers[id(case)] = exercise.answer_of(case, outcome)
            if outcome.timed_out or self.child is None:  # no answer: no later case runs
                break
        for number, case in enumerate(cases[: len(answers)], start=1):
            outcome = answers[id(case)]
            wrong = exercise._verdict(case, outcome, cases, answers)
            if wrong is not None:
                text = "✗ " + exercise.failure(number, cases, entry, wrong, case.kind != "fixed")
                text += f"\n  printed:  {outcome.printed[:2000]}" if outcome.printed else ""
                return Verdict(exercise.name, exercise.notebook, 0.0, number - 1, len(cases), text)
        fixed = sum(c.kind == "fixed" for c in cases)
        text = f"✓ passed all {len(cases)} cases ({fixed} fixed, {len(cases) - fixed} held back)"
        return Verdict(exercise.name, exercise.notebook, 1.0, len(cases), len(cases), text)

    def _one(self, entry: str, driver: str, case: Case, budget: float) -> Outcome:
        try:
            reply = self._ask(("case", entry, driver, case.args, budget), budget + GRACE_S)
        except ChildGone as gone:
            if str(gone) == "timeout":
                return Outcome(timed_out=True)
            return Outcome(raised=Raised("SystemExit", f"no answer: {gone}", "", False))
        if isinstance(reply, str):
            raise GuardGone(reply)
        return outcome_of(reply)


def select_exercises(cells: list[Cell], notebooks: Iterable[str] = (),
                     names: Iterable[str] = ()) -> list[Exercise]:  # fmt: skip
    """The exercises asked for, else every exercise of each notebook the cells touch (none if
    they touch none: the submission's problem, not the command's)."""
    names, notebooks = list(names), list(notebooks)
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        raise UsageError(f"no exercise named {unknown}; there are: {', '.join(EXERCISES)}")
    asked = bool(names or notebooks)
    if not asked:
        defined = set().union(*(c.defines for c in cells)) if cells else set()
        notebooks = sorted({e.notebook for e in EXERCISES.values() if entry_of(e) in defined})
    picked = [
        e for e in EXERCISES.values()
        if e.name in names or any(e.notebook.startswith(n) for n in notebooks)
    ]  # fmt: skip
    if asked and not picked:
        raise UsageError(f"no exercise in notebook {notebooks}: nothing to grade")
    return picked


def grade(paths: Sequence[Path | str], notebooks: Iterable[str] = (), names: Iterable[str] = (),
          salt: str | None = None, say: Callable[[str], Any] = print,
          cell_budget_s: float = CELL_BUDGET_S,
          started: Callable[[dict[str, Any]], Any] | None = None,
          total_s: float = cage.TOTAL_S) -> dict[str, Any]:  # fmt: skip
    """Grade the submission: Gradescope's ``{"score", "tests"}`` (a table printed), with
    ``"output"`` when something concerns the whole submission. ``salt`` None: a fresh secret
    one (a fixed one makes a run repeatable: keep it secret). ``total_s`` bounds the whole
    submission (past it, what is left scores 0). ``started`` gets, before any learner code
    runs, every exercise at 0, "grading did not finish": what stands if this process is killed.
    """
    began = time.monotonic()
    files = [Path(p) for p in paths]
    entries = {entry_of(e) for e in EXERCISES.values()}
    notes: list[str] = []
    cells = read_cells(files, entries, notes)
    exercises = select_exercises(cells, notebooks, names)
    if not exercises:
        notes.append("nothing to grade: the submission defines no exercise (my_<name>)")
    if started is not None:
        unfinished = [Verdict(e.name, e.notebook, 0.0, 0, 0, UNFINISHED) for e in exercises]
        started(_results(unfinished, notes))
    salt = salt or secrets.token_hex(16)
    verdicts = []
    with cage.not_dumpable(), tempfile.TemporaryDirectory(prefix="pagedlab-grade-") as workdir:
        grader = Grader(cells, salt, workdir, cell_budget_s, total_s)
        try:
            for exercise in exercises:
                try:
                    verdicts.append(grader.grade(exercise))
                except OutOfTime as stop:
                    verdicts.append(grader._zero(exercise, str(stop)))
                except Exception as error:  # a bug of the grader: that exercise, said so
                    verdicts.append(grader._zero(exercise, f"the grader failed: {short(error)}"))
        finally:
            grader.close()
    weak = cage.missing(grader.layers)
    if weak:
        notes.append("isolation layers not in place: " + "; ".join(weak))
    say(printable(table(verdicts, files)))
    for text in grader.left_out.values():
        say(printable(f"note: {text} (left out)"))
    for text in notes:
        say(f"note: {text}")
    return _results(verdicts, notes, grader.layers, time.monotonic() - began)


def _results(verdicts: Sequence[Verdict], notes: Sequence[str],
             layers: dict[str, str] | None = None,
             seconds: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """Gradescope's results.json: the score, one test per exercise (its output: the verdict),
    the notes, how long grading took; the cage's layers in ``extra_data`` (kept, never shown).
    The learner sees every test's output; the grader's own stdout stays hidden."""
    results: dict[str, Any] = {
        "score": float(sum(v.score for v in verdicts)),
        "execution_time": math.ceil(seconds),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [v.test() for v in verdicts],
    }
    if layers:
        results["extra_data"] = {"isolation": layers}
    if notes:
        results["output"] = printable("\n".join(notes))
    return results


def table(verdicts: Sequence[Verdict], paths: Sequence[Path]) -> str:
    """One row per exercise, then each failure's lines."""
    names = ", ".join(p.name for p in paths)
    width = max([len(v.name) for v in verdicts] + [8])
    header = f"{'exercise':<{width}}  {'notebook':<24}  score  cases"
    rows = [f"pagedlab.grade: {names}", header]
    for v in verdicts:
        cases = f"{v.passed}/{v.total}" if v.total else "-"
        rows.append(f"{v.name:<{width}}  {v.notebook:<24}  {v.score:g}/1    {cases}")
    total = sum(v.score for v in verdicts)
    rows.append(f"{'total':<{width}}  {'':<24}  {total:g}/{len(verdicts)}")
    for v in verdicts:
        if v.score < 1:
            rows.append(f"\n{v.name}:\n" + v.output)
    return "\n".join(rows)
