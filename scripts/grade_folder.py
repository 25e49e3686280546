"""Grade a folder of submissions locally, several at once, with a progress bar.

``python scripts/grade_folder.py SUBMISSIONS/ --out RESULTS/ [--jobs N]``: each entry of
SUBMISSIONS (a folder holding one student's notebooks, or a single .ipynb) is graded by its own
``python -m pagedlab.grade`` (caged, its own fresh salt, ``--total-seconds`` bound), N at a time
(default: the CPU count), each result written to RESULTS/<entry>.json; then one line per
submission (score, seconds) and the slowest ones. The exit status is 0 when every grading ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


def grade_one(entry: Path, out: Path, total_s: float) -> tuple[str, float, float]:
    """(name, score, seconds) of one submission; score -1 when grading did not run."""
    notebooks = sorted(entry.rglob("*.ipynb")) if entry.is_dir() else [entry]
    result = out / f"{entry.stem}.json"
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pagedlab.grade", *map(str, notebooks), "--json", str(result),
         "--total-seconds", str(total_s)],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    seconds = time.monotonic() - began
    (out / f"{entry.stem}.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0 or not notebooks:
        return entry.name, -1.0, seconds
    return entry.name, float(json.loads(result.read_text())["score"]), seconds


def bar(done: int, total: int, began: float) -> str:
    width = 30
    filled = width * done // max(total, 1)
    elapsed = time.monotonic() - began
    left = elapsed / done * (total - done) if done else 0.0
    shown = "#" * filled + "." * (width - filled)
    return f"\r[{shown}] {done}/{total}  {elapsed:.0f} s, ~{left:.0f} s left"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--total-seconds", type=float, default=600.0)
    args = parser.parse_args()
    entries = sorted(p for p in args.submissions.iterdir() if p.is_dir() or p.suffix == ".ipynb")
    args.out.mkdir(parents=True, exist_ok=True)
    began, rows = time.monotonic(), []
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(grade_one, e, args.out, args.total_seconds) for e in entries]
        for done, future in enumerate(as_completed(futures), start=1):
            rows.append(future.result())
            print(bar(done, len(entries), began), end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for name, score, seconds in sorted(rows):
        print(f"{name:40}  {'did not run' if score < 0 else f'{score:g}':>11}  {seconds:6.1f} s")
    slowest = sorted(rows, key=lambda row: -row[2])[:3]
    print("slowest:", ", ".join(f"{n} ({s:.0f} s)" for n, _, s in slowest))
    return 0 if all(score >= 0 for _, score, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
