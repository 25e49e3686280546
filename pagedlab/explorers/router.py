"""RouterExplorer (notebook 12): one multi-tenant trace through three routers, live.

Each move reruns :func:`pagedlab.frontier.fleet.routing.route_trace` on the same seeded trace; the
round-robin and least-loaded runs do not depend on ``overlap_weight`` (kept per engine count).
"""

from __future__ import annotations

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Play
from pagedlab.frontier.fleet.routing import POLICIES, RouteStats, multi_tenant_trace, route_trace
from pagedlab.pictures.routing import routers_figure

WEIGHTS = (0, 1, 2, 4, 8, 16)
ENGINES = (2, 3, 4, 5, 6)


class RouterExplorer(Explorer):
    """Controls ``overlap_weight``, ``num_engines``: three routers on one trace."""

    DECLARATION = Declaration(
        "RouterExplorer",
        (
            Choice("overlap_weight", WEIGHTS, "overlap weight", 4, slider=True),
            Choice("num_engines", ENGINES, "engines", 3, slider=True),
        ),
        frames={"overlap_weight": list(WEIGHTS)},
        play=Play("overlap_weight"),
    )
    WIDGET_ARGS = {"continuous_update": False}

    def __init__(self, **initial: object) -> None:
        self.trace = multi_tenant_trace()
        self._fixed: dict[tuple[str, int], RouteStats] = {}
        super().__init__(**initial)

    def runs(self, overlap_weight: int, num_engines: int) -> list[RouteStats]:
        """The three routers' runs at this setting (the weight-free ones computed once)."""
        for policy in POLICIES[:2]:
            if (policy, num_engines) not in self._fixed:
                self._fixed[policy, num_engines] = route_trace(self.trace, policy, num_engines)
        kv = route_trace(self.trace, "kv-aware", num_engines, overlap_weight=overlap_weight)
        return [self._fixed[p, num_engines] for p in POLICIES[:2]] + [kv]

    def render(self, overlap_weight: int, num_engines: int) -> View:
        runs = self.runs(overlap_weight, num_engines)
        readout = " · ".join(
            f"{r.policy}: hit <b>{100 * r.hit_rate:.1f} %</b>, prefill {r.prefill_tokens:,} "
            f"tokens, imbalance {r.imbalance:.2f}, mean TTFT {1000 * r.mean_ttft:.1f} ms"
            for r in runs
        )
        return View(runs, routers_figure(runs, num_engines), readout)
