"""``python -m pagedlab.grade SUBMISSION.ipynb [...] [--json results.json]``: see README.md,
"For instructors". Exit status 0 when grading ran (whatever the score), 2 on bad usage."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pagedlab.grade.reaper import kill_descendants, set_subreaper
from pagedlab.grade.runner import grade


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pagedlab.grade",
        description="Grade pagedlab exercise notebooks out of process (Gradescope's results.json).",
    )
    parser.add_argument("submissions", nargs="+", type=Path, help="the learner's .ipynb files")
    parser.add_argument("--json", type=Path, help="write Gradescope's results.json here")
    parser.add_argument(
        "--notebook",
        action="append",
        default=[],
        help="grade every exercise of this notebook (e.g. 02); repeatable",
    )
    parser.add_argument(
        "--exercise",
        action="append",
        default=[],
        help="grade this exercise (its EXERCISES name); repeatable",
    )
    parser.add_argument(
        "--salt",
        help="a fixed secret salt for the held-back cases "
        "(default: a fresh random one per run); never publish it",
    )
    args = parser.parse_args(argv)
    set_subreaper()  # every orphan a submission leaves comes to this process (Linux)
    for path in args.submissions:
        if not path.is_file():
            parser.error(f"no such notebook: {path}")
    try:
        results = grade(args.submissions, args.notebook, args.exercise, args.salt)
    except ValueError as error:
        parser.error(str(error))
    kill_descendants()  # nothing the submission started may outlive grading, nor write this
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
