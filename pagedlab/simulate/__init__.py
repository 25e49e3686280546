"""Memory at scale: contiguous reservation vs paging under continuous batching (Fig. 2, 13, 18b).

``make_trace`` builds a seeded synthetic workload, ``simulate`` runs one policy over it
(event-driven, exact per step), ``compare_table`` / ``block_size_sweep`` put the results beside
the paper's (``pagedlab.ground.paper``). Each module's docstring says what is and is not modelled.
"""

from __future__ import annotations

import importlib
from typing import Any

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
        ("report", "PAPER_MEAN_BATCH SweepRow block_size_sweep"),
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


__all__ = sorted(_HOMES)  # each name loads on first use: numpy only when a numpy part is used
