"""The grading child is caged (``pagedlab.grade.jail``): it cannot see, signal or read the grader.

One grading run of one notebook whose cell tries, as a hostile submission would, to reach the
grader: find its command line (the ``--json`` path, the ``--salt``), read its memory, kill it
after forging results.json, write a root-owned file, reach the network. The graded function is
right only if every attempt failed, and prints which ones did not. Linux, as root (Gradescope's
setup): the layers the kernel refuses are said in results.json, and the test says which.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.exercises.test_grade import ROOT, notebook

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.getuid() != 0, reason="the cage needs Linux, root"
)

HOSTILE = """import glob, json, os, signal, socket

SUCCEEDED = []
for status in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        words = open(status, "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"--json" in words:
        pid = int(status.split("/")[2])
        SUCCEEDED.append("saw the grader's command line")
        if b"s3cret" in words:
            SUCCEEDED.append("read the salt")
        try:
            open(f"/proc/{{pid}}/mem", "rb").read(1)
            SUCCEEDED.append("opened the grader's memory")
        except OSError:
            pass
        path = words[words.index(b"--json") + 1].decode()
        try:
            json.dump({{"score": 99.0, "tests": []}}, open(path, "w"))
            SUCCEEDED.append("forged results.json")
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
            SUCCEEDED.append("killed the grader")
        except OSError:
            pass
try:
    open({owned!r}, "a").write("pwned")
    SUCCEEDED.append("wrote a root-owned file")
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    SUCCEEDED.append("reached the network")
except OSError:
    pass


def my_blocks_needed(num_tokens, block_size):
    if SUCCEEDED:
        print("the submission", ", ".join(SUCCEEDED))
        return -1
    return -(-num_tokens // block_size)
"""


def test_the_child_cannot_reach_the_grader(tmp_path: Path) -> None:
    """Fails before the cage: the child found the grader by its command line (salt and
    results path on it), forged results.json and SIGKILLed it (exit -9)."""
    owned = tmp_path / "owned-by-root"
    owned.write_text("")
    owned.chmod(0o644)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    cell = HOSTILE.format(owned=str(owned), port=listener.getsockname()[1])
    path = notebook(tmp_path / "hostile.ipynb", [cell])
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "pagedlab.grade", str(path), "--exercise", "blocks_needed",
         "--salt", "s3cret", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    listener.close()
    assert run.returncode == 0, (run.returncode, run.stderr)
    results = json.loads(out.read_text())
    assert results["score"] == 1.0, results["tests"][0]["output"]
    assert owned.read_text() == ""
    layers = results["extra_data"]["isolation"]
    assert {"pid", "uid", "network", "rlimits", "no_new_privs"} <= set(layers), layers
    assert layers["pid"] == "own namespace" and layers["uid"].startswith("65534"), layers
    assert "isolation layers not in place" not in run.stdout


def test_a_missing_layer_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the cage is not there (not Linux here, simulated), every layer says so."""
    from pagedlab.grade import cage

    said = cage.layers(("ready", ""))
    assert set(said) == set(cage.LAYERS) and all("unavailable" in v for v in said.values())
    assert len(cage.missing(said)) == len(cage.LAYERS)
    assert "uid: the grader's own" in cage.missing({"uid": "the grader's own (1000: not root)"})[0]


@pytest.mark.skipif(
    not (shutil.which("setpriv") and Path("/usr/bin/python3").exists()),
    reason="needs setpriv and a Python every user can run",
)
def test_not_root_the_cage_still_has_its_namespaces() -> None:
    """A grader that is not root gets its PID, network and IPC namespaces in a user namespace
    of its own (where the kernel allows one); the uid layer says it is the grader's own."""
    from pagedlab.grade import jail

    probe = "import os; print(os.getpid(), os.environ['PAGEDLAB_JAIL'])"
    # a copy nobody can read: a fresh clone may sit under a 0700 folder (mktemp -d)
    folder = Path(tempfile.mkdtemp())
    folder.chmod(0o755)
    readable = Path(shutil.copy(jail.__file__, folder / "jail.py"))
    readable.chmod(0o644)
    run = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3",
         str(readable), '{"uid": 65534, "gid": 65534, "limits": {}}', "--",
         "/usr/bin/python3", "-c", probe],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    pid, said = run.stdout.split(" ", 1)
    layers = json.loads(said)
    assert pid == "1" and layers["network"] == layers["pid"] == "own namespace", run.stdout
    assert "the grader's own" in layers["uid"]
