"""Running a learner's function safely: a time budget that holds, every exception caught, the
answer turned into a plain value, and where an error was raised.

Two ways to run it:

* :class:`Worker` (CPython with ``os.fork``: Linux, macOS) forks ONE child for all the calls
  of one check, before any expected value exists, and sends it only each call's arguments;
  the calls run in order there (state carries, as in real use). The child runs in a session
  of its own and is killed whole (grandchildren too) once a call takes longer than its budget
  plus GRACE_S. Nothing the learner's code does (``except BaseException: pass`` in an endless
  loop, ``os._exit``, a crash in C code or in Triton's interpreter, changed settings, patched
  modules) reaches the notebook's process. Answers come back as plain values (:func:`plain`:
  ints, bools, floats, strs, lists, tuples, tensors as lists) read with a class-free
  unpickler (:class:`PlainUnpickler`), so no method of a learner's object, no ``__reduce__``,
  runs here; printed output comes back cut at :data:`PRINT_LIMIT`. :func:`run_isolated` is one
  call in a Worker of its own (a check's diagnosis).
* :func:`run_limited` runs in this process (Pyodide has no fork; a CUDA context does not
  survive one, so the Triton exercises run here on a GPU); a Worker without a child calls
  through it. In the main thread with ``SIGALRM``
  a real-time alarm interrupts the code and fires again every 0.1 s after the budget, so one
  swallowed alarm is not enough to escape it; elsewhere a ``sys.settrace`` hook raises on
  every line past the deadline. A function that swallows *every* interruption forever cannot
  be stopped in one thread: in-process, that is the one way to keep ``check`` waiting.

The alarm and the previous signal handler (or trace function) are restored on the way out,
whatever happens. Invariant of both: they never raise, and what they return is an
:class:`Outcome` holding either a value, a :class:`Raised` (the error in words) or a timeout.
A Worker's answer, in a child or in this process, is made :func:`plain` inside the call's time
budget (a repr or ``__index__`` may never return) and rebuilt by :func:`unplain`: what
:func:`to_plain` sees is always a plain value, never a learner's object.
"""

from __future__ import annotations

import copy
import faulthandler
import io
import operator
import os
import pickle
import signal
import struct
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import astuple, dataclass, replace
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
    """``got``, a plain value (what :func:`unplain` gives), as one of the kind ``like`` is, or
    a :class:`WrongKind`.

    bool: a bool; int: an int, never a bool or a float; float: an int or a float, as a float
    (a 0-d tensor counts as its number for these three); str: a str; list / tuple: the same
    container, each element converted like the matching element of ``like``; a tensor: a
    tensor; ``None`` stays ``None`` (a missing ``return``) and a WrongKind stays itself;
    anything else (``like`` is None, a dict ...): itself. Any other object (one that did not
    pass :func:`plain`) is a WrongKind: no method of it but its repr runs.
    """
    if got is None or isinstance(got, WrongKind):
        return got
    if isinstance(like, (bool, int, float)):
        number = got.item() if _is_tensor(got) and got.ndim == 0 else got
        if isinstance(like, bool):
            return number if type(number) is bool else _wrong(got)
        if isinstance(like, int):
            return number if type(number) is int else _wrong(got)
        return float(number) if type(number) in (int, float) else _wrong(got)
    if isinstance(like, str):
        return got if type(got) is str else _wrong(got)
    if isinstance(like, (list, tuple)):
        if type(got) is not type(like):
            return _wrong(got)
        converted = []
        for i, item in enumerate(got):
            model = like[i] if i < len(like) else (like[-1] if like else None)
            converted.append(to_plain(item, model) if model is not None else _generic(item))
        return converted if isinstance(like, list) else tuple(converted)
    if _is_tensor(like):
        return got.as_subclass(type(like)) if _is_tensor(got) else _wrong(got)
    return got


def _generic(got: Any) -> Any:
    """A plain value whose expected kind is not known (None expected: an element that is None
    in this case, another kind in others): None, a bool, int, float or str, or a list or tuple
    of them; anything else is a WrongKind."""
    if type(got) in (list, tuple):
        return to_plain(got, type(got)())
    return got if got is None or type(got) in (bool, int, float, str) else _wrong(got)


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")  # never imported here: no torch, no tensors
    return torch is not None and isinstance(x, torch.Tensor)


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


def run_limited(fn: Callable[..., Any], args: Sequence[Any], seconds: float) -> Outcome:
    """``fn(*args)`` within ``seconds`` in this process (its value as it is)."""
    try:
        with time_budget(seconds):
            return Outcome(value=fn(*args))
    except BaseException as error:  # the learner's code may raise anything
        if any(isinstance(e, _OutOfTime) for e in _chain(error)):
            return Outcome(timed_out=True)
        return Outcome(raised=describe(error))


# --- plain values on the wire ----------------------------------------------------------------
PRINT_LIMIT = 64 * 1024  # characters of a call's printed output kept (the rest is cut, said so)


