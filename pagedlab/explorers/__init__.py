"""Explorers: ipywidgets that compose state and pictures (sliders -> state -> picture).

- :mod:`~pagedlab.explorers.allocation` ``AllocationExplorer`` (notebooks 2-3)
- :mod:`~pagedlab.explorers.kernel`     ``KernelExplorer`` (notebook 4)
- :mod:`~pagedlab.explorers.sharing`    ``SharingExplorer``, ``PrefixCacheExplorer`` (5-6)
- :mod:`~pagedlab.explorers.memory`     ``ReservationExplorer``, ``BlockSizeExplorer`` (1, 7)
- :mod:`~pagedlab.explorers.batch`      ``BatchExplorer`` (notebook 8)
"""
