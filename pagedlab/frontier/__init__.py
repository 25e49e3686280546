"""Past the paper: what engines do in 2026 (notebook 11) and past one engine (notebook 12).

Notebook 11, on the control plane, no torch (the live core): ``peers`` (vLLM 0.34's and
transformers 5.24's free-block rules), ``partial_prefix`` (hits inside a block), ``hybrid``
(cache groups, sliding windows, model-set block sizes), ``miss_reasons`` (every missed prompt
token, classified), ``async_steps`` (scheduling one step ahead), ``kv_bytes`` (bytes per token,
blocks per GiB); ``oracles``: vLLM's and transformers' own cache code run beside pagedlab's
replica. Notebook 12: ``fleet`` (routers, a host tier, disaggregation, admission), on
:mod:`pagedlab.engine`. This ``__init__`` imports none of them.
"""
