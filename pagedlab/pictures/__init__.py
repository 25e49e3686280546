"""Pictures: state -> ``Drawing`` or matplotlib figure -> PNG. They read state, never mutate it.

Primitives: ``theme`` (the one Okabe-Ito palette), ``png`` (the one PNG encoder), ``drawing``
(``Drawing``: rects, labels, arrows in inches; no numpy or matplotlib), ``canvas`` (renders a
``Drawing`` in place; ``drawing_png``, ``image``) and ``svg`` (the same ``Drawing`` for the
live site). Scenes: ``blocks`` (Figs. 6-7), ``sharing`` (Figs. 8-9), ``reservation`` and
``fragmentation`` (Fig. 3), ``online_softmax``, ``at_scale`` (Figs. 2, 13, block sizes),
``buddy`` (§6.1), ``step`` (a mixed V1 step; §4.6), ``in_2026`` (notebook 11),
``scheduler_drawing`` and ``scheduler`` (the pools and queues; Fig. 19).
"""
