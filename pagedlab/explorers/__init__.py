"""Explorers: ipywidgets that compose state and pictures (sliders -> state -> picture).

Every explorer derives from :class:`~pagedlab.explorers.base.Explorer` (its module docstring
is the API: a ``DECLARATION`` plus one ``render``, an atomic ``set``, ``.widget`` /
``.picture`` / ``.readout`` / ``.state``). The site that shows them without a kernel is
:mod:`pagedlab.site`, above this package. ``allocation`` (notebooks 2-3), ``kernel`` (4),
``sharing`` (5-6), ``waste`` (1, 7), ``batch`` (8), ``scheduler`` (9), ``engine`` (10),
``hit_rate`` (11) hold the explorers; ``play`` the widget Play, ``any_layout`` notebook 3's
plumbing, ``predict`` / ``predictions`` the predict-then-reveal widget and its questions.
Their models come from :mod:`pagedlab.scenes` where others stage the same example.
"""
