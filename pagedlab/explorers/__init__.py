"""Explorers: ipywidgets that compose state and pictures (sliders -> state -> picture).

Every explorer derives from :class:`~pagedlab.explorers.base.Explorer` (its module docstring
is the API). The site that shows them without a kernel is :mod:`pagedlab.site`, above this
package. Their models come from :mod:`pagedlab.scenes` where others stage the same example.
"""
