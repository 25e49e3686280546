"""The host tier (write-through, write-back, evict-first, K/V checked after each round trip)
and the three admission rules, with the head-of-line deadlock and its refusal."""

from __future__ import annotations

import pytest

from pagedlab.frontier.fleet.admission import RULES, run_admission
from pagedlab.frontier.fleet.host_tier import TieredCache
from pagedlab.frontier.fleet.routing import Request, multi_tenant_trace

TRACE = multi_tenant_trace(num_requests=60)


def _run(write: str, evict_first: bool) -> TieredCache:
    tier = TieredCache(48, 512, 16, write, evict_first)
    for r in TRACE:
        tier.serve(r.tokens)
    return tier


def test_host_hits_come_back_byte_equal_and_every_token_has_one_source() -> None:
    tier = _run("back", False)
    assert tier.sources["host"] > 0 and tier.checked == tier.loads > 0
    assert sum(tier.sources.values()) == sum(len(r.tokens) for r in TRACE)


def test_write_through_copies_every_block_write_back_only_the_evicted() -> None:
    through, back = _run("through", False), _run("back", False)
    assert through.offloads > back.offloads
    assert through.sources == back.sources  # the host is big enough: the same hits


def test_evict_first_spares_write_backs_and_moves_hits_to_the_host() -> None:
    plain, first = _run("back", False), _run("back", True)
    assert first.offloads < plain.offloads
    assert first.sources["device"] < plain.sources["device"]
    assert first.sources["miss"] == plain.sources["miss"]


def test_evict_first_keeps_every_cached_device_block_marked() -> None:
    tier = TieredCache(48, 512, 16, "back", True)
    for r in TRACE[:30]:
        tier.serve(r.tokens)
        assert all(tier.device.is_hashed(b) for b in tier.cache.cached_blocks())
    marks = [tier.device.is_hashed(b) for b in tier.device.free_list()]
    assert marks != sorted(marks)  # hashed blocks (the host holds them) ahead of unhashed


def test_a_bad_write_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="write"):
        TieredCache(8, 8, 4, "around")


ADMIT = multi_tenant_trace(num_requests=60, rate=25)


def test_no_evict_never_preempts_and_pays_in_idle_blocks() -> None:
    stats = {rule: run_admission(ADMIT, rule) for rule in RULES}
    assert stats["vllm"].preemptions > 0 and stats["no-evict"].preemptions == 0
    assert stats["no-evict"].idle_blocks > 0 and stats["vllm"].idle_blocks == 0
    assert stats["vllm"].throughput > stats["no-evict"].throughput
    assert all(s.output_tokens == sum(r.output_len for r in ADMIT) for s in stats.values())


def test_a_request_no_pool_can_hold_blocks_the_queue_until_refused() -> None:
    huge = Request("huge", 0.1, tuple(range(1, 3000)), 10, 0)
    trace = sorted([*ADMIT[:20], huge], key=lambda r: r.arrival)
    stuck = run_admission(trace, "vllm")
    assert "huge needs 188 blocks of 16, the pool has 160" in stuck.stuck
    fixed = run_admission(trace, "vllm", refuse=True)
    assert not fixed.stuck and fixed.refused == [
        "huge: prompt 2999 tokens + 1 needs 188 blocks of 16, the pool has 160: refused"
    ]
    assert fixed.output_tokens == sum(r.output_len for r in ADMIT[:20])
