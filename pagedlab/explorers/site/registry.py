"""Every explorer of the package, one entry each: what the site shows of it.

The notebook shows the class, the static site its declared frames and Play, the live page (entries
with a ``live`` part) the same declaration with the torch-free half of its render
(:mod:`pagedlab.explorers.views`). ``tests/explorers/site/test_registry.py`` checks one entry per
``Explorer`` subclass, naming its module. Torch-free: classes are named, never imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pagedlab.explorers.views.allocation import ALLOCATION_EXPLORER, allocation_view
from pagedlab.explorers.views.controls import Declaration
from pagedlab.explorers.views.scheduler import SCHEDULER_EXPLORER, scheduler_view
from pagedlab.explorers.views.sharing import (
    PREFIX_EXPLORER,
    SHARING_EXPLORER,
    prefix_view,
    sharing_view,
)
from pagedlab.explorers.views.shown import View
from pagedlab.pictures.control_scenes import LAYOUTS


class Live(NamedTuple):
    """An explorer's live half: its declaration (the class's own) and its torch-free render,
    which takes one keyword per declared control and returns a :class:`View`."""

    declaration: Declaration
    render: Callable[..., View]


class Entry(NamedTuple):
    """One explorer: its class name, the module under ``pagedlab.explorers`` that defines it,
    and its live half (None: frames only on the site)."""

    name: str
    module: str
    live: Live | None = None


def _allocation(block_size: object, length: object, layout: object = LAYOUTS[1]) -> View:
    """The allocation view with the page's readout: the outside checks' "blocks N, physical
    [...]" form, and a line saying the kernel's output needs torch."""
    shown = allocation_view(block_size, length, layout)  # type: ignore[arg-type]
    t = shown.state.table
    readout = shown.readout.replace(
        f"blocks {len(t.blocks)} · physical", f"blocks {len(t.blocks)}, physical", 1
    )
    readout += (
        "<br><i>live in this page: the real allocator and block table; the Triton kernel's "
        "output needs torch (run the notebook in JupyterLab)</i>"
    )
    return shown._replace(readout=readout)


#: Every explorer, in the notebooks' order. Adding one: its module, and one line here.
REGISTRY: tuple[Entry, ...] = (
    Entry("ReservationExplorer", "waste"),
    Entry("BlockSizeExplorer", "waste"),
    Entry("AllocationExplorer", "allocation", Live(ALLOCATION_EXPLORER, _allocation)),
    Entry("KernelExplorer", "kernel"),
    Entry("SharingExplorer", "sharing", Live(SHARING_EXPLORER, sharing_view)),
    Entry("PrefixCacheExplorer", "sharing", Live(PREFIX_EXPLORER, prefix_view)),
    Entry("EvictionExplorer", "sharing"),
    Entry("BatchExplorer", "batch"),
    Entry("SchedulerExplorer", "scheduler", Live(SCHEDULER_EXPLORER, scheduler_view)),
    Entry("EngineExplorer", "engine"),
    Entry("HitRateExplorer", "hit_rate"),
    Entry("PartialHitExplorer", "hit_rate"),
    Entry("RouterExplorer", "router"),
)
