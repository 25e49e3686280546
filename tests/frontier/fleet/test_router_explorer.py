"""RouterExplorer: the weight moves only the KV-aware run; weight 0 is least-loaded."""

from __future__ import annotations

import pytest

from pagedlab.explorers.router import RouterExplorer


def test_the_weight_moves_only_the_kv_aware_router() -> None:
    explorer = RouterExplorer()
    rr, ll, kv = explorer.state
    assert kv.hit_rate > max(rr.hit_rate, ll.hit_rate) and "kv-aware: hit" in explorer.readout.value
    explorer.set(overlap_weight=0)
    assert explorer.state[:2] == [rr, ll]
    assert explorer.state[2].per_engine() == ll.per_engine()  # load only
    with pytest.raises(ValueError, match="num_engines"):
        explorer.set(num_engines=7)
    assert explorer.num_engines.value == 3
