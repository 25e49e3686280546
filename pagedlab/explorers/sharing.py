"""Explorers for sharing: sliders -> real allocator, block tables, prefix cache -> picture.

The models, the render of one setting and the controls' declarations live in
:mod:`pagedlab.views.sharing` (no widgets, so the live site runs them in a browser).
``SharingExplorer`` and ``PrefixCacheExplorer`` are those controls plus that render on the
:class:`~pagedlab.explorers.base.Explorer` base. Prompts of the prefix cache come from
:func:`pagedlab.scenes.prefix_tokens`.

Beam search picks its parents with a seeded ``random.Random`` (synthetic scores), so the
same slider values always give the same tree.
"""

from __future__ import annotations

from pagedlab.explorers.base import Explorer, View
from pagedlab.views.sharing import PREFIX_EXPLORER, SHARING_EXPLORER, prefix_view, sharing_view


class SharingExplorer(Explorer):
    """Controls ``mode``, ``width`` (n samples / beam width), ``prompt_len``, ``steps``."""

    DECLARATION = SHARING_EXPLORER
    ROWS = ("mode", ("width", "prompt_len", "steps"))

    def render(self, mode: str, width: int, prompt_len: int, steps: int) -> View:
        return View(*sharing_view(mode, width, prompt_len, steps))


class PrefixCacheExplorer(Explorer):
    """Controls ``shared`` (prefix length), ``prompt_len``, ``requests``, ``block_size``."""

    DECLARATION = PREFIX_EXPLORER
    ROWS = (("shared", "prompt_len", "requests"), "block_size")

    def render(self, shared: int, prompt_len: int, requests: int, block_size: int) -> View:
        return View(*prefix_view(shared, prompt_len, requests, block_size))
