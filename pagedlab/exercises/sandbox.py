"""Running a learner's function safely: a time budget that holds, every exception caught, the
answer turned into a plain value, and where an error was raised.

Two ways to run it:

* :func:`run_isolated` (CPython with ``os.fork``: Linux, macOS) runs the call in a forked child
  process and waits at most the budget plus a grace second, then kills the child. Nothing the
  learner's code does (``except BaseException: pass`` in an endless loop, ``os._exit``, a
  crash in C code) can keep ``check`` waiting, and the child's side effects stay in the child.
  The answer comes back converted by :func:`to_plain` (plain ints, bools, floats, strs, lists,
  tuples; a tensor as a tensor), so the parent never calls a method of a learner's object.
* :func:`run_limited` runs in this process (Pyodide has no fork; a CUDA context does not
  survive one, so the Triton puzzle runs here). In the main thread with ``SIGALRM`` a real-time
  alarm interrupts the code and fires again every 0.1 s after the budget, so one swallowed
  alarm is not enough to escape it; elsewhere a ``sys.settrace`` hook raises on every line past
  the deadline. A function that swallows *every* interruption forever cannot be stopped in one
  thread: in-process, that is the one way to keep ``check`` waiting.

The alarm and the previous signal handler (or trace function) are restored on the way out,
whatever happens. Invariant of both: they never raise, and what they return is an
:class:`Outcome` holding either a value, a :class:`Raised` (the error in words) or a timeout.
"""

from __future__ import annotations

import io
import operator
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GRACE_S = 1.0  # how long past the budget a child process may take before it is killed
REPEAT_S = 0.1  # the alarm fires again this often once the budget is spent


class _OutOfTime(BaseException):  # not an Exception: a learner's ``except Exception`` misses it
    pass


@dataclass(frozen=True)
class Raised:
    """An exception the learner's code raised, in words (it may not survive a pickle)."""

    kind: str  # the exception's class name
    text: str  # its message, bounded
    where: str  # "line N: <source>" of the learner's own line, or ""
    stub: bool  # NotImplementedError anywhere in its chain: the body is not written yet


@dataclass(frozen=True)
class WrongKind:
    """An answer that is not of the expected kind (an int where a bool is due, a list for a
    tuple ...): its type's name and a bounded repr, computed where it was made."""

    type_name: str
    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    raised: Raised | None = None
    timed_out: bool = False
    printed: str = ""  # what an isolated call printed (a child's stdout and stderr)


# --- plain values -------------------------------------------------------------------------------
def to_plain(got: Any, like: Any) -> Any:
    """``got`` as a plain value of the kind ``like`` is, or a :class:`WrongKind`.

    bool: a bool (numpy / torch bools too); int: ``operator.index`` of it, never a float or a
    bool; float: ``float`` of any number but a bool; str: an exact ``str``; list / tuple: the
    same container, each element converted like the matching element of ``like``; a tensor:
    a plain ``torch.Tensor``; ``None`` stays ``None`` (a missing ``return``); anything else
    (``like`` is None, a dict ...): itself.
    """
    if got is None:
        return None
    if isinstance(like, bool):
        if not _is_bool(got):
            return _wrong(got)
        return bool(got)
    if isinstance(like, int):
        if _is_bool(got) or isinstance(got, float) or getattr(got, "ndim", 0) != 0:
            return _wrong(got)
        try:
            return int(operator.index(got))
        except TypeError:
            return _wrong(got)
    if isinstance(like, float):
        if _is_bool(got) or isinstance(got, (str, bytes)) or getattr(got, "ndim", 0) != 0:
            return _wrong(got)
        try:
            return float(got)
        except (TypeError, ValueError):
            return _wrong(got)
    if isinstance(like, str):
        return str.__str__(got) if isinstance(got, str) else _wrong(got)
    if isinstance(like, (list, tuple)):
        if not isinstance(got, type(like)):
            return _wrong(got)
        items = list.__iter__(got) if isinstance(got, list) else tuple.__iter__(got)
        converted = []
        for i, item in enumerate(items):
            model = like[i] if i < len(like) else (like[-1] if like else None)
            converted.append(to_plain(item, model) if model is not None else _generic(item))
        return converted if isinstance(like, list) else tuple(converted)
    if _is_tensor(like):
        if not _is_tensor(got):
            return _wrong(got)
        return got.detach().cpu().clone().as_subclass(type(like))
    return got


