"""Running a learner's function safely: a time budget that holds, every exception caught,
the answer a plain value (:mod:`pagedlab.grade.wire`), and where an error was raised.

* :class:`Worker` (CPython with ``os.fork``) forks ONE child for all the calls of one check,
  before any expected value exists, and sends it only each call's arguments; the calls run in
  order there (state carries, as in real use). The child runs in a session of its own and is
  killed whole once a call takes longer than its budget plus GRACE_S: nothing the learner's
  code does (an endless ``except BaseException: pass``, ``os._exit``, a crash in C code,
  patched modules) reaches the notebook's process. Printed output comes back cut at
  ``PRINT_LIMIT``. :func:`run_isolated` is one call in a Worker of its own.
* :func:`run_limited` runs in this process (Pyodide has no fork; a CUDA context does not
  survive one): in the main thread a ``SIGALRM`` timer interrupts the code and fires again
  every REPEAT_S after the budget; elsewhere a ``sys.settrace`` hook raises on every line past
  the deadline. Code that swallows *every* interruption forever cannot be stopped in-process.

Invariants: the alarm and the previous handler (or trace function) are restored whatever
happens; neither way raises; both return an :class:`Outcome` whose value was made plain
inside the call's budget (a repr or ``__index__`` may never return).
"""

from __future__ import annotations

import copy
import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from pagedlab.grade.wire import (
    Bounded,
    Gone,
    Outcome,
    Raised,
    outcome_of,
    plain,
    receive,
    reply_of,
    send,
    unplain,
)

GRACE_S = 1.0  # how long past the budget a child process may take before it is killed
REPEAT_S = 0.1  # the alarm fires again this often once the budget is spent


class _OutOfTime(BaseException):  # not an Exception: a learner's ``except Exception`` misses it
    pass


# --- the time budget, in this process ---------------------------------------------------------
@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise :class:`_OutOfTime` inside the block once ``seconds`` have passed (and again every
    REPEAT_S after that, should the code swallow it)."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            raise _OutOfTime

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    deadline = time.monotonic() + seconds

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _OutOfTime
        return tracer

    previous_trace = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous_trace)


def run_limited(fn: Callable[..., Any], args: Sequence[Any], seconds: float) -> Outcome:
    """``fn(*args)`` within ``seconds`` in this process (its value as it is)."""
    try:
        with time_budget(seconds):
            return Outcome(value=fn(*args))
    except BaseException as error:  # the learner's code may raise anything
        if any(isinstance(e, _OutOfTime) for e in _chain(error)):
            return Outcome(timed_out=True)
        return Outcome(raised=describe(error))


# --- the time budget, in a child process --------------------------------------------------------
def can_isolate() -> bool:
    """True where :class:`Worker` forks (CPython on Linux or macOS), False elsewhere."""
    return hasattr(os, "fork") and sys.platform != "emscripten"


ENDED = Raised("SystemExit", "the function ended the process", "", False)


