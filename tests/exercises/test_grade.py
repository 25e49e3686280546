"""Instructor mode, ``python -m pagedlab.grade``: right answers grade full, attacks score 0.

The notebook of right answers is built from every exercise's reference solution (renamed to
its entry, with the helpers it calls pasted in), so each solution also proves it pastes and
runs on its own. The attacks are those an answer-reading cheater tries in a notebook: the
caller's frame, a ``gc`` scan, fake replies on the grader's pipe, a table of answers read off
failure messages, ``os._exit``, an endless loop, pagedlab's own classes as the answer, a
learner ``__reduce__`` aimed at the parent, a hung cell.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest

from pagedlab.exercises import EXERCISES, solution
from pagedlab.grade.runner import grade, source_problem
from pagedlab.grade.wire import PlainUnpickler

ROOT = Path(__file__).resolve().parents[2]


def _helpers(fn: Any, seen: set[str]) -> list[str]:
    """Source of the module-level helpers ``fn`` calls, and imports of the names it reads."""
    fn = getattr(fn, "fn", fn)
    module = sys.modules[fn.__module__]
    codes = (
        [fn.__code__]
        if hasattr(fn, "__code__")
        else [m.__code__ for m in vars(fn).values() if isinstance(m, types.FunctionType)]
    )
    out: list[str] = []
    if isinstance(fn, type):  # a subclass of a pagedlab class (the capstone's Scheduler)
        out += [f"from {b.__module__} import {b.__name__}" for b in fn.__bases__ if b is not object]
    for code in codes:
        names = set(code.co_names)
        names |= {n for c in code.co_consts if isinstance(c, types.CodeType) for n in c.co_names}
        for name in sorted(names - seen):
            if name not in module.__dict__:
                continue
            seen.add(name)
            obj = module.__dict__[name]
            if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
                out += [*_helpers(obj, seen), textwrap.dedent(inspect.getsource(obj))]
            elif isinstance(obj, (types.FunctionType, type)):
                out.append(f"from {obj.__module__} import {name}")
            elif isinstance(obj, (str, int, float)):
                out.append(f"{name} = {obj!r}")
    return out


def right_answer(name: str) -> str:
    """A cell holding exercise ``name``'s reference solution under its entry's name."""
    exercise = EXERCISES[name]
    source = textwrap.dedent(str(solution(name)))
    entry = exercise.entry or f"my_{name}"
    source = re.sub(r"^(def|class)\s+\w+", rf"\1 {entry}", source, count=1, flags=re.MULTILINE)
    head = "import math\nfrom bisect import insort\nfrom collections import Counter\n"
    head += "from typing import Any\n" + (exercise.setup + "\n" if exercise.setup else "")
    if "triton" in source:
        head += "import triton\nimport triton.language as tl\n"
    helpers = _helpers(exercise.solution, {getattr(exercise.solution, "__name__", "")})
    return head + "\n" + "\n\n".join(helpers) + "\n\n\n" + source


def notebook(path: Path, cells: list[str]) -> Path:
    code = [
        {"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None}
        for s in cells
    ]
    path.write_text(json.dumps({"cells": code, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_right_answers_grade_full(tmp_path: Path) -> None:
    """Every exercise's reference solution, pasted into a notebook, scores 1 (held back too)."""
    path = notebook(tmp_path / "right.ipynb", [right_answer(n) for n in EXERCISES])
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "pagedlab.grade", str(path), "--json", str(out)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    results = json.loads(out.read_text())
    assert [t["name"] for t in results["tests"]] == list(EXERCISES)
    assert {t["score"] for t in results["tests"]} == {1.0}, run.stdout
    assert results["score"] == float(len(EXERCISES))
    assert all(set(t) == {"name", "score", "max_score", "output", "visibility"}
               for t in results["tests"])  # fmt: skip
    assert "held back" in results["tests"][0]["output"]
    assert f"total{' ' * 5}" in run.stdout or f"{len(EXERCISES)}/{len(EXERCISES)}" in run.stdout


