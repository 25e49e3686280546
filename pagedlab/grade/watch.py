"""What the grading child guards before the learner's code runs, and how it tells the grader.

:func:`install` adds an audit hook (``sys.addaudithook``: nothing removes it) that refuses,
and reports on the grader's write-only audit pipe: importing a grader (``pagedlab.exercises``,
``pagedlab.grade`` but :data:`ALLOWED`), opening a grader's file or a loaded pagedlab module's
(a fresh, unguarded copy), setting ``__code__``/``__defaults__``/``__kwdefaults__`` of a
pagedlab function (but to its own or a driver's refusal), and ``gc`` scans of every object.
:class:`Snapshot` records by identity every global and class attribute of the modules the
grading relies on (:data:`WATCHED`, this child, ``ADAPTERS``, ``BASES``); :meth:`~Snapshot.
problem` names the first change (checked before an entry is looked up and around each case).
:func:`shared_code` names a learner function whose bytecode is pagedlab's own.

Invariant: the hook holds no mutable state (frozen sets in its closure; the ``gc`` scans that
would reach them are refused). What ``ctypes`` undoes in-process is not claimed: the cage
(:mod:`pagedlab.grade.jail`) keeps the grader out of reach.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

GRADERS = ("pagedlab.exercises", "pagedlab.grade")
ALLOWED = ("pagedlab.exercises", "pagedlab.grade.drivers", "pagedlab.grade.sandbox",
           "pagedlab.grade.wire", "pagedlab.grade.kernel_drivers")  # fmt: skip
WATCHED = ("pagedlab.grade", "pagedlab.memory", "pagedlab.ground.checks")
SCANS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
PAGEDLAB = os.sep + "pagedlab" + os.sep
MIN_SHARED = 24  # bytes of bytecode: shorter functions may coincide honestly


def _functions(modules: list[types.ModuleType]) -> Iterator[types.FunctionType]:
    for module in modules:
        for value in list(vars(module).values()):
            if type(value) is types.FunctionType:
                yield value
            elif isinstance(value, type) and value.__module__ == module.__name__:
                for item in list(vars(value).values()):
                    item = getattr(item, "__func__", item)  # staticmethod, classmethod
                    if type(item) is types.FunctionType:
                        yield item


def _pagedlab() -> list[types.ModuleType]:
    named = sorted(sys.modules.items())
    return [m for n, m in named if n.split(".")[0] == "pagedlab" and type(m) is types.ModuleType]


def install(pipe: int, main: types.ModuleType) -> None:
    """Add the audit hook; ``pipe``: the fd of the grader's audit pipe."""
    modules = [*_pagedlab(), main]
    functions = frozenset(_functions(modules))
    from pagedlab.grade import drivers

    refusals = (drivers._calls_policy, drivers._builds_block_table, drivers._builds_prefix_cache)
    codes = frozenset([f.__code__ for f in functions] + [f.__code__ for f in refusals])
    files = frozenset(str(getattr(m, "__file__", "") or "") for m in modules) - {""}
    folders = tuple(os.path.normpath(os.path.join(os.path.dirname(drivers.__file__), "..", d))
                    + os.sep for d in ("exercises", "grade"))  # fmt: skip
    stems = tuple(name.rsplit(".", 1)[1] for name in ALLOWED[1:])  # drivers, sandbox, ...

    write = os.write

    def refuse(what: str, report: bool = True) -> None:
        if report:
            with contextlib.suppress(OSError):  # the pipe is gone: the grader sees it closed
                write(pipe, (what.replace("\n", " ") + "\n").encode("utf-8", "backslashreplace"))
        raise PermissionError(f"refused while a submission is graded: {what}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and str(args[0]).startswith(GRADERS) and args[0] not in ALLOWED:
            refuse(f"the submission imported {args[0]}, a grader")
        elif event == "open" and isinstance(args[0], str):
            path = os.path.normpath(args[0])
            if path in files:  # a second copy of a loaded module (a traceback's lines: none)
                refuse(f"opening {os.path.basename(path)} again", report=False)
            elif path.startswith(folders) and os.path.basename(path).split(".")[0] not in stems:
                refuse(f"the submission opened {os.path.basename(path)}, a grader's file")
        elif event in SCANS:  # the way to this hook's closure, and to any object
            refuse(f"the submission called {event}")
        elif (
            event == "object.__setattr__"
            and (args[0] in functions or args[0] in mine)
            and (args[1] != "__code__" or args[2] not in codes)
        ):
            refuse(f"the submission changed {args[0].__qualname__}.{args[1]}")

    mine = frozenset([hook, refuse])
    sys.addaudithook(hook)


class Snapshot:
    """Identity of every global and class attribute of the :data:`WATCHED` modules."""

    def __init__(self, main: types.ModuleType) -> None:
        from pagedlab.grade import drivers

        modules = [m for m in _pagedlab() if m.__name__.startswith(WATCHED)] + [main]
        self.entries: tuple[tuple[str, dict[str, Any], str, Any], ...] = tuple(
            (label, space, key, value)
            for label, space in self._spaces(modules, drivers)
            for key, value in list(space.items())
        )
        self.loaded = frozenset(n for n in sys.modules if n.startswith(GRADERS))

    @staticmethod
    def _spaces(modules: list[types.ModuleType], drivers: Any) -> Iterator[tuple[str, Any]]:
        yield "drivers.ADAPTERS", drivers.ADAPTERS
        yield "drivers.BASES", drivers.BASES
        for module in modules:
            yield module.__name__, vars(module)
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == module.__name__:
                    yield f"{module.__name__}.{value.__qualname__}", vars(value)

    def problem(self) -> str:
        """ "" while nothing watched changed, else the first change, in words."""
        for label, space, key, value in self.entries:
            if space.get(key, space) is not value:
                return f"the submission changed pagedlab's {label}[{key!r}]"
        new = sorted(n for n in sys.modules if n.startswith(GRADERS) and n not in self.loaded
                     and n not in ALLOWED)  # fmt: skip
        return f"the submission imported {new[0]}, a grader" if new else ""


def shared_code(obj: Any) -> str:
    """The first function of ``obj`` (a class: its methods) whose bytecode and names are those
    of a pagedlab function ("" if none): rebuilt from pagedlab's code, not written."""
    ours = {
        (f.__code__.co_code, f.__code__.co_names)
        for f in _functions(_pagedlab())
        if len(f.__code__.co_code) >= MIN_SHARED and PAGEDLAB in f.__code__.co_filename
    }  # fmt: skip (a dataclass's generated methods are not pagedlab's own)
    classes = [k for k in obj.__mro__ if not k.__module__.startswith(("pagedlab", "builtins"))
               ] if isinstance(obj, type) else []  # fmt: skip
    items = [v for k in classes for v in vars(k).values()] if classes else [obj]
    for item in items:
        item = getattr(item, "__func__", item)
        code = getattr(item, "__code__", None) if type(item) is types.FunctionType else None
        if code is not None and (code.co_code, code.co_names) in ours:
            return f"{item.__qualname__} is pagedlab's own code (rebuilt from its code object)"
    return ""
