"""What crosses between a grading child and its parent: plain values only.

A learner's answer is made :func:`plain` where it was computed (ints, bools, floats, strs,
lists, tuples; a tensor as ``{"tensor": (dtype, shape, values)}``, a dict as ``{"dict":
[...]}``, anything else as ``{"other": (type, repr)}``), sent as a length-prefixed pickle
(:func:`send`) and read with a class-free unpickler (:class:`PlainUnpickler`): no method of a
learner's object, no ``__reduce__``, runs in the reading process. :func:`unplain` rebuilds it;
:func:`to_plain` makes it a value of the expected kind or a :class:`WrongKind`. Every str a
child sends is made :func:`printable`. Torch-free: a tensor exists only once torch is imported.
"""

from __future__ import annotations

import io
import operator
import os
import pickle
import struct
import sys
import time
from dataclasses import astuple, dataclass
from typing import Any


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
    """``got`` (what :func:`unplain` gives) as a value of ``like``'s kind, or a
    :class:`WrongKind`: a bool is not an int, an int not a float (a float may be an int), a
    list not a tuple (elements converted like ``like``'s); a 0-d tensor counts as its number;
    ``None`` (a missing ``return``) and a WrongKind stay themselves."""
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
    """A plain value whose expected kind is not known (an element expected None): a scalar or
    a list or tuple of them, anything else a WrongKind."""
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
    """``value`` as plain values (the module docstring's forms), made where the learner's code
    runs; an int where it has ``__index__``, a float where it is one. Never raises."""
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
    """A :func:`plain` value rebuilt here (tensors, dicts; ``{"other": ...}`` a WrongKind)."""
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
    """Loads plain values only: it names no class, so no learner ``__reduce__`` runs here."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: a reply may not name {module}.{name}")


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
    """The next message on ``fd`` by ``deadline`` (``time.monotonic()``; None: no limit),
    read with :class:`PlainUnpickler` unless it comes from the parent (``trusted``)."""
    (size,) = struct.unpack(">I", _read(fd, 4, deadline))
    if size > limit:
        raise Gone(f"a reply of {size} bytes (more than {limit})")
    data = _read(fd, size, deadline)
    try:
        return pickle.loads(data) if trusted else PlainUnpickler(io.BytesIO(data)).load()
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


def reply_of(outcome: Outcome, printed: str) -> dict[str, Any]:
    """A child's reply: ``outcome`` (its value already :func:`plain`) and what it printed."""
    raised = None if outcome.raised is None else astuple(outcome.raised)
    return {"value": outcome.value, "raised": raised, "timed_out": outcome.timed_out,
            "printed": printed}  # fmt: skip


def outcome_of(reply: Any) -> Outcome:
    """A child's reply (a dict of plain values) as an :class:`Outcome`."""
    if not isinstance(reply, dict):
        return Outcome(raised=Raised("SystemExit", "an unreadable reply", "", False))
    said, raised = reply.get("raised"), None
    if isinstance(said, tuple) and len(said) == 4:
        kind, text, where = map(printable, said[:3])
        raised = Raised(kind, text, where, said[3] is True)
    timed_out = reply.get("timed_out") is True
    return Outcome(unplain(reply.get("value")), raised, timed_out, printable(reply.get("printed")))


def printable(text: Any) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate) escaped ("" if not a str)."""
    return str.__str__(text).encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(
        text, str) else ""  # fmt: skip
