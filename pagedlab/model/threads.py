"""How many CPU threads torch computes with: chosen here, once, for every way pagedlab runs.

Torch's default is one OpenMP thread per core. On a 2-core laptop that also runs JupyterLab,
a browser and other work, those threads spin against each other: SmolLM2's "Ask it" cell
took 84-113 s with two threads and 8 s with one (issue 41; ``benchmarks/bench_engine.py``
prints both). So: ``OMP_NUM_THREADS`` when it is set, else half the cores, at least one.
``make lab`` (``scripts/lab.sh``), ``scripts/build_site.py`` and
``scripts/execute_notebooks.py`` put :func:`thread_env` in the kernels' environment;
notebook 10 calls :func:`use_cpu_threads` (a kernel started some other way too). Run as a
script, it prints the environment for a shell: ``export $(python pagedlab/model/threads.py)``.
"""

from __future__ import annotations

import os


def cpu_threads() -> int:
    """``OMP_NUM_THREADS`` if it is a positive integer, else half the CPUs (at least 1)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else max(1, (os.cpu_count() or 1) // 2)


def thread_env() -> dict[str, str]:
    """The environment that gives a new process :func:`cpu_threads` compute threads."""
    return dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS"), str(cpu_threads()))


def use_cpu_threads() -> int:
    """Set torch's compute threads in this process to :func:`cpu_threads`; returns them."""
    import torch

    torch.set_num_threads(cpu_threads())
    return torch.get_num_threads()


if __name__ == "__main__":
    print(" ".join(f"{name}={value}" for name, value in thread_env().items()))
