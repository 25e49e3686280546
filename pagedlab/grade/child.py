"""The grading child: runs a learner's exercise cells and calls what they define; nothing else.

``python -m pagedlab.grade`` starts ``python -m pagedlab.grade.child REQUESTS REPLIES AUDIT``
(three pipe fds) in its cage (:mod:`pagedlab.grade.jail`). It holds no expected value, no case
builder, no solution and no judge: it imports ``pagedlab``, the drivers and the sandbox, never
``pagedlab.exercises``; :mod:`pagedlab.grade.watch` guards it before any learner code runs.

Protocol: length-prefixed pickles. The parent sends ``(nonce, request)``: ``("cell", index,
source)``, ``("entry", name, kind, driver)`` or ``("case", entry, driver, args, budget_s)``; the
child answers ``(nonce, reply)`` in plain values only (:mod:`pagedlab.grade.wire`; a ``case``
reply is a str when a watched thing changed). Another nonce, or anything more on the pipe, is
the learner's code writing there: the parent fails that case.
"""

from __future__ import annotations

import inspect
import linecache
import os
import sys
import types
from typing import Any

CELL_FILE = "<submission cell {}>"  # the file name of each of the learner's cells
NAMESPACE = "__submission__"  # the module name the learner's cells run as


class _Absent(dict[str, Any]):
    """``EXERCISES`` in a grading child: any name gives an exercise whose check does nothing."""

    def __missing__(self, name: str) -> Any:
        return types.SimpleNamespace(check=_nothing, name=name)


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _load_drivers() -> Any:
    """The drivers and the sandbox; ``pagedlab.exercises`` (every case builder) stays out:
    a cell's ``EXERCISES[name].check(...)`` does nothing here."""
    import pagedlab  # the library: sets TRITON_INTERPRET before anything imports triton

    package = types.ModuleType("pagedlab.exercises")
    package.__dict__["__path__"] = [os.path.join(os.path.dirname(pagedlab.__file__), "exercises")]
    package.__dict__.update(
        EXERCISES=_Absent(), solution=_nothing, stub=_nothing, progress=_nothing
    )
    sys.modules["pagedlab.exercises"] = package
    import pagedlab.grade.drivers as drivers
    import pagedlab.grade.sandbox  # noqa: F401

    if pagedlab.HAS_TORCH:  # the kernel drivers join ADAPTERS, watched from the start
        import pagedlab.grade.kernel_drivers  # noqa: F401
    return drivers


def code_of(source: str) -> str:
    """A cell's source with its IPython magics and shell lines blanked (line numbers kept)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())  # fmt: skip


def _run_cell(index: int, source: str, namespace: dict[str, Any]) -> str:
    """Execute one cell (IPython magics and shell lines left out); "" or the error."""
    from pagedlab.grade.wire import Bounded

    text = code_of(source) + "\n"
    name = CELL_FILE.format(index)
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)  # for inspect
    sink = Bounded()
    sys.stdout = sys.stderr = sink
    try:
        exec(compile(text, name, "exec"), namespace)
    except BaseException as error:
        return f"{type(error).__name__}: {str(error)[:300]}"
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    return ""


def _from_submission(fn: Any) -> bool:
    """A plain function the submission wrote, or a decorator's wrapper (not pagedlab's) of
    one (``@torch.no_grad()``: ``__wrapped__`` down to the submission's own function)."""
    for _ in range(8):
        if type(fn) is not types.FunctionType:
            return False
        where = str(fn.__code__.co_filename)
        if where.startswith("<submission"):
            return True
        if os.sep + "pagedlab" + os.sep in where:
            return False
        fn = inspect.getattr_static(fn, "__wrapped__", None)
    return False


def entry_problem(obj: Any, kind: str, base: type | None = None) -> str:
    """Why ``obj`` is not the learner's own function, class or kernel ("" if it is); a class
    may subclass ``base`` (the pagedlab class its driver runs a subclass of)."""
    if kind == "kernel":
        inner = inspect.getattr_static(obj, "fn", None)
        if not type(obj).__module__.startswith("triton.") or not _from_submission(inner):
            return "it is not a @triton.jit kernel defined in the submission"
        return ""
    if kind == "class":
        if type(obj) is not type:
            return "it is not a class defined in the submission (a plain class statement)"
        allowed = base.__mro__ if base is not None and issubclass(obj, base) else ()
        for klass in obj.__mro__[:-1]:
            if klass in allowed:
                continue
            if type.__dict__["__dict__"].__get__(klass).get("__module__") != NAMESPACE:
                name = klass.__qualname__
                return f"it is or subclasses {name}, which the submission did not write"
        return ""
    if not _from_submission(obj):
        return (
            "it is not a function defined in the submission (a def statement; a decorator "
            "must give back a function that wraps it, as @torch.no_grad() does)"
        )
    return ""


def _case(drivers: Any, obj: Any, driver: str, args: Any, budget: float) -> dict[str, Any]:
    from pagedlab.grade.sandbox import run_limited
    from pagedlab.grade.wire import Bounded, plain, reply_of

    def run() -> Any:  # the driver is built inside the budget too
        call = drivers.ADAPTERS[driver](obj) if driver else obj
        return plain(call(*args))

    sink = Bounded()
    sys.stdout = sys.stderr = sink
    try:
        outcome = run_limited(run, (), budget)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    return reply_of(outcome, sink.text())


def main(argv: list[str]) -> int:
    requests, replies, audit = map(int, argv[:3])
    drivers = _load_drivers()
    from pagedlab.grade import watch
    from pagedlab.grade.wire import Gone, receive, send

    me = sys.modules[__name__]
    watch.install(audit, me)
    guard = watch.Snapshot(me)
    module = types.ModuleType(NAMESPACE)  # a module, as a notebook's __main__ is (@dataclass
    sys.modules[NAMESPACE] = module  # looks its class's module up there)
    namespace: dict[str, Any] = module.__dict__
    import pagedlab  # which copy: the grader checks it is its own

    layers = os.environ.pop("PAGEDLAB_JAIL", "")
    send(replies, ("ready", layers, pagedlab.__file__))  # before any learner code
    while True:
        try:
            nonce, message = receive(requests, trusted=True)
        except Gone:
            return 0
        kind = message[0]
        if kind == "cell":
            send(replies, (nonce, _run_cell(message[1], message[2], namespace)))
        elif kind == "entry":  # a str reply: why the entry is refused ("" if it is not)
            name, entry_kind, base = message[1], message[2], drivers.BASES.get(message[3])
            problem = guard.problem()
            if not problem and name not in namespace:
                problem = f"the submission defines no {name}"
            problem = problem or entry_problem(namespace[name], entry_kind, base)
            send(replies, (nonce, problem or watch.shared_code(namespace[name])))
        elif kind == "case":  # a str reply: a watched thing changed (before or during the call)
            _, name, driver, args, budget = message
            reply: Any = guard.problem()
            if not reply:
                reply = _case(drivers, namespace.get(name), driver, args, budget)
                reply = guard.problem() or reply
            send(replies, (nonce, reply))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