class Bounded(io.TextIOBase):
    """A stdout that keeps the first PRINT_LIMIT characters and counts the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.cut = 0

    def write(self, text: Any) -> int:
        text = str.__str__(text) if isinstance(text, str) else ""
        room = PRINT_LIMIT - self.kept
        self.parts.append(text[:room])
        self.kept += min(room, len(text))
        self.cut += max(0, len(text) - room)
        return len(text)

    def text(self) -> str:
        body = "".join(self.parts)
        return body + (f"\n[... {self.cut} more characters printed, cut]" if self.cut else "")


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain values only (None, bool, int, float, str, list, tuple, dict), made
    where the learner's code runs: a tensor as ``{"tensor": (dtype, shape, values)}``, a dict
    as ``{"dict": [(key, value), ...]}``, anything else as ``{"other": (type, repr)}``; an int
    where the value has ``__index__``, a float where it is a float. Never raises."""
    try:
        if value is None or type(value) in (bool, int, float, str):
            return value
        if _is_tensor(value) and depth < 50:
            flat = value.detach().cpu().reshape(-1)
            dtype = str(flat.dtype).removeprefix("torch.")
            return {"tensor": (dtype, list(map(int, value.shape)), flat.tolist())}
        if isinstance(value, (list, tuple)) and depth < 50:
            items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
            converted = [plain(item, depth + 1) for item in items]
            return converted if isinstance(value, list) else tuple(converted)
        if isinstance(value, dict) and depth < 50:
            return {"dict": [(plain(k, depth + 1), plain(v, depth + 1)) for k, v in
                             dict.items(value)]}  # fmt: skip
        if isinstance(value, str):
            return str.__str__(value)
        dtype = str(getattr(value, "dtype", ""))  # numpy's (or a deep tensor's) scalars
        if dtype in ("bool", "torch.bool") and getattr(value, "ndim", 0) == 0:
            return bool(value)
        if isinstance(value, float) or "float" in dtype:
            return float(value)
        if hasattr(type(value), "__index__"):
            return int(operator.index(value))
        return {"other": (type(value).__name__, _wrong(value).text)}
    except BaseException as error:
        return {"other": (type(value).__name__, f"(could not be read: {type(error).__name__})")}


def unplain(value: Any) -> Any:
    """A :func:`plain` value made usable here: tensors rebuilt (from plain lists), dicts
    rebuilt, ``{"other": ...}`` as a :class:`WrongKind`."""
    if isinstance(value, list):
        return [unplain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(unplain(v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"tensor"}:
            torch = sys.modules.get("torch")  # a tensor case was built here: torch is in
            dtype, shape, values = value["tensor"]
            kind = getattr(torch, str(dtype), None)
            if torch is None or not isinstance(kind, torch.dtype):
                return WrongKind("tensor", f"a tensor of dtype {dtype}")
            return torch.tensor(values, dtype=kind).reshape(shape)
        if set(value) == {"dict"}:
            try:
                return {unplain(k): unplain(v) for k, v in value["dict"]}
            except TypeError:  # an unhashable key
                return WrongKind("dict", "a dict")
        if set(value) == {"other"}:
            type_name, text = value["other"]
            return WrongKind(printable(type_name), printable(text))
    return value if value is None or type(value) in (bool, int, float, str) else None


class PlainUnpickler(pickle.Unpickler):
    """Loads plain values only (None, bool, int, float, str, bytes, list, tuple, dict): it
    names no class, so no ``__reduce__`` of a learner's object runs in the reading process."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: a reply may not name {module}.{name}")


def plain_loads(data: bytes) -> Any:
    return PlainUnpickler(io.BytesIO(data)).load()


def send(fd: int, message: Any) -> None:
    """One message: a 4-byte big-endian length, then the pickle."""
    data = pickle.dumps(message, protocol=4)
    data = struct.pack(">I", len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Gone(Exception):
    """The other end ended, ran past its deadline ("timeout") or sent something unreadable."""


def receive(fd: int, deadline: float | None = None, trusted: bool = False,
            limit: int = 256 * 1024 * 1024) -> Any:  # fmt: skip
    """The next message on ``fd`` (by ``deadline``, a ``time.monotonic()``; None: no limit),
    unpickled with :class:`PlainUnpickler` unless it comes from the parent (``trusted``)."""
    (size,) = struct.unpack(">I", _read(fd, 4, deadline))
    if size > limit:
        raise Gone(f"a reply of {size} bytes (more than {limit})")
    data = _read(fd, size, deadline)
    try:
        return pickle.loads(data) if trusted else plain_loads(data)
    except Exception as error:
        raise Gone(f"an unreadable reply ({type(error).__name__})") from error


def _read(fd: int, n: int, deadline: float | None) -> bytes:
    import select  # here, not at the top: Pyodide (no fork) may have no select module

    data = b""
    while len(data) < n:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise Gone("timeout")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, min(n - len(data), 1 << 20))
        if not chunk:
            raise Gone("the process ended (os._exit, a crash or a signal)")
        data += chunk
    return data


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
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)
        for fd in (self.requests, self.replies):
            with suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def reply_of(outcome: Outcome, printed: str) -> dict[str, Any]:
    """A child's reply: ``outcome`` (its value already :func:`plain`) as plain values, with
    what the call ``printed``; :func:`outcome_of` reads it back."""
    raised = None if outcome.raised is None else astuple(outcome.raised)
    return {"value": outcome.value, "raised": raised, "timed_out": outcome.timed_out,
            "printed": printed}  # fmt: skip


def outcome_of(reply: Any) -> Outcome:
    """A child's reply (a dict of plain values) as an :class:`Outcome`."""
    if not isinstance(reply, dict):
        return Outcome(raised=Raised("SystemExit", "an unreadable reply", "", False))
    raised = reply.get("raised")
    if isinstance(raised, tuple) and len(raised) == 4:
        kind, text, where, stub = raised
        raised = Raised(printable(kind), printable(text), printable(where), stub is True)
    else:
        raised = None
    printed = reply.get("printed")
    return Outcome(
        value=unplain(reply.get("value")),
        raised=raised,
        timed_out=reply.get("timed_out") is True,
        printed=printable(printed) if isinstance(printed, str) else "",
    )


def printable(text: Any) -> str:
    """``text`` (a str from a child) with what UTF-8 cannot encode (a lone surrogate)
    escaped: a child's words never break the printing or the JSON that shows them."""
    return str.__str__(text).encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(
        text, str) else ""  # fmt: skip


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
