"""One place chooses torch's CPU threads (issue 41): ``pagedlab.model.threads``, and every
way the notebooks run uses it (make lab's script, the site build, the executor)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.model.threads import cpu_threads, thread_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("setting", "cpus", "want"), [("3", 2, 3), ("", 2, 1), ("", 8, 4), ("x", 1, 1), ("0", 2, 1)]
)
def test_omp_num_threads_wins_else_half_the_cores(
    monkeypatch: pytest.MonkeyPatch, setting: str, cpus: int, want: int
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", setting)
    monkeypatch.setattr("os.cpu_count", lambda: cpus)
    assert cpu_threads() == want
    assert thread_env() == {"OMP_NUM_THREADS": str(want), "MKL_NUM_THREADS": str(want)}


def test_every_notebook_runner_takes_the_count_from_it() -> None:
    script = REPO / "pagedlab" / "model" / "threads.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [f"{k}={v}" for k, v in thread_env().items()]
    assert "pagedlab/model/threads.py" in (REPO / "scripts" / "lab.sh").read_text()
    for runner in ("build_site.py", "execute_notebooks.py"):
        assert "os.environ.update(thread_env())" in (REPO / "scripts" / runner).read_text()
