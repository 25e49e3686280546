"""The static site and its live pages: everything only the site needs, in one place.

Bottom up, each module importing only those before it: ``registry`` (every explorer, one
entry), ``live`` (what the browser's worker calls; no torch, numpy, matplotlib, ipywidgets),
``markup`` (live panels and exercises in a page), ``static`` (the declared frames, picked by
linked widgets). This ``__init__`` imports none of them: the browser ships ``registry`` and
``live`` only.
"""