ATTACKS = {
    # the caller's frames: the in-notebook check once held the expected answer there
    "blocks_needed": """import sys

def my_blocks_needed(num_tokens, block_size):
    frame = sys._getframe(1)
    while frame is not None:
        for key in ("like", "expected", "case", "want"):
            if key in frame.f_locals:
                found = frame.f_locals[key]
                return getattr(found, "expected", found)
        frame = frame.f_back
    return 0
""",
    # every object of the process: a Case, or any int list the grader built
    "empty_slots": """import gc

def my_empty_slots(num_tokens, block_size):
    for obj in gc.get_objects():
        if type(obj).__name__ == "Case" and obj.args == (num_tokens, block_size):
            return obj.expected
    return -1
""",
    # fake replies on every pipe of the process, then an answer
    "slot": """import os, pickle, struct

def my_slot(pos, blocks, block_size):
    fake = pickle.dumps(("case", {"value": (0, 0), "raised": None, "timed_out": False,
                                  "printed": ""}))
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", len(fake)) + fake)
        except OSError:
            pass
    return (0, 0)
""",
    # a table of answers read off the notebook's failure messages (the unsalted cases)
    "slot_mapping": "TABLE",
    "new_blocks": """import os

def my_new_blocks(num_tokens, n, block_size):
    os._exit(0)
""",
    "reservation_waste": """def my_reservation_waste(prompt, response, reserved_slots):
    while True:
        try:
            pass
        except BaseException:
            pass
""",
    "block_table": """from pagedlab import BlockTable


class MyBlockTable(BlockTable):
    pass
""",
    # a learner __reduce__ aimed at the parent, with the child's own converter patched out
    "place_newcomer": """import os, sys

MARK = os.environ.get("PAGEDLAB_ATTACK_MARK", "/nonexistent")


class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


for module in list(sys.modules.values()):
    if getattr(module, "_plain", None) is not None:
        module._plain = lambda value, depth=0: value


def my_place_newcomer(refcounts, free_list, need):
    return Boom()
""",
    # a cell whose top-level code never ends: left out, the others still graded
    "must_copy": """def my_must_copy(num_tokens, block_size, refcount):
    return True


while True:
    pass
""",
}


def _table_attack() -> str:
    cases = EXERCISES["slot_mapping"].cases()
    table = {repr(c.args): c.expected for c in cases}
    return (
        f"TABLE = {table!r}\n\n\ndef my_slot_mapping(blocks, num_tokens, block_size):\n"
        "    return TABLE.get(repr((blocks, num_tokens, block_size)), [])\n"
    )


def test_attacks_score_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = tmp_path / "reduce-ran"
    monkeypatch.setenv("PAGEDLAB_ATTACK_MARK", str(mark))
    cells = [_table_attack() if src == "TABLE" else src for src in ATTACKS.values()]
    cells.append(right_answer("pick_victim"))  # graded after every attack: still full marks
    path = notebook(tmp_path / "attacks.ipynb", cells)
    printed: list[str] = []
    names = [*ATTACKS, "pick_victim"]
    results = grade([path], names=names, say=printed.append, cell_budget_s=20.0)
    scores = {t["name"]: t["score"] for t in results["tests"]}
    assert scores == {**dict.fromkeys(ATTACKS, 0.0), "pick_victim": 1.0}, printed
    assert not mark.exists(), "a learner __reduce__ ran in the grading process"
    outputs = {t["name"]: t["output"] for t in results["tests"]}
    assert "subclasses BlockTable" in outputs["block_table"]
    assert "no answer within" in outputs["reservation_waste"]
    assert "process ended" in outputs["new_blocks"]
    assert "wrote to the grader's pipe" in outputs["slot"]
    assert "held back" in outputs["slot_mapping"]  # the table knew every case but those
    assert "top-level code ran too long" in printed[-1]


