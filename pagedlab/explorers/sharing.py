"""Explorers for sharing: sliders -> real allocator, block tables, prefix cache -> picture.

``SharingExplorer`` and ``PrefixCacheExplorer`` run :mod:`pagedlab.explorers.views.sharing` (the
live site runs it too); ``EvictionExplorer`` (notebook 6, widgets only) runs
:func:`pagedlab.pictures.control_scenes.eviction_scene`.
"""

from __future__ import annotations

import html

from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.explorers.views.sharing import (
    PREFIX_EXPLORER,
    SHARING_EXPLORER,
    prefix_view,
    sharing_view,
)
from pagedlab.pictures.control_scenes import EVICTION_PROMPT, eviction_scene
from pagedlab.pictures.sharing import sharing_scene


class SharingExplorer(Explorer):
    """Controls ``mode``, ``width`` (n samples / beam width), ``prompt_len``, ``steps``."""

    DECLARATION = SHARING_EXPLORER
    ROWS = ("mode", ("width", "prompt_len", "steps"))

    def render(self, mode: str, width: int, prompt_len: int, steps: int) -> View:
        return sharing_view(mode, width, prompt_len, steps)


class PrefixCacheExplorer(Explorer):
    """Controls ``shared`` (prefix length), ``prompt_len``, ``requests``, ``block_size``."""

    DECLARATION = PREFIX_EXPLORER
    ROWS = (("shared", "prompt_len", "requests"), "block_size")

    def render(self, shared: int, prompt_len: int, requests: int, block_size: int) -> View:
        return prefix_view(shared, prompt_len, requests, block_size)


class EvictionExplorer(Explorer):
    """Controls ``pool_blocks``, ``others`` (requests between A and its return), ``free_rule``;
    once the pool runs out of other blocks, each cached block handed out is a miss for A."""

    DECLARATION = Declaration(
        "EvictionExplorer",
        (
            Slider("pool_blocks", 3, 16, "pool blocks", 6),
            Slider("others", 0, 6, "in between", 1),
            Choice("free_rule", ("fifo", "vllm-v1"), "free rule", "fifo"),
        ),
        frames={"pool_blocks": [3, 4, 5, 6, 8, 12, 16], "others": list(range(7))},
        play=Play("others"),
    )
    ROWS = (("pool_blocks", "others"), "free_rule")

    def render(self, pool_blocks: int, others: int, free_rule: str) -> View:
        run = eviction_scene(pool_blocks, others, free_rule)  # type: ignore[arg-type]
        drawing = sharing_scene(
            run.cache.allocator,
            [run.back],
            [list(range(EVICTION_PROMPT))],
            highlight=list(run.cache.cached_blocks()),
            title=f"A's prompt back after {others} other request{'' if others == 1 else 's'}",
            names=["A, back"],
            highlight_key="cached full block",
        )
        rows = [f"A (prompt 0..{EVICTION_PROMPT - 1}): blocks {run.first}, then ends"]
        for i, (blocks, evicted) in enumerate(zip(run.others, run.evicted, strict=True)):
            rows.append(
                f"R{i + 1} (its own prompt): blocks {blocks}, ends; evictions so far {evicted}"
            )
        rows.append(f"A again: blocks {run.returning}")
        verdict = (
            f"A's return hits <b>{run.hits} of its {run.cacheable}</b> full blocks; cached blocks "
            f"evicted before it came back: {run.evicted[-1] if run.evicted else 0} "
            f"(pool of {run.cache.allocator.num_blocks})"
        )
        return View(run, drawing, f"<pre>{html.escape(chr(10).join(rows))}</pre>{verdict}")
