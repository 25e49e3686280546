"""``Shown``: what one explorer setting shows, with no widget and no matplotlib in sight."""

from __future__ import annotations

from typing import Any, NamedTuple

from pagedlab.pictures.drawing import Drawing


class Shown(NamedTuple):
    """The state a setting builds, its ``Drawing`` and its readout (HTML).

    An explorer wraps it in its ``View``; the live site writes the drawing as SVG.
    """

    state: Any
    drawing: Drawing
    readout: str
