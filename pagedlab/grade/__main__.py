"""``python -m pagedlab.grade SUBMISSION.ipynb [...] [--json results.json]``: see README.md,
"For instructors". Exit status 0 when grading ran (whatever the score), 2 on bad usage.
results.json is replaced whole (written aside, then renamed): never left empty or partial."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pagedlab.grade.cage import TOTAL_S
from pagedlab.grade.runner import UsageError, grade


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Write ``results`` as JSON to ``path`` atomically (mode 0600): a temporary file in the
    same folder, then ``os.replace``; on any failure ``path`` keeps what it held before."""
    text = json.dumps(results, indent=2, ensure_ascii=False) + "\n"
    folder = path.parent
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)  # the grader's alone: no grading child reads or writes it
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


NEEDS = ("torch", "triton")  # what the graders of notebooks 03, 04, 08, 09, 10 import


def environment_problem() -> str:
    """Why this interpreter cannot grade every exercise ("" if it can): grading with another
    Python (the system's) would score right answers 0."""
    import importlib.util

    absent = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if not absent:
        return ""
    return (
        f"{sys.executable} has no {' and no '.join(absent)}: this is not pagedlab's environment "
        "and right answers would score 0. Run it with the project's Python: "
        ".venv/bin/python -m pagedlab.grade ... (make install builds .venv)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pagedlab.grade",
        description="Grade pagedlab exercise notebooks out of process (Gradescope's results.json).",
    )
    parser.add_argument("submissions", nargs="+", type=Path, help="the learner's .ipynb files")
    parser.add_argument("--json", type=Path, help="write Gradescope's results.json here")
    for flag, what in (("--notebook", "every exercise of this notebook (e.g. 02)"),
                       ("--exercise", "this exercise (its EXERCISES name)")):  # fmt: skip
        parser.add_argument(flag, action="append", default=[], help=f"grade {what}; repeatable")
    parser.add_argument(
        "--salt",
        help="a fixed secret salt for the held-back cases (default: a fresh random one per "
        "run); never publish it; --salt-file keeps it off the command line",
    )
    parser.add_argument("--salt-file", type=Path, help="read the salt from this file")
    parser.add_argument(
        "--total-seconds",
        type=float,
        default=TOTAL_S,
        help=f"bound on one submission's whole grading (default {TOTAL_S:g} s); past it, "
        "the exercises left score 0",
    )
    args = parser.parse_args(argv)
    missing = environment_problem()
    if missing:
        parser.exit(2, f"python -m pagedlab.grade: {missing}\n")
    if args.salt_file is not None:
        args.salt = args.salt_file.read_text(encoding="utf-8").strip() or None
    for path in args.submissions:
        if not path.is_file():
            parser.error(f"no such notebook: {path}")
    try:
        results = grade(
            args.submissions,
            args.notebook,
            args.exercise,
            args.salt,
            started=None if args.json is None else lambda first: write_results(args.json, first),
            total_s=args.total_seconds,
        )
    except UsageError as error:
        parser.error(str(error))
    if args.json is not None:
        write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
