"""The static site and its live pages: everything only the site needs, in one place.

Each notebook becomes a page whose explorers move without a kernel (frames drawn ahead of
time) and go live in the browser (Pyodide in a Web Worker). Bottom up, each module importing
only those before it: ``registry`` (every explorer, one entry), ``live`` (what the worker
calls; no torch, numpy, matplotlib, ipywidgets), ``markup`` (live panels and exercises in a
page), ``static`` (the declared frames, picked by linked widgets; ``enable()``). This
``__init__`` imports none of them: the browser ships ``registry`` and ``live`` only.
"""
