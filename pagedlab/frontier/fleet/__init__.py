"""Past one engine (notebook 12), on :mod:`pagedlab.memory`, :mod:`pagedlab.engine` and
:mod:`pagedlab.model`. Imports nothing: events, routing and admission need no torch.
"""