def test_held_back_answers_are_never_printed(tmp_path: Path) -> None:
    """A wrong answer failing only on held-back cases: no expected value in the output."""
    table = _table_attack()
    path = notebook(tmp_path / "table.ipynb", [table])
    printed: list[str] = []
    results = grade([path], names=["slot_mapping"], say=printed.append, salt="s3cret")
    output = results["tests"][0]["output"]
    assert "held back: its inputs and answer are not shown" in output
    assert "expected" not in output and "inputs:" not in output


def test_a_notebook_grades_as_run_top_to_bottom(tmp_path: Path) -> None:
    """A first try and then a fix, in cells that also import and call the checks (as a
    course notebook does): the checks do nothing in the child, the last definition counts."""
    first_try = (
        "from pagedlab.exercises import EXERCISES\n\n"
        "def my_blocks_needed(num_tokens, block_size):\n"
        "    return num_tokens // block_size      # a first try\n\n"
        'EXERCISES["blocks_needed"].check(my_blocks_needed)\n'
    )
    fix = right_answer("blocks_needed") + '\n\nEXERCISES["blocks_needed"].check(my_blocks_needed)\n'
    path = notebook(tmp_path / "two_tries.ipynb", [first_try, fix])
    results = grade([path], names=["blocks_needed"], say=lambda text: None)
    assert results["score"] == 1.0, results
    only_first = notebook(tmp_path / "first_try.ipynb", [first_try])
    results = grade([only_first], names=["blocks_needed"], say=lambda text: None)
    assert results["score"] == 0.0 and "case 1 of" in results["tests"][0]["output"], results


def test_notebook_00_runs_its_first_try_only(tmp_path: Path) -> None:
    """Notebook 00 shows a wrong first try and leaves the fix to notebook 01: graded as it is
    committed, blocks_needed scores 0 (the check in its cell does nothing in the child)."""
    path = ROOT / "notebooks" / "00_start_here.ipynb"
    results = grade([path], names=["blocks_needed"], say=lambda text: None)
    assert results["score"] == 0.0, results


def test_source_rules() -> None:
    """The entry must be the submission's own: a def, a class of its own, one binding."""
    from pagedlab.grade.runner import Cell

    def cells(src: str) -> list[Cell]:
        return [Cell(0, "cell 0", src, {"my_f", "MyT"})]

    assert source_problem(cells("def my_f(x):\n    return x\n"), "my_f", "function") == ""
    assert "assigned" in source_problem(cells("def my_f(x): ...\nmy_f = len\n"), "my_f", "function")
    assert "imported" in source_problem(
        cells("from math import floor as my_f\ndef my_f(x): ...\n"), "my_f", "function"
    )
    assert "subclasses" in source_problem(cells("class MyT(dict):\n    pass\n"), "MyT", "class")
    assert (
        source_problem(cells("class B:\n    pass\nclass MyT(B):\n    pass\n"), "MyT", "class") == ""
    )
    decorated = "import torch\n@torch.no_grad()\ndef my_f(x): ...\n"  # the child judges it
    assert source_problem(cells(decorated), "my_f", "function") == ""
    assert "@triton.jit" in source_problem(cells(decorated), "my_f", "kernel")
    capstone = "from pagedlab.memory.scheduler import Scheduler\nclass MyT(Scheduler):\n    pass\n"
    assert source_problem(cells(capstone), "MyT", "class", "Scheduler") == ""  # its driver's base
    assert "subclasses Scheduler" in source_problem(cells(capstone), "MyT", "class")


def test_replies_load_no_class() -> None:
    import io
    import pickle

    assert PlainUnpickler(io.BytesIO(pickle.dumps(([1, 2.5], (True, None), "x")))).load()
    with pytest.raises(pickle.UnpicklingError):
        PlainUnpickler(io.BytesIO(pickle.dumps(Path("/")))).load()
    with pytest.raises(pickle.UnpicklingError, match="os.system"):
        PlainUnpickler(io.BytesIO(b"")).find_class("os", "system")


