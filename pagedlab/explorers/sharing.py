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

from pagedlab.explorers.base import Explorer, View
from pagedlab.views.sharing import (  # the models, re-exported: explorers.sharing.sharing_state
    BLOCK_SIZE,
    MAX_PROMPT,
    MODES,
    POOL_BLOCKS,
    PREFIX_CONTROLS,
    PREFIX_POOL_BLOCKS,
    SHARING_CONTROLS,
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
    """Controls ``mode``, ``width`` (n samples / beam width), ``prompt_len``, ``steps``."""

    CONTROLS = SHARING_CONTROLS
    ROWS = ("mode", ("width", "prompt_len", "steps"))

    def render(self, mode: str, width: int, prompt_len: int, steps: int) -> View:
        return View(*sharing_view(mode, width, prompt_len, steps))


# --- prefix caching --------------------------------------------------------------------------


class PrefixCacheExplorer(Explorer):
    """Controls ``shared`` (prefix length), ``prompt_len``, ``requests``, ``block_size``."""

    CONTROLS = PREFIX_CONTROLS
    ROWS = (("shared", "prompt_len", "requests"), "block_size")

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
