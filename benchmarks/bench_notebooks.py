"""How long does each notebook take under strict nbval? Prints one line per notebook.

Each notebook runs in its own pytest process, exactly as the test command runs it (fresh
kernel, strict comparison), so the time includes the kernel's start and its imports.
Targets: each notebook <= 12 s, the whole series <= 60 s on a 2-core machine.

Run: python benchmarks/bench_notebooks.py [notebooks/NN_name.ipynb ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(paths: list[str]) -> int:
    notebooks = [Path(p) for p in paths] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    total, failed = 0.0, []
    for notebook in notebooks:
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(notebook)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
        total += seconds
        status = "passed" if run.returncode == 0 else "FAILED"
        if run.returncode:
            failed.append(notebook.name)
        print(f"{notebook.name:36s} {seconds:5.1f} s  {status}")
    print(f"{'all notebooks':36s} {total:5.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
