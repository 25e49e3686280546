"""Explorers: ipywidgets that compose state and pictures (sliders -> state -> picture).

Every explorer derives from :class:`~pagedlab.explorers.base.Explorer` (its module docstring
is the API: a ``DECLARATION`` (controls, static frames, Play) plus one ``render`` function,
an optional slow ``finish``, an atomic ``set``, ``.widget`` / ``.picture`` / ``.readout`` /
``.state``, one display hook whose bundle also carries the first frame as a PNG). A notebook
shows ``explorer`` itself. The static and live site that shows them without a kernel is
:mod:`pagedlab.site` (above this package: the explorers know nothing of it).

- :mod:`~pagedlab.explorers.base`       ``Explorer``, ``View``
- :mod:`~pagedlab.explorers.play`       ``Player``: the declared Play as an ``ipywidgets.Play``
- :mod:`~pagedlab.explorers.allocation` ``AllocationExplorer`` (notebooks 2-3)
- :mod:`~pagedlab.explorers.kernel`     ``KernelExplorer`` (notebook 4)
- :mod:`~pagedlab.explorers.sharing`    ``SharingExplorer``, ``PrefixCacheExplorer``,
  ``EvictionExplorer`` (5-6)
- :mod:`~pagedlab.explorers.waste`      ``ReservationExplorer``, ``BlockSizeExplorer`` (1, 7)
- :mod:`~pagedlab.explorers.batch`      ``BatchExplorer`` (notebook 8)
- :mod:`~pagedlab.explorers.scheduler`  ``SchedulerExplorer`` (notebook 9)
- :mod:`~pagedlab.explorers.engine`     ``EngineExplorer`` (notebook 10: a real model's run)
- :mod:`~pagedlab.explorers.hit_rate`   ``HitRateExplorer``, ``PartialHitExplorer`` (notebook 11)
- :mod:`~pagedlab.explorers.any_layout` notebook 3's sequence among junk and its key slider
  (not an Explorer)
- :mod:`~pagedlab.explorers.predict`    ``Predict``: predict, then reveal (not an Explorer);
  :mod:`~pagedlab.explorers.predictions` each notebook's question, ``predict("05")``

Their models (what each setting builds) come from :mod:`pagedlab.scenes` where a notebook,
a test or a figure stages the same example.
"""
