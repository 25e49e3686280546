"""Explorers for sharing: sliders -> real allocator, block tables, prefix cache -> picture.

The models and the render of one setting live in :mod:`pagedlab.views.sharing` (no widgets,
so the live site runs them in a browser); they are re-exported here.
``SharingExplorer`` and ``PrefixCacheExplorer`` are their controls plus that render
on the :class:`~pagedlab.explorers.base.Explorer` base. Prompts of the prefix cache come
from :func:`pagedlab.scenes.prefix_tokens`.

Beam search picks its parents with a seeded ``random.Random`` (synthetic scores), so the
same slider values always give the same tree.
"""

from __future__ import annotations

import ipywidgets as widgets

from pagedlab.explorers.base import Explorer, View
from pagedlab.pictures.sharing import MAX_TABLES
from pagedlab.views.sharing import (  # the models, re-exported: explorers.sharing.sharing_state
    BLOCK_SIZE,
    MAX_PROMPT,
    MODES,
    POOL_BLOCKS,
    PREFIX_POOL_BLOCKS,
    PrefixState,
    SharingState,
    prefix_html,
    prefix_pool_blocks,
    prefix_state,
    prefix_view,
    sharing_html,
    sharing_state,
    sharing_view,
)


class SharingExplorer(Explorer):
    """Mode, width (n samples / beam width), prompt length and generated tokens."""

    def __init__(
        self, mode: str = MODES[0], width: int = 2, prompt_len: int = 7, steps: int = 1
    ) -> None:
        controls = {
            "mode": widgets.ToggleButtons(options=list(MODES), description="mode"),
            "width": widgets.IntSlider(min=1, max=MAX_TABLES, description="n / k"),
            "prompt_len": widgets.IntSlider(min=1, max=24, description="prompt"),
            "steps": widgets.IntSlider(min=0, max=12, description="generated"),
        }
        sliders = widgets.HBox([controls["width"], controls["prompt_len"], controls["steps"]])
        super().__init__(
            controls, [controls["mode"], sliders], mode=mode, width=width,
            prompt_len=prompt_len, steps=steps,
        )  # fmt: skip

    def render(self, mode: str, width: int, prompt_len: int, steps: int) -> View:
        return View(*sharing_view(mode, width, prompt_len, steps))


# --- prefix caching --------------------------------------------------------------------------


class PrefixCacheExplorer(Explorer):
    """Shared-prefix length, prompt length, number of requests and block size."""

    def __init__(
        self, shared: int = 8, prompt_len: int = 10, requests: int = 3, block_size: int = 4
    ) -> None:
        controls = {
            "shared": widgets.IntSlider(min=0, max=MAX_PROMPT, description="shared"),
            "prompt_len": widgets.IntSlider(min=1, max=MAX_PROMPT, description="prompt"),
            "requests": widgets.IntSlider(min=1, max=MAX_TABLES, description="requests"),
            "block_size": widgets.ToggleButtons(options=[2, 4, 8], description="block size"),
        }
        sliders = widgets.HBox([controls["shared"], controls["prompt_len"], controls["requests"]])
        super().__init__(
            controls, [sliders, controls["block_size"]], shared=shared, prompt_len=prompt_len,
            requests=requests, block_size=block_size,
        )  # fmt: skip

    def render(self, shared: int, prompt_len: int, requests: int, block_size: int) -> View:
        return View(*prefix_view(shared, prompt_len, requests, block_size))


__all__ = [
    "BLOCK_SIZE",
    "MAX_PROMPT",
    "MODES",
    "POOL_BLOCKS",
    "PREFIX_POOL_BLOCKS",
    "PrefixCacheExplorer",
    "PrefixState",
    "SharingExplorer",
    "SharingState",
    "prefix_html",
    "prefix_pool_blocks",
    "prefix_state",
    "prefix_view",
    "sharing_html",
    "sharing_state",
    "sharing_view",
]
