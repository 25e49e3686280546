"""Routing on KV events: the index is the engines' caches, KV-aware routing hits more, and
the two hazards (another block size, lost events) show."""

from __future__ import annotations

import importlib.util
from dataclasses import fields

import pytest

from pagedlab.frontier.fleet.events import BlockRemoved, BlockStored, as_vllm, to_int
from pagedlab.frontier.fleet.routing import (
    POLICIES,
    BlockEngine,
    Request,
    Router,
    multi_tenant_trace,
    route_trace,
)
from pagedlab.memory.allocator import OutOfBlocksError

TRACE = multi_tenant_trace(num_requests=80)


def test_the_trace_is_seeded_and_shares_system_prompts() -> None:
    assert multi_tenant_trace(num_requests=80) == TRACE
    assert multi_tenant_trace(num_requests=80, seed=1) != TRACE
    assert all(b.arrival > a.arrival for a, b in zip(TRACE, TRACE[1:], strict=False))
    same = [r for r in TRACE if r.tenant == TRACE[0].tenant]
    assert len(same) > 1 and all(r.tokens[:256] == TRACE[0].tokens[:256] for r in same)


def test_the_index_built_from_events_is_exactly_what_each_engine_caches() -> None:
    engines = [BlockEngine(f"E{i}", 48, 16) for i in range(2)]
    router = Router(engines, "round-robin")
    kinds = set()
    for r in TRACE[:40]:
        kinds.update(type(e) for e in engines[0].outbox + engines[1].outbox)
        router.receive()
        router.choose(r.tokens).serve(r, r.arrival)
    router.receive()
    assert kinds == {BlockStored, BlockRemoved}  # the pools were small enough to evict
    for e in engines:
        assert router.index[e.name] == {to_int(h) for h in e.cache.cached_blocks().values()}


def test_a_stored_event_chains_to_its_parent_and_carries_its_tokens() -> None:
    engine = BlockEngine("E", 32, 4)
    request = Request("a", 0.0, tuple(range(1, 11)), 0, 0)
    engine.serve(request, 0.0)
    (event,) = engine.outbox
    assert isinstance(event, BlockStored)
    assert event.parent_block_hash is None and event.token_ids == list(range(1, 9))
    assert len(event.block_hashes) == 2 and event.block_size == 4
    longer = Request("b", 1.0, tuple(range(1, 15)), 0, 0)
    engine.serve(longer, 1.0)
    assert engine.outbox[-1].parent_block_hash == event.block_hashes[-1]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_the_events_are_vllms_own_classes_field_for_field() -> None:
    for event in (BlockStored([1, 2], None, [5] * 8, 4), BlockRemoved([1])):
        theirs = as_vllm(event)
        assert type(theirs).__module__ == "vllm.distributed.kv_events"
        assert all(getattr(theirs, f.name) == getattr(event, f.name) for f in fields(event))


def test_kv_aware_routing_hits_more_and_prefills_less() -> None:
    stats = {p: route_trace(TRACE, p) for p in POLICIES}
    kv = stats["kv-aware"]
    for other in ("round-robin", "least-loaded"):
        assert kv.hit_rate > stats[other].hit_rate + 0.1
        assert kv.prefill_tokens < stats[other].prefill_tokens
        assert kv.mean_ttft < stats[other].mean_ttft
    assert stats["round-robin"].imbalance < kv.imbalance  # the price: uneven load
    assert all(s.stale == 0 for s in stats.values())


def test_weight_zero_is_load_only_and_engines_of_another_block_size_never_match() -> None:
    assert route_trace(TRACE, "kv-aware", overlap_weight=0).per_engine() == (
        route_trace(TRACE, "least-loaded").per_engine()
    )
    engines = [BlockEngine("E0", 96, 16), BlockEngine("E1", 96, 32)]
    router = Router(engines, "round-robin")
    for r in TRACE[:10]:
        router.receive()
        router.choose(r.tokens).serve(r, r.arrival)
    router.receive()
    assert router.index["E1"]  # it published hashes ...
    assert all(router.overlap("E1", r.tokens) == 0 for r in TRACE)  # ... never matched


def test_lost_removed_events_send_requests_to_blocks_already_evicted() -> None:
    assert route_trace(TRACE, "kv-aware", num_blocks=48, lose_removed=1.0).stale > 0
    assert route_trace(TRACE, "kv-aware", num_blocks=48).stale == 0


def test_an_engine_no_request_reached_counts_in_the_imbalance() -> None:
    stats = route_trace(TRACE[:1], "round-robin", num_engines=2)
    assert stats.per_engine() == {"E0": 1, "E1": 0} and stats.imbalance == 2.0


def test_refusals() -> None:
    with pytest.raises(ValueError, match="policy"):
        Router([BlockEngine("E", 8, 4)], "random")
    with pytest.raises(OutOfBlocksError, match="never fit"):
        BlockEngine("E", 2, 4).serve(Request("a", 0.0, tuple(range(20)), 1, 0), 0.0)
