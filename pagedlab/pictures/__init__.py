"""Pictures: state -> ``Drawing`` or matplotlib figure -> PNG. They read state, never mutate it.

Primitives: ``theme`` (the one Okabe-Ito palette), ``png`` (the one PNG encoder), ``drawing``
(``Drawing``: rects, labels, arrows in inches; no numpy or matplotlib), ``canvas`` (renders a
``Drawing`` in place) and ``svg`` (the same ``Drawing`` for the live site); the other modules
are scenes. ``scenes`` stages every example the notebooks share; ``control_scenes``, those
that need no torch (the live core).
"""
