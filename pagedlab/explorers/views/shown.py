"""``View``: what one explorer setting shows, with no widget and no matplotlib in sight."""

from __future__ import annotations

from typing import Any, NamedTuple


class View(NamedTuple):
    """The state a setting builds, its picture and its readout (HTML).

    The live renders of :mod:`pagedlab.explorers.views` draw a ``Drawing`` (the live site writes it
    as SVG); a notebook explorer's ``render`` may also return a matplotlib ``Figure`` or PNG bytes.
    """

    state: Any
    picture: Any  # a pictures.drawing.Drawing, a matplotlib Figure, or PNG bytes
    readout: str
