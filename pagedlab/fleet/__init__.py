"""Past one engine (notebook 12), on :mod:`pagedlab.memory`, :mod:`pagedlab.engine` and
:mod:`pagedlab.model`: :mod:`~pagedlab.fleet.events` (vLLM 0.34's KV events),
:mod:`~pagedlab.fleet.routing` (block-level engines; round-robin, least-loaded and KV-aware
routers fed by the events), :mod:`~pagedlab.fleet.host_tier` (a host pool under the device
prefix cache), :mod:`~pagedlab.fleet.disagg` (prefill on one engine, pages copied, decode on
another), :mod:`~pagedlab.fleet.admission` (vLLM's rule, no-evict, cache-aware; the
head-of-line deadlock). Imports nothing: events, routing and admission need no torch.
"""
