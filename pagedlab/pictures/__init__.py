"""Pictures: state -> ``Drawing`` or matplotlib figure -> PNG. They read state, never mutate it.

Primitives apart from scenes:

- :mod:`~pagedlab.pictures.theme`   the one palette (Okabe-Ito) and what each colour means
- :mod:`~pagedlab.pictures.png`     the one PNG encoder (``to_png``: figures and bytes only)
- :mod:`~pagedlab.pictures.drawing` ``Drawing`` (rects, labels, arrows, in inches): the data half,
  no numpy or matplotlib
- :mod:`~pagedlab.pictures.canvas`  the in-place ``Canvas`` that renders a ``Drawing`` (and
  re-exports its names), ``drawing_png`` and ``image`` (any picture as a cell's value)
- :mod:`~pagedlab.pictures.svg`     the same ``Drawing`` as SVG, for the live site

Scenes (state -> picture):

- :mod:`~pagedlab.pictures.blocks`      the block pool, block tables and logical strips (Figs. 6-7)
- :mod:`~pagedlab.pictures.sharing`     shared blocks, ref counts, copy-on-write (Figs. 8-9)
- :mod:`~pagedlab.pictures.reservation` one request: contiguous reservation vs paging (Fig. 3)
- :mod:`~pagedlab.pictures.fragmentation` holes between requests; ``fig3_scene``: all three wastes
- :mod:`~pagedlab.pictures.online_softmax` the kernel's online softmax, block by block
- :mod:`~pagedlab.pictures.at_scale`    memory at scale: Fig. 2, Fig. 13, block-size sweep
- :mod:`~pagedlab.pictures.buddy`       a buddy allocator splitting and merging one request (§6.1)
- :mod:`~pagedlab.pictures.step`        a mixed vLLM V1 step; one table for every TP worker (§4.6)
- :mod:`~pagedlab.pictures.in_2026`     notebook 11: three engines' free rules, a partial hit's
  copy, hybrid tables, the async timeline, tokens by miss reason
- :mod:`~pagedlab.pictures.scheduler_drawing` device and host pools, queues (the data half)
- :mod:`~pagedlab.pictures.scheduler`   re-exports it; Fig. 19's plots
"""
