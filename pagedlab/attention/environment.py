"""The first cell of every notebook: what this kernel runs on, in a few printed lines."""

from __future__ import annotations

import platform
from importlib import metadata


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment_report() -> None:
    """Print versions, the device and how the Triton kernel runs (compiled or interpreted)."""
    from pagedlab.attention import backend

    packages = ("pagedlab", "torch", "triton", "numpy", "matplotlib", "ipywidgets")
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}")
    print("  ".join(f"{name} {_version(name)}" for name in packages))
    print(f"kernel backend: {backend.describe()}")
