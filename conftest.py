"""How the suite splits across pytest-xdist workers (``make test`` runs ``pytest -n auto``).

Two kinds of tests must stay on one worker, in collection order:

- a notebook's cells (nbval): they share one kernel, each cell running after the one above;
- the modules in ``TOGETHER``, whose fixtures take seconds to build (SmolLM2 and its
  ``transformers`` oracle, a session fixture they share): one unit, loaded once, on one worker;
- the browser tests, in two units: those that drive JupyterLab (one server per worker,
  one notebook page open at a time) and the two on the static site (one build, the session
  fixture ``site``). Each worker that runs one starts its own Chromium.

Every other test is a unit of its own and goes to whichever worker is free. The units are
handed out in collection order, which this file sets: the two browser units first (the
longest serial stretches, one per worker from the start), then the notebooks, the SmolLM2
unit and the tests marked slow, then the rest (short tests that even out the end).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import pytest

SITE_BUILDS = ("tests/browser/test_site.py", "tests/browser/test_live_site.py")
TOGETHER = (  # module fixtures that take seconds to load (SmolLM2, the transformers oracle)
    "tests/model/test_pretrained.py",
    "tests/engine/test_smollm2_engine.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: one of the two browser units, its notebook, the
    SmolLM2 modules (``TOGETHER``), or the test itself."""
    path = nodeid.split("::", 1)[0]
    if path in SITE_BUILDS:
        return "browser: the static site"
    if path.startswith("tests/browser/"):
        return "browser: JupyterLab"
    if path in TOGETHER:
        return "SmolLM2: the real model and its transformers oracle"
    if PurePosixPath(path).suffix == ".ipynb":
        return path
    return nodeid


def _rank(item: pytest.Item) -> int:
    """0: the browser units; 1: the other units of several tests, and the tests marked slow
    (tens of seconds each); 2: every other test, short ones that fill the workers' last minutes."""
    unit = unit_of(item.nodeid)
    if unit.startswith("browser"):
        return 0
    return 1 if unit != item.nodeid or item.get_closest_marker("slow") else 2


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, one compute thread per worker (and per notebook kernel it starts): ``-n
    auto`` already runs one worker per core, and two OpenMP pools on one core spin against
    each other (a 576 x 1536 product measured 40x slower with 2 threads on 2 busy cores)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = "1"  # inherited by the Jupyter kernels nbval starts
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser units, then the other long units, then every other test; a stable sort keeps
    the order inside each (a notebook's cells top to bottom)."""
    items.sort(key=_rank)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A notebook cell (nbval) that wrote to stderr fails, even where its outputs are not
    compared (``# NBVAL_IGNORE_OUTPUT``): JupyterLab would show a learner that text in red."""
    result = yield
    outputs = getattr(item, "test_outputs", None) or []  # nbval's, as the kernel sent them
    stderr = [o.get("text", "") for o in outputs if o.get("name") == "stderr"]
    if stderr:
        pytest.fail(f"the cell wrote to stderr:\n{''.join(stderr)[-1500:]}", pytrace=False)
    return result


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, called only under -n
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # hand units out in the order set above

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ByUnit(config, log)
