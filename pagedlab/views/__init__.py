"""What each live explorer shows for one setting: the model, its ``Drawing`` and its readout.

Pure Python (the standard library, ``memory``, ``control_scenes`` and the data half of
``pictures``): the notebook's ipywidgets explorers call these renders, and the live site runs
the very same functions in the browser (Pyodide). An import-linter contract keeps them free
of torch, numpy, matplotlib and ipywidgets.

- :mod:`~pagedlab.views.allocation` the allocation explorer (notebooks 2-3)
- :mod:`~pagedlab.views.sharing`    the sharing and prefix-cache explorers (5-6)
- :mod:`~pagedlab.views.scheduler`  the scheduler explorer, control plane only (9)
- :mod:`~pagedlab.views.controls`   ``Slider``, ``Choice``, ``Toggle``: a control declared once;
  ``Play``: an explorer's Play (axis, mode); ``Declaration``: an explorer declared once
- :mod:`~pagedlab.views.shown`      ``View``: what one setting shows (state, picture, readout)
"""
