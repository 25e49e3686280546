"""How many CPU threads torch computes with: chosen here, once, for every way pagedlab runs.

Torch's default, a thread per core, spins on a busy 2-core laptop: SmolLM2's "Ask it" took
84-113 s with two threads and 8 s with one (issue 41; ``benchmarks/bench_engine.py`` times
both). So: ``OMP_NUM_THREADS`` if set, else half the cores, at least one. ``scripts/lab.sh``
(``make lab``), ``build_site.py`` and ``execute_notebooks.py`` give the kernels
:func:`thread_env`; notebook 10 sets :func:`cpu_threads` itself. As a script it prints the
environment for a shell: ``export $(python pagedlab/model/threads.py)``.
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


if __name__ == "__main__":
    print(" ".join(f"{name}={value}" for name, value in thread_env().items()))