def test_cli_refuses_a_missing_notebook(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pagedlab.grade", str(tmp_path / "none.ipynb")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 2 and "no such notebook" in run.stderr


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m pagedlab.grade ARGS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "pagedlab.grade", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


# a cell that leaves a daemon behind: it forks, leaves the child's process group (setsid), forks
# again, then waits for the grader to exit and rewrites results.json to full marks
DAEMON = """import json, os, time
_grader, _started, _pwned = os.getppid(), {started!r}, {pwned!r}
_pid = os.fork()
if _pid == 0:
    try:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open(_started, "w").close()
                while True:
                    try:
                        os.kill(_grader, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.005)
                open(_pwned, "w").close()
                path = {results!r}
                r = json.load(open(path))
                for t in r["tests"]:
                    t["score"] = t["max_score"]
                r["score"] = float(len(r["tests"]))
                open(path, "w").write(json.dumps(r))
    finally:
        os._exit(0)
os.waitpid(_pid, 0)
while not os.path.exists(_started):
    time.sleep(0.005)


def my_blocks_needed(num_tokens, block_size):
    return 0
"""


def test_a_daemon_the_submission_leaves_dies_with_grading(tmp_path: Path) -> None:
    """S1: a process that left the child's process group (setsid) is killed before the grader
    writes results.json, so it never rewrites it after the grader exits."""
    shared = Path(tempfile.mkdtemp(prefix="pagedlab-daemon-"))  # the caged child may write here
    shared.chmod(0o777)
    started, pwned, out = shared / "started", shared / "pwned", shared / "results.json"
    cell = DAEMON.format(started=str(started), pwned=str(pwned), results=str(out))
    path = notebook(tmp_path / "daemon.ipynb", [cell])
    run = _cli(str(path), "--exercise", "blocks_needed", "--json", str(out))
    assert run.returncode == 0, run.stderr
    time.sleep(1.0)  # the daemon polls every 5 ms for the grader's exit
    assert started.exists(), "the daemon never started: the test tests nothing"
    assert not pwned.exists(), "a process the submission started outlived the grader"
    results = json.loads(out.read_text())
    assert results["score"] == 0.0 and results["tests"][0]["score"] == 0.0, results
    shutil.rmtree(shared)


def test_a_lone_surrogate_in_learner_text_grades_to_zero(tmp_path: Path) -> None:
    """S3: text that UTF-8 cannot encode (a print, an exception's message, a cell's error)
    is written escaped; results.json is valid and those exercises score 0."""
    cells = [
        'def my_blocks_needed(num_tokens, block_size):\n    print("\\ud800 hello")\n    return 0\n',
        'def my_empty_slots(num_tokens, block_size):\n    raise ValueError("bad \\udcff")\n',
        'raise RuntimeError("cell \\udfff")\n\n\ndef my_slot(pos, blocks, block_size):\n'
        "    return (0, 0)\n",
    ]
    path = notebook(tmp_path / "surrogates.ipynb", cells)
    out = tmp_path / "results.json"
    names = ["--exercise", "blocks_needed", "--exercise", "empty_slots", "--exercise", "slot"]
    run = _cli(str(path), *names, "--json", str(out))
    assert run.returncode == 0, run.stderr
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [t["score"] for t in results["tests"]] == [0.0, 0.0, 0.0], results
    outputs = {t["name"]: t["output"] for t in results["tests"]}
    assert "\\ud800 hello" in outputs["blocks_needed"]
    assert "bad \\udcff" in outputs["empty_slots"]
    assert "cell \\udfff" in run.stdout  # the cell's error, in the notes


def test_results_are_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    """A results.json that cannot be written leaves the one before untouched, and no stray
    temporary file."""
    from pagedlab.grade.__main__ import write_results

    out = tmp_path / "results.json"
    write_results(out, {"score": 1.0, "tests": []})
    assert out.stat().st_mode & 0o777 == 0o600  # the grader's alone (the child runs as nobody)
    with pytest.raises(UnicodeEncodeError):
        write_results(out, {"score": 0.0, "tests": [], "output": "\ud800"})
    assert json.loads(out.read_text()) == {"score": 1.0, "tests": []}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_notebook_nested_too_deep_is_unreadable_and_scores_zero(tmp_path: Path) -> None:
    """M1: JSON nested past Python's recursion limit is an unreadable notebook: said so, the
    exercises asked for score 0, results.json written (no traceback)."""
    deep = "[" * 200_000 + "]" * 200_000
    cell = '{"cell_type": "code", "source": "def my_blocks_needed(n, b):\\n    return 0\\n", '
    text = '{"cells": [' + cell + '"metadata": {"x": ' + deep + "}}]}"
    path = tmp_path / "deep.ipynb"
    path.write_text(text)
    out = tmp_path / "results.json"
    run = _cli(str(path), "--exercise", "blocks_needed", "--json", str(out))
    assert run.returncode == 0, run.stderr
    results = json.loads(out.read_text())
    assert results["score"] == 0.0 and results["tests"][0]["score"] == 0.0, results
    assert "deep.ipynb: not a readable notebook" in results["output"]
    assert "not a readable notebook" in run.stdout
    # nothing asked for and nothing readable: still a results.json with 0, not a usage error
    run = _cli(str(path), "--json", str(out))
    assert run.returncode == 0, run.stderr
    results = json.loads(out.read_text())
    assert results["score"] == 0.0 and results["tests"] == []
    assert "nothing to grade" in results["output"]


def test_a_submission_that_kills_its_parent_leaves_a_zero(tmp_path: Path) -> None:
    """M2: results.json is written (every exercise 0, "did not finish") before any learner
    code runs; a cell that SIGKILLs its parent (the grader, before the cage) now ends only
    its own cage: the grader finishes, the exercise scores 0."""
    cell = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n\n\n"
        "def my_blocks_needed(num_tokens, block_size):\n    return 0\n"
    )
    path = notebook(tmp_path / "kill.ipynb", [cell])
    out = tmp_path / "results.json"
    run = _cli(str(path), "--exercise", "blocks_needed", "--json", str(out))
    assert run.returncode in (0, -9), (run.returncode, run.stderr)  # -9: no cage (not Linux)
    results = json.loads(out.read_text())
    assert results["score"] == 0.0 and len(results["tests"]) == 1, results


