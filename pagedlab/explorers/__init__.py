"""Explorers: ipywidgets that compose state and pictures (sliders -> state -> picture).

Every explorer derives from :class:`~pagedlab.explorers.base.Explorer` (its module docstring
is the API). ``views`` holds each explorer's settings and declaration without widgets (the
live core); ``site`` shows them without a kernel (it imports the explorers, never the
reverse); ``figures`` draws the README's pictures. Their models come from
:mod:`pagedlab.pictures.scenes` where others stage the same example.
"""
