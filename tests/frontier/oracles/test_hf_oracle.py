"""pagedlab's replica of transformers' sector pool (``HFCachePool``) against transformers 5.24's
own ``PagedAttentionCache`` on random admit / grow / free traces, sectors freed before each
step as its scheduler does before each batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.frontier.oracles.trace import run_pagedlab_hf_rule
from pagedlab.frontier.peers import THE_TRACE

pytest.importorskip("transformers")

ONES = st.lists(st.just(1), min_size=1, max_size=7).map(tuple)
RID = st.sampled_from(["R0", "R1", "R2", "R3"])
OP = st.one_of(
    st.tuples(st.sampled_from(["admit", "grow"]), RID, ONES), st.tuples(st.just("free"), RID)
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.lists(OP, min_size=1, max_size=4).map(tuple), min_size=1, max_size=8),
    st.integers(1, 10), st.integers(1, 4),
)  # fmt: skip
def test_pagedlab_hf_rule_equals_transformers_cache(trace: list, blocks: int, size: int) -> None:
    from pagedlab.frontier.oracles.hf_cache import hf_geometry, run_hf

    sectors, per_sector = hf_geometry(blocks, size)
    ours = run_pagedlab_hf_rule(trace, sectors, size, per_sector)
    assert ours.steps == run_hf(trace, blocks, size).steps


def test_c_gets_8_9_because_the_scheduler_frees_sectors_first() -> None:
    """Notebook 11's trace: A 5 tokens, B 9, A freed, C 7; each in its own batch."""
    from pagedlab.frontier.oracles.hf_cache import run_hf

    trace = [[("admit", name, (1,) * n)] if op == "take" else [("free", name)]
             for op, name, n in THE_TRACE]  # fmt: skip
    real = run_hf(trace, 8, 4)
    assert real.steps[-1].blocks == {"B": (7, 6, 5), "C": (8, 9)}
    assert real.steps == run_pagedlab_hf_rule(trace, 8, 4).steps


def test_transformers_own_fifo_scheduler_gives_c_blocks_8_9() -> None:
    """The same trace through transformers' real FIFOScheduler (no model: batches are only
    scheduled): its _try_to_meet_safety_margin frees A's sectors before C's batch."""
    from transformers.generation.continuous_batching.requests import RequestState
    from transformers.generation.continuous_batching.scheduler import FIFOScheduler

    from pagedlab.frontier.oracles.hf_cache import paged_cache

    cache = paged_cache(8, 4)
    table = cache.cache_allocators["full_attention"].block_table
    scheduler = FIFOScheduler(cache, safety_margin=0.0, max_requests_per_batch=8)
    for op, name, n in THE_TRACE:
        if op == "free":
            scheduler.finish_request(name)
            scheduler.active_requests.pop(name, None)
            continue
        state = RequestState(request_id=name, initial_tokens=list(range(1, n + 1)))
        scheduler.add_waiting_request(state)
        batch = scheduler.schedule_batch(token_budget=64, cache_budget=1000)[0]
        assert batch is not None and name in {f.state.request_id for f in batch}
    assert table["B"] == [7, 6, 5] and table["C"] == [8, 9]