def test_undoing_the_import_guard_fails_the_exercise(tmp_path: Path) -> None:
    """S2 (the easy way only): a cell that drops the child's import guard to import a
    reference solution, or a function that does it during a case and puts it back, fails
    with a clear message; a fresh child grades the next exercise."""
    one_line = (
        "import sys, importlib\n"
        'sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_Refuse"]\n'
        '_nb01 = importlib.import_module("pagedlab.exercises.nb01")\n\n\n'
        "def my_blocks_needed(num_tokens, block_size):\n"
        "    return _nb01.blocks_needed(num_tokens, block_size)\n"
    )
    results = grade(
        [notebook(tmp_path / "a.ipynb", [one_line])], names=["blocks_needed"], say=lambda text: None
    )
    output = results["tests"][0]["output"]
    assert results["score"] == 0.0 and "nb01.py, a grader's file" in output, results
    during = (
        "import sys, importlib\n\n\n"
        "def my_empty_slots(num_tokens, block_size):\n"
        "    saved = sys.meta_path[:]\n"
        '    sys.meta_path[:] = [f for f in saved if type(f).__name__ != "_Refuse"]\n'
        '    solution = importlib.import_module("pagedlab.exercises.nb01").empty_slots\n'
        "    sys.meta_path[:] = saved\n"
        "    return solution(num_tokens, block_size)\n"
    )
    path = notebook(tmp_path / "b.ipynb", [during, right_answer("pick_victim")])
    results = grade([path], names=["empty_slots", "pick_victim"], say=lambda text: None)
    scores = {t["name"]: t["score"] for t in results["tests"]}
    assert scores == {"empty_slots": 0.0, "pick_victim": 1.0}, results
    assert "a grader's file" in results["tests"][0]["output"], results


