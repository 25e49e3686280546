"""No process the submission starts outlives grading: the grader reaps orphans and kills them.

A grading child runs in a session of its own, killed whole with ``killpg``; but a learner's
cell can fork, call ``setsid`` and leave that group, then wait for the grader to exit and
rewrite ``results.json``. On Linux :func:`reaping` makes this process a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``): every orphaned descendant, in whatever session, is
reparented to it, so :func:`kill_descendants` finds them all among its own children
(``/proc/*/stat``) and kills them. Elsewhere both do nothing (no error).

Invariants
    * :func:`kill_descendants` returns only once this process has no child left but those in
      ``spare`` (or after its time bound): a process being killed hands its own children to
      this process before it can be reaped, so the loop ends with no descendant at all.
    * ``spare``: the children this process had before grading began (an in-process caller's
      own), never killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Collection, Iterator
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
KILL_S = 10.0  # at most this long in one kill_descendants (a process stuck in the kernel)


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _is_subreaper() -> bool:
    prctl = _prctl()
    if prctl is None:
        return False
    flag = ctypes.c_int(0)
    ok = prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    return ok and flag.value != 0


def set_subreaper(on: bool = True) -> bool:
    """True if this process now is (or is no longer, ``on`` False) a child subreaper."""
    prctl = _prctl()
    if prctl is None:
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)


def children() -> set[int]:
    """The process ids whose parent is this process (running or not yet reaped); empty where
    there is no ``/proc``."""
    me, found = os.getpid(), set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the
        # last ")"
        fields = text[text.rfind(b")") + 1 :].split()
        if len(fields) >= 2 and fields[1].isdigit() and int(fields[1]) == me:
            found.add(int(name))
    return found


def kill_descendants(spare: Collection[int] = (), seconds: float = KILL_S) -> int:
    """SIGKILL and reap every child of this process not in ``spare``, again and again until
    none is left (the killed ones' own children come to this process: :func:`reaping`);
    returns how many it reaped."""
    deadline = time.monotonic() + seconds
    reaped = 0
    while time.monotonic() < deadline:
        found = children() - set(spare)
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        waiting = set(found)
        while waiting and time.monotonic() < deadline:
            for pid in list(waiting):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere, or not ours after all
                    done = pid
                if done:
                    waiting.discard(pid)
                    reaped += 1
            if waiting:
                time.sleep(0.002)
    return reaped


@contextlib.contextmanager
def reaping() -> Iterator[set[int]]:
    """This process as the subreaper of everything started inside (Linux); yields the children
    it already had (to spare). On the way out kills every other descendant and puts the
    subreaper setting back as it was."""
    before = _is_subreaper()
    set_subreaper(True)
    spare = children()
    try:
        yield spare
    finally:
        kill_descendants(spare)
        if not before:
            set_subreaper(False)
