"""Memory at scale: contiguous reservation vs paging under continuous batching (Fig. 2, 13, 18b).

``make_trace`` builds a seeded synthetic workload, ``simulate`` runs one policy over it
(event-driven, exact per step), ``compare_table`` / ``block_size_sweep`` put the results beside
the paper's (``pagedlab.paper``). Each module's docstring says what is and is not modelled.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below load on first use: numpy only when a numpy part is used
    from pagedlab.simulate.accounting import CATEGORIES, FIG2, SimResult
    from pagedlab.simulate.contiguous import BuddyAllocator, FirstFit, buddy_extent
    from pagedlab.simulate.engine import simulate
    from pagedlab.simulate.policies import (
        PAPER_POOL_SLOTS,
        OneRequest,
        Policy,
        orca_max,
        orca_oracle,
        orca_pow2,
        paper_policies,
        reserved_slots,
        vllm,
    )
    from pagedlab.simulate.report import (
        PAPER_MEAN_BATCH,
        PAPER_TOKEN_SHARE,
        SweepRow,
        block_size_sweep,
        breakdown_table,
        compare_table,
        sweep_table,
    )
    from pagedlab.simulate.step_cost import StepCost
    from pagedlab.simulate.workload import MAX_LEN, WORKLOADS, Trace, make_trace

# Each name's module. Importing ``pagedlab.simulate`` loads none of them, so its numpy-free
# modules (``reservation``, ``contiguous``, ``validate``) import in a browser (Pyodide).
_HOMES: dict[str, str] = {
    name: f"pagedlab.simulate.{module}"
    for module, names in (
        ("accounting", "CATEGORIES FIG2 SimResult"),
        ("contiguous", "BuddyAllocator FirstFit buddy_extent"),
        ("engine", "simulate"),
        ("policies", "PAPER_POOL_SLOTS OneRequest Policy paper_policies reserved_slots"),
        ("policies", "orca_max orca_oracle orca_pow2 vllm"),
        ("report", "PAPER_MEAN_BATCH PAPER_TOKEN_SHARE SweepRow block_size_sweep"),
        ("report", "breakdown_table compare_table sweep_table"),
        ("step_cost", "StepCost"),
        ("workload", "MAX_LEN WORKLOADS Trace make_trace"),
    )
    for name in names.split()
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


__all__ = [
    "CATEGORIES",
    "FIG2",
    "MAX_LEN",
    "PAPER_MEAN_BATCH",
    "PAPER_POOL_SLOTS",
    "PAPER_TOKEN_SHARE",
    "WORKLOADS",
    "BuddyAllocator",
    "FirstFit",
    "OneRequest",
    "Policy",
    "SimResult",
    "StepCost",
    "SweepRow",
    "Trace",
    "block_size_sweep",
    "breakdown_table",
    "buddy_extent",
    "compare_table",
    "make_trace",
    "orca_max",
    "orca_oracle",
    "orca_pow2",
    "paper_policies",
    "reserved_slots",
    "simulate",
    "sweep_table",
    "vllm",
]