def test_another_python_is_refused_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: the system's Python (no torch) once scored a right submission 0/4; now the
    grader refuses to run and says which Python to use."""
    from pagedlab.grade import __main__ as cli

    monkeypatch.setattr(cli, "NEEDS", ("torch", "no_such_module_pagedlab"))
    path = notebook(tmp_path / "a.ipynb", [right_answer("blocks_needed")])
    with pytest.raises(SystemExit) as stop:
        cli.main([str(path)])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "has no no_such_module_pagedlab" in error and ".venv/bin/python" in error


# each a capstone that passed empty before: the child's replay patched, pagedlab's code reused
PATCHES = {
    "block_table": """from pagedlab import BlockTable
from pagedlab.grade import drivers

drivers.ADAPTERS["table"] = lambda cls: lambda *args: drivers.table_log(BlockTable, *args)


class MyBlockTable:
    pass
""",
    "append_cow": """from pagedlab.grade import drivers


def _real(fn):
    def run(*args):
        return cow_log(None, *args)

    return run


try:
    drivers.adapt_cow.__code__ = _real.__code__
except PermissionError:
    pass


def my_append_cow(allocator, blocks, num_tokens):
    return blocks
""",
    "prefix_cache": """from pagedlab.grade import drivers


class MyPrefixCache:
    def __init__(self, block_size):
        drivers.Admissions.apply = lambda self, event: None

    def lookup(self, tokens):
        return []

    def register(self, blocks, tokens):
        pass
""",
    "scheduler_step": """import types

import pagedlab.memory.scheduler as _module
from pagedlab.memory.scheduler import Scheduler


class MyScheduler(Scheduler):
    pass


for _name in ("policy", "_admit_whole", "_decode", "_admit_chunks"):
    _f = getattr(Scheduler, _name)
    setattr(MyScheduler, _name, types.FunctionType(_f.__code__, vars(_module), _name,
                                                    _f.__defaults__, _f.__closure__))
""",
}


def test_nothing_the_submission_changes_counts(tmp_path: Path) -> None:
    """Issue 38: a patched replay adapter (at the top level, by ``__code__``, or from inside
    the learner's own method) and a scheduler rebuilt from Scheduler's code objects passed
    with no line written; now each scores 0 and says why. A cell that tampers taints every
    exercise graded after it (a right answer too); a method that tampers, its own exercise."""

    def run(names: list[str], *extra: str, tainted: bool = False) -> dict[str, str]:
        cells = [PATCHES[n] for n in names] + [right_answer(n) for n in extra]
        path = notebook(tmp_path / f"{names[0]}.ipynb", cells)
        results = grade([path], names=[*names, *extra], say=lambda text: None)
        said = {t["name"]: t["output"] for t in results["tests"]}
        assert results["score"] == (0 if tainted else len(extra)), said
        return said

    said = run(["scheduler_step", "prefix_cache"], "pick_victim")
    assert "policy is pagedlab's own code" in said["scheduler_step"], said
    assert "drivers.Admissions['apply']" in said["prefix_cache"], said
    said = run(["block_table"], "pick_victim", tainted=True)
    assert said["block_table"].endswith("changed pagedlab's drivers.ADAPTERS['table']"), said
    assert "changed pagedlab's drivers.ADAPTERS['table']" in said["pick_victim"], said
    said = run(["append_cow"])
    assert "the submission changed adapt_cow.__code__" in said["append_cow"], said


def test_a_submission_has_a_total_time_bound(tmp_path: Path) -> None:
    """Issue 38: a killed child reran every cell, with no bound on the whole (an hour per
    submission at worst); past ``total_s`` what is left scores 0, said so."""
    loop = "def my_blocks_needed(num_tokens, block_size):\n    while True:\n        pass\n"
    path = notebook(tmp_path / "slow.ipynb", [loop, right_answer("empty_slots")])
    results = grade([path], names=["blocks_needed", "empty_slots"], say=lambda t: None, total_s=2)
    # 2 s: less than one case's budget, so the loop alone uses up the bound, whatever the load
    assert [t["score"] for t in results["tests"]] == [0.0, 0.0], results
    assert "grading stopped: this submission used up its 2 s" in results["tests"][1]["output"]