def _generic(got: Any) -> Any:
    """A plain copy of a value whose expected kind is not known (None expected: an element
    that is None in this case, another kind in others): exact ints, floats, bools, strs and
    containers of them; anything else is a WrongKind."""
    if got is None or type(got) in (bool, int, float, str):
        return got
    if isinstance(got, bool) or isinstance(got, int) and not _is_bool(got):
        return to_plain(got, 0)
    if isinstance(got, (list, tuple)):
        return to_plain(got, type(got)())
    return _wrong(got)


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")  # never imported here: no torch, no tensors
    return torch is not None and isinstance(x, torch.Tensor)


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or (
        getattr(x, "ndim", 0) == 0 and str(getattr(x, "dtype", "")) in ("bool", "torch.bool")
    )


def _wrong(got: Any) -> WrongKind:
    try:
        text = repr(got)
    except BaseException:  # a learner's object whose repr raises
        text = f"<{type(got).__name__} whose repr raised>"
    return WrongKind(type(got).__name__, text if len(text) <= 300 else text[:295] + " ...")


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


def run_limited(
    fn: Callable[..., Any], args: Sequence[Any], seconds: float, like: Any = None
) -> Outcome:
    """``fn(*args)`` within ``seconds`` in this process, converted like ``like`` when given."""
    try:
        with time_budget(seconds):
            value = fn(*args)
            if like is not None:
                value = to_plain(value, like)
        return Outcome(value=value)
    except _OutOfTime:
        return Outcome(timed_out=True)
    except BaseException as error:  # the learner's code may raise anything
        if _in_chain(error, _OutOfTime):
            return Outcome(timed_out=True)
        return Outcome(raised=describe(error))


# --- the time budget, in a child process --------------------------------------------------------
def can_isolate() -> bool:
    """True where :func:`run_isolated` forks (CPython on Linux or macOS), False elsewhere."""
    return hasattr(os, "fork") and sys.platform != "emscripten"


def run_isolated(
    fn: Callable[..., Any], args: Sequence[Any], seconds: float, like: Any = None
) -> Outcome:
    """``fn(*args)`` in a forked child, killed if it takes longer than ``seconds`` + GRACE_S;
    in this process (:func:`run_limited`) where there is no fork."""
    if not can_isolate():
        return run_limited(fn, args, seconds, like)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns about forking a threaded process (a kernel)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: run, send the outcome, leave without cleanup
        os.close(read_end)
        _child(fn, args, seconds, like, write_end)
    os.close(write_end)
    return _collect(pid, read_end, seconds + GRACE_S)


def _child(fn: Callable[..., Any], args: Sequence[Any], seconds: float, like: Any, fd: int) -> None:
    status = 1
    try:
        captured = io.StringIO()
        sys.stdout = sys.stderr = captured  # a kernel's output streams do not work in a child
        outcome = run_limited(fn, args, seconds, like)
        outcome = Outcome(outcome.value, outcome.raised, outcome.timed_out, captured.getvalue())
        try:
            data = pickle.dumps(outcome)
        except BaseException:  # an answer that does not pickle (a plain value always does)
            data = pickle.dumps(Outcome(value=_wrong(outcome.value)))
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
        status = 0
    finally:
        os._exit(status)


def _collect(pid: int, fd: int, limit: float) -> Outcome:
    import select  # here, not at the top: Pyodide (no fork) may have no select module

    deadline = time.monotonic() + limit
    chunks: list[bytes] = []
    finished = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    except BaseException:  # an interrupt while waiting: stop the child, report a timeout
        finished = False
    finally:
        os.close(fd)
        if not finished:
            _kill(pid)
        else:
            os.waitpid(pid, 0)
    if not finished:
        return Outcome(timed_out=True)
    try:
        outcome = pickle.loads(b"".join(chunks))
    except BaseException:  # the child died before it sent a whole outcome
        return Outcome(raised=Raised("SystemExit", "the function ended the process", "", False))
    return outcome if isinstance(outcome, Outcome) else Outcome(timed_out=True)


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


# --- describing an error --------------------------------------------------------------------------
def describe(error: BaseException) -> Raised:
    """The error in words: its kind, message, the learner's line, whether it is a stub's."""
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        text = "(its message could not be read)"
    text = text if len(text) <= 200 else text[:196] + " ..."
    stub = _in_chain(error, NotImplementedError) or "NotImplementedError" in text
    return Raised(type(error).__name__, text, raised_at(error), stub)


def _in_chain(error: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def raised_at(error: BaseException) -> str:
    """``line N: <source>`` of the innermost frame outside pagedlab, triton and torch (the
    learner's own line), or "" when there is none. The file name is left out: a notebook
    cell's is a temporary path that changes from run to run."""
    library = (Path(__file__).resolve().parents[1], "site-packages", "/lib/python")
    found = ""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            here = str(Path(frame.filename).resolve()) if frame.filename else ""
            if here and not any(str(part) in here for part in library):
                found = f"line {frame.lineno}: {(frame.line or '').strip()}"
        current = current.__cause__ or current.__context__
    return found
