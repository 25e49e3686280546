"""Running a learner's function safely: a time budget, every exception caught, and where it
was raised.

The time budget: in the main thread on a system with ``SIGALRM`` (Linux, macOS: also inside a
Jupyter kernel, which runs cells in its main thread) a real-time alarm interrupts the learner's
code; elsewhere a ``sys.settrace`` hook checks the clock on every line it runs (it cannot stop a
long call into C code, which the alarm can, once that call returns to Python). The alarm and
the previous signal handler (or trace function) are restored on the way out, whatever happens.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class _OutOfTime(BaseException):  # not an Exception: a learner's ``except Exception`` misses it
    pass


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise :class:`_OutOfTime` inside the block once ``seconds`` have passed."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            raise _OutOfTime

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
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


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False


def run_limited(fn: Callable[..., Any], args: Sequence[Any], seconds: float) -> Outcome:
    """``fn(*args)`` within ``seconds``; every exception is caught and returned."""
    try:
        with time_budget(seconds):
            value = fn(*args)
        return Outcome(value=value)
    except _OutOfTime:
        return Outcome(timed_out=True)
    except BaseException as error:  # the learner's code may raise anything
        if _in_chain(error, _OutOfTime):
            return Outcome(timed_out=True)
        return Outcome(error=error)


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
