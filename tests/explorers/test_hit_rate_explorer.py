"""pagedlab.explorers.hit_rate: moves redraw from real caches; bad values change nothing."""

from __future__ import annotations

import pytest

from pagedlab.explorers.hit_rate import HitRateExplorer, PartialHitExplorer


def test_hit_rate_explorer_moves_and_refuses() -> None:
    explorer = HitRateExplorer()
    assert "hit rate <b>14.2 %</b>" in explorer.readout.value  # R2 hits what R1 scheduled
    assert "evicted 288" in explorer.readout.value
    explorer.set(block_size=1024)
    assert explorer.state.hit_rate == 0.0 and "0.0 %" in explorer.readout.value
    before = (explorer.picture.value, explorer.readout.value, explorer.state)
    with pytest.raises(ValueError, match="block_size"):
        explorer.set(block_size=3)
    with pytest.raises(TypeError, match="unit"):
        explorer.set(unit=2)
    assert (explorer.picture.value, explorer.readout.value, explorer.state) == before


def test_partial_hit_explorer_moves_and_refuses() -> None:
    explorer = PartialHitExplorer(prefix_match_unit=2)
    alloc, cache, second = explorer.state
    assert second.hit_tokens == 22 and second.copy is not None
    assert cache.pending_copies == [second.copy]
    assert alloc.refcount(second.copy.src) == 2  # the first request's and the kept one
    explorer.set(prefix_match_unit=16)
    assert explorer.state[2].copy is None and "16 of 22" in explorer.readout.value
    before = explorer.readout.value
    with pytest.raises(ValueError, match="prefix_match_unit"):
        explorer.set(prefix_match_unit=3)
    assert explorer.readout.value == before