class Worker:
    """Calls of one learner function in ONE forked child, as the module docstring says;
    ``make()`` builds the function there (a learner object's ``__getattr__`` runs there, not
    here). Once the child has died or been killed, every later call returns that outcome."""

    def __init__(self, make: Callable[[], Callable[..., Any]], isolate: bool = True) -> None:
        self.make = make
        self.fn: Callable[..., Any] | None = None
        self.pid = 0
        self.gone: Outcome | None = None
        if not (isolate and can_isolate()):
            return
        requests_r, self.requests = os.pipe()
        self.replies, replies_w = os.pipe()
        with warnings.catch_warnings():  # 3.12+ warns about forking a threaded process (a kernel)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: serve calls until the parent closes the pipe, then leave
            os.close(self.requests)
            os.close(self.replies)
            self._serve(requests_r, replies_w)
        os.close(requests_r)
        os.close(replies_w)
        self.pid = pid

    def call(self, args: Sequence[Any], seconds: float) -> Outcome:
        """``fn(*args)`` within ``seconds``: a plain value (:func:`unplain`: a tensor rebuilt),
        or what went wrong; the same whether a child or this process ran it."""
        if not self.pid:  # no child: the call the child would make, here on a copy of args
            outcome = self._here(copy.deepcopy(list(args)), seconds)
            return replace(outcome, value=unplain(outcome.value))
        if self.gone is not None:
            return self.gone
        nonce = os.urandom(8).hex()
        try:
            send(self.requests, (nonce, tuple(args), seconds))
            reply = receive(self.replies, time.monotonic() + seconds + GRACE_S)
            if not (isinstance(reply, tuple) and len(reply) == 2 and reply[0] == nonce):
                raise Gone("something else wrote to the grader's pipe")
            return outcome_of(reply[1])
        except BaseException as error:  # the child died, hung, lied, or we were interrupted
            timed_out = isinstance(error, Gone) and str(error) == "timeout"
            why = ENDED if not isinstance(error, Gone) or "ended" in str(error) else Raised(
                "SystemExit", str(error), "", False)  # fmt: skip
            stopped = timed_out or isinstance(error, KeyboardInterrupt)  # the learner's Stop
            self.gone = Outcome(timed_out=True) if stopped else Outcome(raised=why)
            self.close()
            return self.gone

    def _here(self, args: Sequence[Any], seconds: float) -> Outcome:
        """One call where the calls run (the child, or this process without one): ``make()``
        first while there is no function yet (its failure is the outcome), then the answer
        made :func:`plain` inside the budget (a repr may never return)."""
        if self.fn is None:
            made = run_limited(self.make, (), seconds)
            if made.raised is not None or made.timed_out:
                return made
            self.fn = made.value
        fn = self.fn
        return run_limited(lambda *given: plain(fn(*given)), args, seconds)

    def _serve(self, requests: int, replies: int) -> None:
        """The child's loop (never returns): one reply per request, until the pipe closes."""
        try:
            os.setsid()  # a session of its own: the parent kills it whole
            faulthandler.disable()  # a crash is a failed case, said in the check's message
            torch = sys.modules.get("torch")
            if torch is not None:  # the parent's intra-op thread pool did not survive the fork
                torch.set_num_threads(1)
            while True:
                try:
                    nonce, args, seconds = receive(requests, trusted=True)
                except Gone:
                    break
                sink = Bounded()
                sys.stdout = sys.stderr = sink  # a kernel's output streams do not work here
                send(replies, (nonce, reply_of(self._here(args, seconds), sink.text())))
        finally:
            os._exit(0)

    def close(self) -> None:
        """Kill the child's whole session and reap it (nothing is left running)."""
        if not self.pid:
            return
        pid, self.pid = self.pid, 0
        self.gone = self.gone or Outcome(raised=ENDED)
        for kill in (os.killpg, os.kill):
            with suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)
        for fd in (self.requests, self.replies):
            with suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def run_isolated(fn: Callable[..., Any], args: Sequence[Any], seconds: float,
                 isolate: bool = True) -> Outcome:  # fmt: skip
    """One call of ``fn(*args)`` in a :class:`Worker` of its own: in a child, or in this
    process (not ``isolate``, or no fork); either way its answer is a plain value."""
    with Worker(lambda: fn, isolate) as worker:
        return worker.call(args, seconds)


# --- describing an error --------------------------------------------------------------------------
def describe(error: BaseException) -> Raised:
    """The error in words: its kind, message, the learner's line, whether it is a stub's."""
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        text = "(its message could not be read)"
    text = text if len(text) <= 200 else text[:196] + " ..."
    stub = any(isinstance(e, NotImplementedError) for e in _chain(error))
    stub = stub or "NotImplementedError" in text
    return Raised(type(error).__name__, text, raised_at(error), stub)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then its cause (else its context), and so on: each exception once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def raised_at(error: BaseException) -> str:
    """``line N: <source>`` of the innermost frame outside pagedlab, triton and torch (the
    learner's own line), or "" when there is none. The file name is left out: a notebook
    cell's is a temporary path that changes from run to run."""
    library = (Path(__file__).resolve().parents[1], "site-packages", "/lib/python")
    found = ""
    for current in _chain(error):
        for frame in traceback.extract_tb(current.__traceback__):
            here = str(Path(frame.filename).resolve()) if frame.filename else ""
            if here and not any(str(part) in here for part in library):
                found = f"line {frame.lineno}: {(frame.line or '').strip()}"
    return found
