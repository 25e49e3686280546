"""The Gradescope bundle: ``make autograder``'s zip, its ``run_autograder`` run against a
Gradescope-like root (``/autograder``'s layout in a temporary folder) on three submissions.

Right (notebook 01 done), half done (two of its four exercises, the others still stubs) and
hostile (it reads the grader's command line, forges results.json, kills the grader, loops,
prints megabytes): each results.json is checked against Gradescope's documented format
(the autograder specification: top-level and per-test keys, their types, the visibility
values), and each submission's wall time is printed. setup.sh is not run (it installs into
/autograder/venv); this interpreter stands in for that venv, and the bundle's own copy of
pagedlab is the one imported (PYTHONPATH): the zip holds everything grading needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pagedlab.exercises import in_notebook, stub
from tests.exercises.test_cage import HOSTILE
from tests.exercises.test_grade import ROOT, notebook, right_answer

sys.path.insert(0, str(ROOT / "scripts"))
import build_autograder  # noqa: E402

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
TOP = {"score": (int, float), "execution_time": (int, float), "output": str,
       "output_format": str, "test_output_format": str, "test_name_format": str,
       "visibility": str, "stdout_visibility": str, "extra_data": dict, "tests": list,
       "leaderboard": list}  # fmt: skip
TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str,
        "name_format": str, "number": str, "output": str, "output_format": str, "tags": list,
        "visibility": str, "extra_data": dict}  # fmt: skip


def gradescope_problems(results: Any) -> list[str]:
    """What in ``results`` Gradescope's documented results.json format does not allow."""
    if not isinstance(results, dict):
        return ["not a JSON object"]
    problems = [f"unknown key {k!r}" for k in results if k not in TOP]
    problems += [f"{k} is a {type(v).__name__}" for k, v in results.items()
                 if k in TOP and not isinstance(v, TOP[k])]  # fmt: skip
    if "score" not in results and not all("score" in t for t in results.get("tests", [])):
        problems.append("no score: neither the total nor every test's")
    for key in ("visibility", "stdout_visibility"):
        if key in results and results[key] not in VISIBILITY:
            problems.append(f"{key} {results[key]!r}")
    for number, test in enumerate(results.get("tests", [])):
        problems += [f"test {number}: unknown key {k!r}" for k in test if k not in TEST]
        problems += [f"test {number}: {k} is a {type(v).__name__}" for k, v in test.items()
                     if k in TEST and not isinstance(v, TEST[k])]  # fmt: skip
        if test.get("visibility", "visible") not in VISIBILITY:
            problems.append(f"test {number}: visibility {test['visibility']!r}")
        if test.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"test {number}: status {test['status']!r}")
        if test.get("output_format", "text") not in FORMATS:
            problems.append(f"test {number}: output_format {test['output_format']!r}")
    return problems


def _submissions() -> dict[str, list[str]]:
    names = [e.name for e in in_notebook("01")]
    loud = "print('x' * 5_000_000)\n\n\ndef my_empty_slots(num_tokens, block_size):\n"
    loud += "    print('y' * 5_000_000)\n    while True:\n        pass\n"
    return {
        "right": [right_answer(n) for n in names],
        "half": [right_answer(n) for n in names[:2]] + [stub(n) for n in names[2:]],
        "hostile": [HOSTILE.format(owned="/nonexistent/owned", port=9), loud],
    }


def _run(bundle: Path, root: Path, cells: list[str]) -> tuple[dict[str, Any], float]:
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    (root / "submission").mkdir()
    notebook(root / "submission" / "01_why_paging.ipynb", cells)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PAGEDLAB_PYTHON": sys.executable,
           "PYTHONPATH": str(root / "source"), "PAGEDLAB_TOTAL_S": "120"}  # fmt: skip
    began = time.monotonic()
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    seconds = time.monotonic() - began
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text()), seconds


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_autograder is bash")
def test_run_autograder_on_three_submissions(tmp_path: Path) -> None:
    bundle = build_autograder.build(tmp_path / "autograder.zip")
    names = set(zipfile.ZipFile(bundle).namelist())
    assert {"setup.sh", "run_autograder", "constraints.txt", "pagedlab/grade/jail.py"} <= names
    scores = {}
    for kind, cells in _submissions().items():
        results, seconds = _run(bundle, tmp_path / kind, cells)
        print(f"{kind}: {results['score']:g}/{len(results['tests'])} in {seconds:.1f} s")
        assert gradescope_problems(results) == [], results
        assert results["extra_data"]["isolation"]["pid"] == "own namespace", results
        scores[kind] = [t["score"] for t in results["tests"]]
    assert scores["right"] == [1.0] * 4
    assert scores["half"] == [1.0, 1.0, 0.0, 0.0]
    # every attack failed (the cage), so its blocks_needed is right; the loop and stubs are not
    assert scores["hostile"] == [1.0, 0.0, 0.0, 0.0]


def test_an_empty_submission_still_gets_results(tmp_path: Path) -> None:
    bundle = build_autograder.build(tmp_path / "autograder.zip")
    results, _ = _run(bundle, tmp_path / "empty", [])
    assert gradescope_problems(results) == [] and results["score"] == 0.0, results


def test_the_validator_refuses_what_gradescope_refuses() -> None:
    assert gradescope_problems({"tests": [{"name": "x"}]})  # no score anywhere
    assert gradescope_problems({"score": 1, "visibility": "sometimes", "tests": []})
    assert gradescope_problems({"score": 1, "tests": [{"score": "1", "max_score": 1}]})
