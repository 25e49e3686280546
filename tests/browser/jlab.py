"""Drive JupyterLab in Debian's Chromium: a private server, notebook pages, widget controls.

Handled: starting and stopping one JupyterLab server on 127.0.0.1 (random free port, random
token, every setting, home and runtime folder inside one temporary folder); opening a
notebook, running all its cells and waiting on the status bar's "Idle"; finding problems a
learner would see (error or stderr output, "Error displaying widget", cells that never ran);
ipywidgets controls found by their description: sliders moved with the keyboard, a layout
control (Dropdown, ToggleButtons or RadioButtons), a Play; the text of HTML widgets and the
src of Image widgets.

Not handled: notebooks without a kernelspec in their metadata (JupyterLab would ask which
kernel to start), several kernels at once (the caller shuts kernels down between notebooks),
any browser other than /usr/bin/chromium.

Invariants: every wait has a timeout (the constants below, in milliseconds for the browser
and seconds for the server); the server is stopped by its own pid, never by name; nothing is
written outside the temporary folder given to ``LabServer.start``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # playwright is imported only where a browser is really launched
    from playwright.sync_api import Locator, Page

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
# Headless, no sandbox (containers run as root), and never resolve a host other than ours.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]

SERVER_START_S = 60.0
SERVER_STOP_S = 15.0
PAGE_LOAD_MS = 60_000
KERNEL_IDLE_MS = 60_000
RUN_ALL_MS = 240_000
WIDGET_MS = 15_000

# User settings: no news toast, no autosave (we work on copies anyway), every cell in the DOM.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def private_env(state: Path) -> dict[str, str]:
    """The environment for the server, its kernels and the browser: every home in ``state``,
    but pagedlab's SmolLM2 cache stays the user's (``PAGEDLAB_CACHE``, the folder
    ``smollm2.cache_root`` names; keyed by the GGUF's bytes and checked on read): a private
    one made notebook 10's kernel read the GGUF from scratch and write 0.5 GB (about 18 s)."""
    env = dict(os.environ)
    env["PAGEDLAB_CACHE"] = os.environ.get("PAGEDLAB_CACHE") or str(
        Path.home() / ".cache" / "pagedlab"
    )
    homes = {
        "HOME": "home",
        "JUPYTER_CONFIG_DIR": "jupyter/config",
        "JUPYTER_DATA_DIR": "jupyter/data",
        "JUPYTER_RUNTIME_DIR": "jupyter/runtime",
        "IPYTHONDIR": "ipython",
        "MPLCONFIGDIR": "matplotlib",
        "XDG_CACHE_HOME": "cache",
        "XDG_CONFIG_HOME": "config",
    }
    for name, sub in homes.items():
        path = state / sub
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    env["PYTHONHASHSEED"] = "0"
    env.pop("JUPYTER_PATH", None)
    return env


@dataclass
class LabServer:
    """One JupyterLab server, owned by the test session."""

    base_url: str
    token: str
    root: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    _log_file: Any = field(repr=False, default=None)

    @classmethod
    def start(cls, root: Path, state: Path) -> LabServer:
        """Serve ``root``; settings, homes and the log live in ``state``. Retries a taken port."""
        settings = state / "settings"
        for name, value in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = private_env(state)
        last_error = ""
        for attempt in range(3):
            port, token = _free_port(), secrets.token_hex(24)
            log_path = state / f"jupyter-server-{attempt}.log"
            command = [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--port-retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.terminals_enabled=False",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={state / 'workspaces'}",
                "--LanguageServerManager.autodetect=False",
            ]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                command.append("--allow-root")
            log_file = log_path.open("wb")
            process = subprocess.Popen(
                command,
                cwd=root,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            server = cls(f"http://127.0.0.1:{port}", token, root, log_path, process, log_file)
            try:
                ready = server._wait_ready()
            except BaseException:  # interrupted while starting: never leave it running
                server.stop()
                raise
            if ready:
                return server
            server.stop()
            last_error = server.log_tail()
        raise RuntimeError(f"JupyterLab did not start in 3 attempts; last log:\n{last_error}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                status, _ = self.api("GET", "/api/status")
                if status == 200:
                    return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        return False

    def url(self, path: str) -> str:
        """The browser address of ``path`` (e.g. ``lab/tree/x.ipynb``), token included."""
        return f"{self.base_url}/{path.lstrip('/')}?token={self.token}&reset"

    def api(self, method: str, path: str) -> tuple[int, Any]:
        """Call the server's REST API; returns (HTTP status, decoded JSON or None)."""
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read()
                return response.status, json.loads(body) if body else None
        except urllib.error.HTTPError as error:
            return error.code, None

    def shutdown_kernels(self) -> None:
        """End every session and kernel (one notebook's kernel at a time keeps CI lean)."""
        _, sessions = self.api("GET", "/api/sessions")
        for session in sessions or []:
            self.api("DELETE", f"/api/sessions/{session['id']}")
        _, kernels = self.api("GET", "/api/kernels")
        for kernel in kernels or []:
            self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def stop(self) -> None:
        """SIGTERM to the server's own pid (it shuts its kernels down), SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=SERVER_STOP_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=SERVER_STOP_S)
        if self._log_file is not None:
            self._log_file.close()

    def log_tail(self, chars: int = 6000) -> str:
        text = self.log_path.read_text(errors="replace")
        return text[-chars:]


# --- notebook pages ---------------------------------------------------------------------

_SETTLED_JS = """() => {
  const status = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .some(e => /\\bIdle\\b/.test(e.textContent));
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map(e => e.textContent.trim());
  const queued = prompts.some(p => p.includes('*'));
  const ran = prompts.some(p => /\\[\\d+\\]/.test(p));
  return status && !queued && (ran || prompts.length === 0);
}"""


def wait_idle(page: Page, timeout: float = KERNEL_IDLE_MS) -> None:
    """Wait until the status bar says the kernel is Idle (not the toolbar indicator)."""
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\bIdle\b")).first.wait_for(
        timeout=timeout
    )


def settle(page: Page, quiet_s: float = 1.0) -> None:
    """Wait until the kernel has stayed Idle for ``quiet_s``: every queued widget change done.

    A slider moved by keys updates the page at once but queues one message per step for the
    kernel; what the kernel then sets (other controls, the readout) arrives later.
    """
    deadline = time.monotonic() + WIDGET_MS / 1000
    idle = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\bIdle\b"))
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if idle.count():
            quiet_since = now if quiet_since is None else quiet_since
            if now - quiet_since >= quiet_s:
                return
        else:
            quiet_since = None
        time.sleep(0.05)
    raise AssertionError(f"the kernel did not stay Idle for {quiet_s} s within the timeout")


def open_notebook(page: Page, server: LabServer, path: str) -> None:
    """Open ``path`` (relative to the server root) and wait for its kernel to be idle."""
    page.goto(server.url(f"lab/tree/{path}"), timeout=PAGE_LOAD_MS)
    page.locator(".jp-Notebook").first.wait_for(timeout=PAGE_LOAD_MS)
    wait_idle(page)


def _menu(page: Page, menu: str, item: str) -> None:
    page.get_by_role("menuitem", name=menu, exact=True).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def run_all(page: Page, timeout: float = RUN_ALL_MS) -> None:
    """Clear every output, run all cells, wait until none is queued and the kernel is Idle.

    Clearing first makes "ran" observable: a cell that never ran keeps an empty prompt.
    """
    _menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .every(e => !/\\d/.test(e.textContent))""",
        timeout=WIDGET_MS,
    )
    _menu(page, "Run", "Run All Cells")
    page.wait_for_function(_SETTLED_JS, timeout=timeout)


def problems(page: Page) -> list[str]:
    """What a learner would see go wrong: error/stderr outputs, broken widgets, unrun cells."""
    found = []
    stderr = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    for text in stderr.all_inner_texts():
        found.append(f"error output: {text.strip()[-1500:]}")
    broken = page.get_by_text("Error displaying widget")
    for text in broken.all_inner_texts():
        found.append(f"widget failed: {text.strip()}")
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").all_inner_texts()
    unrun = [i for i, p in enumerate(prompts) if not re.search(r"\[\d+\]", p)]
    if unrun:
        found.append(f"code cells never ran (0-based among code cells): {unrun}")
    return found


# --- widgets ----------------------------------------------------------------------------


def described(scope: Locator | Page, css: str, description: str) -> Locator:
    """Elements matching ``css`` whose widget label is exactly ``description``."""
    # an inner locator for ``has`` is matched inside each candidate: build it from the page
    page = scope.page if hasattr(scope, "page") else scope
    label = page.locator(".widget-label").filter(
        has_text=re.compile(rf"^\s*{re.escape(description)}\s*$")
    )
    return scope.locator(css).filter(has=label)


def slider(scope: Locator | Page, description: str) -> Locator:
    """The (first) ipywidgets slider whose description is exactly ``description``."""
    return described(scope, ".widget-slider", description).first


def slider_value(control: Locator) -> int:
    value = control.locator(".noUi-handle").first.get_attribute("aria-valuenow", timeout=WIDGET_MS)
    if value is None:
        raise AssertionError("slider handle has no aria-valuenow")
    return round(float(value))


def set_slider(control: Locator, value: int) -> None:
    """Move a slider with the arrow keys, one step at a time, until it shows ``value``."""
    handle = control.locator(".noUi-handle").first
    for _ in range(200):
        current = slider_value(control)
        if current == value:
            return
        handle.focus(timeout=WIDGET_MS)
        handle.press("ArrowRight" if current < value else "ArrowLeft")
        wait_for_change(lambda: slider_value(control), current, "slider value after a key press")
    raise AssertionError(f"slider did not reach {value}; it shows {slider_value(control)}")


def choose(scope: Locator, description: str, option: str) -> None:
    """Pick ``option`` in a Dropdown, ToggleButtons or RadioButtons described ``description``."""
    dropdown = described(scope, ".widget-dropdown", description)
    if dropdown.count():
        # option texts show spaces as &nbsp;: pick by value, which is the option itself
        dropdown.first.locator("select").select_option(value=option, timeout=WIDGET_MS)
        return
    toggles = described(scope, ".widget-toggle-buttons", description)
    if toggles.count():
        toggles.first.get_by_role("button", name=option, exact=True).click(timeout=WIDGET_MS)
        return
    radios = described(scope, ".widget-radio", description)
    if radios.count():
        radios.first.get_by_label(option, exact=True).check(timeout=WIDGET_MS)
        return
    raise AssertionError(f"no Dropdown, ToggleButtons or RadioButtons described {description!r}")


def text(widget: Locator) -> str:
    return widget.inner_text(timeout=WIDGET_MS)


def wait_for_change(read: Callable[[], T], old: T, what: str) -> T:
    """Poll ``read()`` until it differs from ``old``; returns the new value."""
    deadline = time.monotonic() + WIDGET_MS / 1000
    while time.monotonic() < deadline:
        new = read()
        if new != old:
            return new
        time.sleep(0.05)
    raise AssertionError(f"{what} did not change within {WIDGET_MS / 1000:.0f} s (still {old!r})")


def wait_until(ok: Callable[[], bool], read: Callable[[], T], what: str) -> T:
    """Poll until ``ok()`` is true; returns ``read()``. Fails after the widget timeout."""
    deadline = time.monotonic() + WIDGET_MS / 1000
    while time.monotonic() < deadline:
        if ok():
            return read()
        time.sleep(0.05)
    raise AssertionError(f"never saw {what!r} within {WIDGET_MS / 1000:.0f} s; last: {read()!r}")
