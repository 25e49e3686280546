"""Where pagedlab's Triton kernels run, decided once, before anything imports Triton.

``BACKEND`` is one of:

- ``"compiled"``: a CUDA device is visible and ``TRITON_INTERPRET`` is not set to a true
  value; tensors live on ``device() == cuda``.
- ``"interpreter"``: no CUDA device (or the user set ``TRITON_INTERPRET=1``). We set
  ``TRITON_INTERPRET=1`` ourselves when the user left it unset; Triton then runs every
  program as numpy on the CPU: same source, same results, no speed. ``device() == cpu``.
- ``"unavailable"``: no ``triton`` package (pagedlab installs it on Linux x86_64 only), or
  ``TRITON_INTERPRET=0`` without CUDA. pagedlab still imports; :func:`require_triton` raises
  a ``RuntimeError`` pointing to ``pagedlab.reference_attention`` (plain torch, everywhere).

Triton reads ``TRITON_INTERPRET`` when ``@triton.jit`` decorates a function, so it must be
set before :mod:`pagedlab.attention.kernels` is imported. ``import torch`` does not import
Triton (``tests/attention/test_kernel_grid.py`` checks it in a fresh interpreter), and this
module never imports it. A kernel decorated *before* ``import pagedlab`` was built for a GPU
("0 active drivers" on a CPU): importing pagedlab after ``triton`` warns, and
:func:`stale_kernel` says so for one kernel.

Invariant: ``pagedlab/__init__.py`` imports this module first; nothing in pagedlab imports
``triton`` except :mod:`pagedlab.attention.kernels`, which imports this module first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import sys
import warnings
from typing import Literal

import torch

Backend = Literal["compiled", "interpreter", "unavailable"]

# Exactly the spellings Triton itself accepts (its C++ getenv_bool: case-insensitive, no
# whitespace); anything else Triton ignores, so we treat it as unset, never as "yes".
_TRUE = {"1", "true", "on"}
_FALSE = {"0", "false", "off"}


def _decide() -> tuple[Backend, str]:
    """Return the backend and a short reason; may set ``TRITON_INTERPRET=1``."""
    try:
        found = importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):  # e.g. sys.modules["triton"] = None, a broken install
        found = False
    if not found:
        return "unavailable", (
            f"the triton package is not installed (pagedlab installs it on Linux x86_64; this is "
            f"{platform.system()} {platform.machine()})"
        )
    user = os.environ.get("TRITON_INTERPRET")
    if user is not None and user.lower() in _TRUE:
        return "interpreter", "TRITON_INTERPRET=1 was set by the user"
    has_cuda = torch.cuda.is_available()
    if user is not None and user.lower() in _FALSE:
        if has_cuda:
            return "compiled", "CUDA device found (TRITON_INTERPRET=0 set by the user)"
        return "unavailable", "TRITON_INTERPRET=0 was set by the user but no CUDA device exists"
    if has_cuda:
        return "compiled", "CUDA device found"
    os.environ["TRITON_INTERPRET"] = "1"
    if user is not None:
        return "interpreter", (
            f"no CUDA device, so pagedlab set TRITON_INTERPRET=1 (Triton ignores {user!r})"
        )
    return "interpreter", "no CUDA device, so pagedlab set TRITON_INTERPRET=1"


BACKEND: Backend
REASON: str
_TRITON_FIRST = "triton" in sys.modules  # imported before pagedlab could set the variable
BACKEND, REASON = _decide()
_STALE = (  # under 200 characters with a name: the exercise checks show that much of an error
    "was defined before import pagedlab set TRITON_INTERPRET=1, so Triton built it for a GPU "
    "('0 active drivers' here): run its cell again"
)
if _TRITON_FIRST and BACKEND == "interpreter" and "pagedlab set" in REASON:
    message = (
        f"triton was imported before pagedlab: a kernel that {_STALE}. After a kernel restart, "
        "run `import pagedlab` before any cell that defines a kernel."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=2)


def stale_kernel(kernel: object) -> str | None:
    """Why the Triton kernel ``kernel`` cannot run here, or None if nothing stops it.

    Not None exactly when pagedlab runs the interpreter and ``kernel`` is a compiled
    ``JITFunction``: it was decorated before ``TRITON_INTERPRET=1`` was set.
    """
    if BACKEND != "interpreter" or "triton" not in sys.modules:
        return None  # a kernel exists only once triton is imported; never import it here
    from triton.runtime.jit import JITFunction

    if not isinstance(kernel, JITFunction):
        return None
    return f"{getattr(kernel, '__name__', 'this kernel')} {_STALE}"


def device() -> torch.device:
    """The device pagedlab's kernels read from: ``cuda`` when compiled, else ``cpu``."""
    return torch.device("cuda" if BACKEND == "compiled" else "cpu")


def runs_on(where: torch.device) -> bool:
    """Whether the Triton kernels can read tensors on ``where`` here: cuda when compiled,
    cpu in the interpreter."""
    return (BACKEND, where.type) in {("compiled", "cuda"), ("interpreter", "cpu")}


def on_device(where: torch.device) -> contextlib.AbstractContextManager[object]:
    """Make ``where`` the current CUDA device for a launch (Triton launches on the current
    device, so tensors on ``cuda:1`` need ``cuda:1`` current); a no-op for the CPU."""
    if where.type == "cuda":
        return torch.cuda.device(where)
    return contextlib.nullcontext()


def describe() -> str:
    """One line for a notebook's environment cell (the line above it prints the versions)."""
    if BACKEND == "compiled":
        return f"Triton compiled for {torch.cuda.get_device_name(0)} ({REASON})"
    if BACKEND == "interpreter":
        return f"Triton interpreter on the CPU ({REASON}): checks correctness, not speed"
    return f"Triton unavailable ({REASON}); use pagedlab.reference_attention"


def require_triton() -> None:
    """Raise RuntimeError with a way forward when the Triton kernels cannot run here."""
    if BACKEND == "unavailable":
        raise RuntimeError(
            f"pagedlab's Triton kernels need Linux x86_64 with the triton package "
            f"(and a CUDA GPU or TRITON_INTERPRET=1): {REASON}. "
            "pagedlab.reference_attention computes the same result in plain torch."
        )
