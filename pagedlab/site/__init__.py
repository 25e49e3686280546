"""The static site and its live pages: everything only the site needs, in one place.

The site shows each notebook as a page whose explorers still move without a kernel (frames
drawn ahead of time) and go live in the browser (Pyodide in a Web Worker). Its modules, from
the bottom up (each imports only those above it in this list, plus the package below):

- :mod:`~pagedlab.site.registry` ``REGISTRY``: every explorer, one entry each (its class's
  module and, for one the live page runs, its declaration and torch-free render)
- :mod:`~pagedlab.site.live`     what the browser's worker calls: ``render``, ``grade``,
  ``play`` (the live core: no torch, numpy, matplotlib, ipywidgets)
- :mod:`~pagedlab.site.markup`   the live panels and exercises written into a page
- :mod:`~pagedlab.site.static`   each explorer's declared frames, rendered ahead of time and
  picked in the page by linked widgets; ``enable()`` for the site build's kernel

This ``__init__`` imports none of them: the browser ships ``registry`` and ``live`` only.
"""
