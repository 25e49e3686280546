"""Past one engine (notebook 12): several engines, a host tier, a prefill engine and a decode
engine, and the admission rules, built on :mod:`pagedlab.memory` and :mod:`pagedlab.engine`.

- :mod:`~pagedlab.fleet.events`    vLLM 0.34's KV events (stored / removed block hashes)
- :mod:`~pagedlab.fleet.routing`   block-level engines on a trace; round-robin, least-loaded
  and KV-aware routers fed by the events
- :mod:`~pagedlab.fleet.host_tier` a host pool under the device prefix cache: write-through,
  write-back, evict-first, hit sources and their cost
- :mod:`~pagedlab.fleet.disagg`    prefill on one engine, pages copied, decode on another
- :mod:`~pagedlab.fleet.admission` vLLM's rule, no-evict, cache-aware admission; the
  head-of-line deadlock and its refusal

This ``__init__`` imports nothing: the torch-free modules (events, routing, admission) stay
importable without torch.
"""
