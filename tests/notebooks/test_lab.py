"""`make lab` as the README runs it: scripts/lab.sh, started for real on a free port.

The Makefile's ``lab`` target is one line, ``BIN=$(BIN) bash scripts/lab.sh $(LAB_ARGS)``
(checked below with ``make -n``), so running the script here runs what ``make lab`` runs,
plus a port, ``--no-browser`` and two settings that keep the start quiet. Every home,
config and runtime folder points into a temporary folder; the server is stopped by its own
process group, never by name. CI runs as root, so there this checks the ``--allow-root``
path; as another user it checks that the flag is left out.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
START_S = 90.0

pytestmark = pytest.mark.server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _private_env(state: Path) -> dict[str, str]:
    env = dict(os.environ, BIN=str(BIN))
    for name in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        (state / name).mkdir()
        env[name] = str(state / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_TOKEN", None)  # the token must be the one Jupyter makes up itself
    return env


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # report a 302 as it is, instead of following it to the login page


def _status(url: str) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:  # not listening yet (URLError is an OSError)
        return 0


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port``, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_make_lab_runs_the_script():
    if not (REPO / "Makefile").exists() or subprocess.run(["which", "make"]).returncode:
        pytest.skip("make is not installed")
    # Under `make test` this runs inside make: drop the parent's flags, which would make the
    # child print "Entering/Leaving directory" lines around the command.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", ".venv/.pagedlab-installed", "lab",
         "LAB_ARGS=--port=1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )  # fmt: skip
    line = dry.stdout.strip().splitlines()[-1]
    assert line.startswith("BIN=") and line.endswith(" bash scripts/lab.sh --port=1"), line


def test_lab_serves_loopback_with_token_only(tmp_path):
    if not (BIN / "jupyter-lab").exists():
        pytest.skip(f"JupyterLab is not installed in {BIN} (pip install -e '.[lab]')")
    port = _free_port()
    log_path = tmp_path / "lab.log"
    extra = [
        "--no-browser",
        f"--port={port}",
        "--port-retries=0",
        "--ServerApp.terminals_enabled=False",
        "--LanguageServerManager.autodetect=False",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "lab.sh"), *extra],
            cwd=tmp_path,
            env=_private_env(tmp_path),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        info = _wait_for_server(process, tmp_path / "JUPYTER_RUNTIME_DIR", log_path)
        base = f"http://127.0.0.1:{port}"
        token = info["token"]
        assert len(token) >= 32, "token authentication must be on, with a generated token"
        assert _status(f"{base}/api/status?token={token}") == 200
        assert _status(f"{base}/api/status") == 403
        assert _status(f"{base}/api/status?token=wrong{token}") == 403
        lab = _status(f"{base}/lab")
        assert lab in (302, 403), f"/lab without a token answered {lab}"
        if os.path.exists("/proc/net/tcp"):
            assert _listening_addresses(port) == {"0100007F"}, "listens on 127.0.0.1 only"
        text = log_path.read_text(errors="replace")
        said_why = "lab: running as root" in text and "--allow-root" in text
        assert said_why == (os.geteuid() == 0), text[-2000:]
        assert "Running as root is not recommended" not in text
    finally:
        _stop(process)


def _wait_for_server(process: subprocess.Popen[bytes], runtime: Path, log: Path) -> dict:
    """The server's runtime record (port, token) once it answers; fails with the log's tail."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"lab.sh exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        for record in runtime.glob("jpserver-*.json"):
            try:
                info = json.loads(record.read_text())
            except (OSError, json.JSONDecodeError):  # being written right now
                continue
            url = f"http://127.0.0.1:{info.get('port')}/api/status?token={info.get('token')}"
            if info.get("token") and _status(url) == 200:
                return info
        time.sleep(0.5)
    pytest.fail(f"no server after {START_S:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)  # its own session: the server and its kernels
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
