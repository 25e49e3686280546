"""How long does each notebook take under strict nbval? Prints one line per notebook.

All notebooks run in one pytest process, as the test command runs them (a fresh kernel per
notebook, strict comparison); a notebook's time is the sum of its cells' setup, call and
teardown, so it includes its kernel's start and imports but not pytest's own start.
Targets: each notebook <= 12 s, the whole series <= 60 s on a 2-core machine.

Each kernel computes on one thread (``OMP_NUM_THREADS=1``), as under ``make test`` (the
root conftest.py sets it for every xdist worker and the kernels they start): with torch's
default of one thread per core, a kernel on a busy 2-core machine spins against the other
jobs (SmolLM2's 48-token answers in notebook 10 took 52 s instead of 4 s).

Run: python benchmarks/bench_notebooks.py [notebooks/NN_name.ipynb ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(paths: list[str]) -> int:
    notebooks = paths or [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("notebooks/*.ipynb"))]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            + ["-o", "junit_duration_report=total", f"--junitxml={report}", *notebooks],
            cwd=ROOT,
            env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        seconds: dict[str, float] = defaultdict(float)
        for case in ET.parse(report).iter("testcase"):
            seconds[case.get("classname", "")] += float(case.get("time", 0))
    for name, total in seconds.items():
        print(f"{name.removeprefix('notebooks.'):36s} {total:5.1f} s")
    print(f"{'all notebooks':36s} {sum(seconds.values()):5.1f} s  (pytest wall {wall:.1f} s)")
    if run.returncode:
        print(run.stdout[-3000:])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
