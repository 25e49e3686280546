"""What each live explorer shows for one setting: the model, its ``Drawing`` and its readout.

Pure Python (the standard library, ``memory``, ``control_scenes`` and the data half of
``pictures``): the notebook's ipywidgets explorers call these renders, and the live site runs
the very same functions in the browser (Pyodide). An import-linter contract keeps them free
of torch, numpy, matplotlib and ipywidgets.
"""
