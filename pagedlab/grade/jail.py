"""The grading child's cage: ``python jail.py SPEC -- PROGRAM ARGS...`` (run by path: stdlib only).

Before the learner's code exists, as far as the kernel allows: new PID, mount, network and IPC
namespaces (``unshare``); a fork, whose child is PID 1 of the new PID namespace, mounts its own
``/proc`` and dies with this process (``PR_SET_PDEATHSIG``), and with it every process it ever
starts (the kernel kills a PID namespace whole once its PID 1 ends, ``setsid`` or not); rlimits
(address space, CPU seconds, processes, open files, file size, no core); then, when this runs
as root, a switch to an unprivileged uid/gid with no supplementary groups; then
``PR_SET_NO_NEW_PRIVS`` and the exec. ``SPEC`` is JSON: ``uid``, ``gid``, ``limits`` (rlimit
name -> value).

Invariant: each layer is tried on its own; one the kernel refuses is left out and named, with
the reason, in the environment variable ``PAGEDLAB_JAIL`` ("layer: how" lines) that the child
reports to the grader before any learner code runs. This process forwards the exit status.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x20000, 0x8000000, 0x40000000, 0x20000000
CLONE_NEWUSER = 0x10000000
MS_REC, MS_PRIVATE, MS_BIND = 0x4000, 0x40000, 0x1000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
LIMITS = {"as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "nproc": "RLIMIT_NPROC",
          "nofile": "RLIMIT_NOFILE", "fsize": "RLIMIT_FSIZE", "core": "RLIMIT_CORE"}  # fmt: skip


def _why() -> str:
    return os.strerror(ctypes.get_errno())


def namespaces(libc: ctypes.CDLL, said: dict[str, str]) -> bool:
    """unshare each namespace, alone; True if a PID namespace was made (fork next). Not root:
    first a user namespace (where the kernel allows it) mapping only this uid, to hold them."""
    uid, gid = os.getuid(), os.getgid()
    if uid != 0 and libc.unshare(CLONE_NEWUSER) == 0:
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
    for name, flag in (("network", CLONE_NEWNET), ("ipc", CLONE_NEWIPC)):
        ok = libc.unshare(flag) == 0
        said[name] = "own namespace" if ok else f"unavailable ({_why()})"
    ok = libc.unshare(CLONE_NEWPID | CLONE_NEWNS) == 0
    said["pid"] = "own namespace" if ok else f"unavailable ({_why()})"
    return ok


def own_proc(libc: ctypes.CDLL, said: dict[str, str]) -> None:
    """In the new PID namespace: a private mount tree and a /proc of its own."""
    private = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    ok = private and libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                None) == 0  # fmt: skip
    if not ok:
        said["pid"] += f", but /proc is the host's ({_why()})"


def reach(libc: ctypes.CDLL, needs: list[str], said: dict[str, str]) -> None:
    """Make each folder in ``needs`` reachable by any uid in this mount namespace only: a
    folder on its way that others cannot enter (``/root``, holding the interpreter) is covered
    with an empty tmpfs holding only the entries on those ways (bind mounts of the real ones).
    The rest of that folder is hidden from the child."""
    covers: dict[str, set[str]] = {}
    for need in needs:
        parts = os.path.realpath(need).split("/")[1:]
        for depth in range(1, len(parts)):
            folder = "/" + "/".join(parts[:depth])
            if os.path.isdir(folder) and not os.stat(folder).st_mode & 0o001:
                covers.setdefault(folder, set()).add(parts[depth])
    for folder in sorted(covers, key=lambda f: f.count("/")):  # outer first: inner ones are
        names = covers[folder]  # then reached through the outer's bind mounts
        kept = {n: os.open(os.path.join(folder, n), os.O_PATH) for n in names
                if os.path.lexists(os.path.join(folder, n))}  # fmt: skip
        if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                      b"mode=0755,size=1m") != 0:  # fmt: skip
            said["reach"] = f"{folder} could not be covered ({_why()})"
            return
        for name, fd in kept.items():
            target = os.path.join(folder, name)
            os.mkdir(target, 0o755)
            libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, MS_BIND | MS_REC,
                       None)  # fmt: skip
            os.close(fd)
    if covers:
        through = ", ".join(sorted(covers))
        said["reach"] = f"only the ways to the interpreter and pagedlab through {through}"


def limits(wanted: dict[str, int], said: dict[str, str]) -> None:
    done = []
    for key, value in wanted.items():
        which = int(getattr(resource, LIMITS[key]))
        try:
            resource.setrlimit(which, (value, value))
            done.append(f"{key}={value}")
        except (ValueError, OSError, AttributeError) as error:
            done.append(f"{key} unavailable ({error})")
    said["rlimits"] = ", ".join(done)


def drop(uid: int, gid: int, said: dict[str, str]) -> None:
    if os.getuid() != 0:
        said["uid"] = f"the grader's own ({os.getuid()}: not root, no other uid to switch to)"
        return
    try:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        said["uid"] = f"{uid} (gid {gid}, no groups)"
    except OSError as error:
        said["uid"] = f"root: switching to {uid} failed ({error})"


def main(argv: list[str]) -> int:
    spec, program = json.loads(argv[0]), argv[2:]
    said: dict[str, str] = {}
    libc = ctypes.CDLL(None, use_errno=True)
    if namespaces(libc, said):
        pid = os.fork()
        if pid:  # outside: wait, forward the status; our death ends the namespace
            signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status) % 256
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # (its group is killed too)
        own_proc(libc, said)
        if os.getuid() == 0:
            reach(libc, spec.get("needs", []), said)
    limits(spec["limits"], said)
    drop(spec["uid"], spec["gid"], said)
    ok = libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    said["no_new_privs"] = "set" if ok else f"unavailable ({_why()})"
    os.environ["PAGEDLAB_JAIL"] = json.dumps(said)
    os.execv(program[0], program)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
