"""The grader's side of the cage: how a grading child is started, and what it is told.

:func:`wrap` puts :mod:`pagedlab.grade.jail` (run by path) in front of the child's command on
Linux; :func:`environment` is the child's whole environment (an allow-list: no salt, no
results path, nothing of the grader's but what Python, torch and Triton need);
:func:`home` is its working folder, the one place it may write, owned by the uid it runs as;
:func:`not_dumpable` makes the grader's memory unreadable to other uids (and ``ptrace``).
:func:`layers` reads what the child said its cage holds (before any learner code ran);
:func:`missing` names the layers that are not there, for results.json and the table.

Invariant: nothing here fails grading; a layer the machine refuses is named, never fatal.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JAIL = str(Path(__file__).with_name("jail.py"))
USER = "nobody"  # the uid a child runs as when the grader is root
TOTAL_S = 600.0  # a submission's whole grading (every child, every cell and case)
LIMITS = {  # rlimits of a grading child (pagedlab.grade.jail)
    "as": 6 << 30,  # bytes of address space (torch and Triton's interpreter take ~1 GiB)
    "cpu": int(TOTAL_S) + 60,  # CPU seconds (the wall-clock bound is TOTAL_S)
    "nproc": 512,  # processes and threads of its uid
    "nofile": 1024,
    "fsize": 64 << 20,  # bytes of one file it writes
    "core": 0,
}
KEEP = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "VIRTUAL_ENV", "TRITON_INTERPRET",
        "CUDA_VISIBLE_DEVICES", "PAGEDLAB_DEVICE")  # fmt: skip
LAYERS = ("pid", "uid", "network", "ipc", "rlimits", "no_new_privs")
PR_SET_DUMPABLE = 4


def _ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(USER)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _gpu() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_available())


def wrap(command: list[str]) -> list[str]:
    """``command`` run in the cage (Linux), else as it is."""
    if not sys.platform.startswith("linux"):
        return command
    uid, gid = _ids()
    limits = {k: v for k, v in LIMITS.items() if not (k == "as" and _gpu())}  # CUDA maps TiBs
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pagedlab's folder
    needs = [os.path.realpath(sys.executable), os.path.dirname(os.__file__), here, *sys.path]
    spec = json.dumps({"uid": uid, "gid": gid, "limits": limits, "needs": needs})
    return [sys.executable, JAIL, spec, "--", *command]


def home(workdir: str) -> str:
    """``workdir/home``, the child's working folder, owned by the uid it runs as; the grader's
    ``workdir`` itself only traversable by it (its log stays the grader's)."""
    folder = os.path.join(workdir, "home")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.getuid() == 0 and sys.platform.startswith("linux"):
        os.chmod(workdir, 0o711)
        os.chown(folder, *_ids())
    return folder


def environment(folder: str) -> dict[str, str]:
    """The child's environment: the allow-listed variables, one thread, its own home."""
    env = {k: v for k, v in os.environ.items() if k in KEEP}
    env.update(HOME=folder, TMPDIR=folder, TRITON_CACHE_DIR=os.path.join(folder, ".triton"),
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    return env


def layers(ready: Any) -> dict[str, str]:
    """The child's "ready" reply -> layer -> how it holds (or why not)."""
    said: dict[str, str] = {}
    if isinstance(ready, tuple) and len(ready) == 3 and isinstance(ready[1], str) and ready[1]:
        with contextlib.suppress(ValueError):
            said = {str(k): str(v) for k, v in json.loads(ready[1]).items()}
    if not said:
        return dict.fromkeys(LAYERS, f"unavailable (no cage on {sys.platform})")
    return said


def missing(said: dict[str, str]) -> list[str]:
    """ "layer: why" for each layer of ``said`` that does not hold."""
    weak = ("unavailable", "failed", "the grader's own", "the host's")
    return [f"{k}: {v}" for k, v in said.items() if any(w in v for w in weak)]


@contextlib.contextmanager
def not_dumpable() -> Iterator[None]:
    """Inside: this process is not dumpable (no other uid may read its memory or ptrace it;
    its /proc files are root's), as before on the way out."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
    was = prctl(3, 0, 0, 0, 0) if prctl is not None else -1  # PR_GET_DUMPABLE
    if prctl is not None:
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield
    finally:
        if prctl is not None and was > 0:
            prctl(PR_SET_DUMPABLE, was, 0, 0, 0)
