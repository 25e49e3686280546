"""Notebook 11's explorers: why a prefix cache hits 0 %, and partial hits with copy-on-write.

``HitRateExplorer`` classifies every prompt token of
:func:`pagedlab.pictures.control_scenes.miss_workload` (:mod:`pagedlab.frontier.miss_reasons`);
``PartialHitExplorer`` admits two prompts sharing 22 tokens through ``PartialPrefixCache`` (vLLM
0.34's ``prefix_match_unit``, a divisor of 16).
"""

from __future__ import annotations

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Play
from pagedlab.frontier.miss_reasons import REASONS
from pagedlab.pictures.control_scenes import PARTIAL_SHARED, miss_scene, partial_hit_scene
from pagedlab.pictures.in_2026 import miss_bars, partial_hit

MISS_BLOCK_SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 1056)
UNITS = (1, 2, 4, 8, 16)


class HitRateExplorer(Explorer):
    """Control ``block_size``: the same eight prompts, every token's reason redrawn."""

    DECLARATION = Declaration(
        "HitRateExplorer",
        (Choice("block_size", MISS_BLOCK_SIZES, "block size", 16, slider=True),),
        frames={"block_size": list(MISS_BLOCK_SIZES)},
        play=Play("block_size"),
    )
    WIDGET_ARGS = {"continuous_update": False}

    def render(self, block_size: int) -> View:
        classifier = miss_scene(block_size)
        totals = classifier.totals()
        parts = ", ".join(f"{r} {totals[r]}" for r in REASONS[1:] if totals[r])
        readout = (
            f"block size {block_size}: hit rate <b>{100 * classifier.hit_rate:.1f} %</b> "
            f"({totals['hit']} of {sum(totals.values())} prompt tokens); misses: {parts}"
        )
        return View(classifier, miss_bars(classifier.results, block_size), readout)


class PartialHitExplorer(Explorer):
    """Control ``prefix_match_unit``: where the second prompt's hit ends, and its copy."""

    DECLARATION = Declaration(
        "PartialHitExplorer",
        (Choice("prefix_match_unit", UNITS, "prefix_match_unit", 16, slider=True),),
        frames={"prefix_match_unit": [1, 2, 4, 8, 16]},
        play=Play("prefix_match_unit"),
    )
    WIDGET_ARGS = {"continuous_update": False}

    def render(self, prefix_match_unit: int) -> View:
        alloc, cache, first, second = partial_hit_scene(prefix_match_unit)
        copy = (
            f"copy <b>KVCacheBlockCopy(src={second.copy.src}, dst={second.copy.dst})</b>, "
            "both ends held until the step ran"
            if second.copy
            else "no copy (the hit ends on a block boundary)"
        )
        readout = (
            f"prefix_match_unit {prefix_match_unit}: the second prompt hits "
            f"<b>{second.hit_tokens} of {PARTIAL_SHARED}</b> shared tokens "
            f"({len(second.shared_blocks)} block(s) shared); {copy}"
        )
        return View((alloc, cache, second), partial_hit(alloc, first, second, True), readout)
