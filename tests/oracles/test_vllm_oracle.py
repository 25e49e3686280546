"""pagedlab's replica of vLLM (``free_rule="vllm-v1"``, the null block, ``PrefixCache``) against
vLLM 0.34.0's own ``KVCacheManager`` on random traces: shared prefixes, decodes, frees,
evictions, preemptions and resumes. Skipped where vLLM is not installed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedlab.oracles import EngineMissing, require_vllm, vllm_available
from pagedlab.oracles.trace import Run, run_pagedlab_vllm_rule

pytestmark = pytest.mark.skipif(not vllm_available(), reason="vLLM 0.34.0 is not installed")

TOKENS = st.integers(0, 2)  # three token ids: prefixes repeat, blocks collide by content


@st.composite
def traces(draw: st.DrawFn) -> tuple[tuple, int, int]:
    block_size, num_blocks = draw(st.integers(1, 4)), draw(st.integers(3, 14))
    prefixes = draw(st.lists(st.lists(TOKENS, max_size=12), min_size=1, max_size=3))
    rid = st.sampled_from([f"R{i}" for i in range(5)])
    prompt = st.tuples(st.sampled_from(prefixes), st.lists(TOKENS, max_size=6)).map(
        lambda p: tuple(p[0] + p[1]) or (1,)
    )
    op = st.one_of(
        st.tuples(st.just("admit"), rid, prompt),
        st.tuples(st.just("grow"), rid, st.lists(TOKENS, min_size=1, max_size=3).map(tuple)),
        st.tuples(st.sampled_from(["preempt", "resume", "free"]), rid),
    )
    steps = draw(st.lists(st.lists(op, min_size=1, max_size=4).map(tuple), min_size=1, max_size=8))
    return tuple(steps), num_blocks, block_size


def assert_agree(ours: Run, theirs: Run) -> None:
    """Same blocks, hits, refusals and preemptions at every step. Evictions: pagedlab counts a
    cached block's descendants when the block is handed out (no lookup reaches them; its
    ``_forget``), vLLM counts each when its own block is handed out, so pagedlab's running
    count is never below vLLM's."""
    for i, (a, b) in enumerate(zip(ours.steps, theirs.steps, strict=True)):
        same = (a.blocks, a.hits, a.refused, a.preempted) == (
            b.blocks,
            b.hits,
            b.refused,
            b.preempted,
        )
        assert same, f"step {i}: pagedlab {a} != vLLM {b}"
        assert a.evictions >= b.evictions, f"step {i}: {a.evictions} < {b.evictions}"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(traces())
def test_pagedlab_vllm_rule_equals_vllm_kv_cache_manager(case: tuple[tuple, int, int]) -> None:
    from pagedlab.oracles.vllm_kv import run_vllm

    trace, num_blocks, block_size = case
    assert_agree(run_pagedlab_vllm_rule(trace, num_blocks, block_size),
                 run_vllm(trace, num_blocks, block_size))  # fmt: skip


def test_the_issue_example_and_a_same_step_hit() -> None:
    from pagedlab.oracles.vllm_kv import run_vllm

    ten = tuple(range(10))
    trace = ((("admit", "A", ten), ("admit", "B", ten)),)  # one step: B hits what A scheduled
    real = run_vllm(trace, 8, 4)
    assert real.steps[0].blocks == {"A": (1, 2, 3), "B": (1, 2, 4)}
    assert real.steps[0].hits == {"A": 0, "B": 8}
    assert real == Run(real.engine, run_pagedlab_vllm_rule(trace, 8, 4).steps)


def test_a_duplicate_block_is_freed_to_the_back_as_vllm_keeps_it() -> None:
    """An 8-token prompt cached whole; again: 1 block hits, the last is recomputed into a
    duplicate, which vLLM keeps hashed (freed to the back, an eviction when reused)."""
    from pagedlab.oracles.vllm_kv import run_vllm

    eight = tuple(range(8))
    trace = (
        (("admit", "A", eight),), (("admit", "B", eight),), (("free", "B"), ("free", "A")),
        (("admit", "C", (9,)),),
    )  # fmt: skip
    real, ours = run_vllm(trace, 5, 4), run_pagedlab_vllm_rule(trace, 5, 4)
    assert real.steps[1].blocks["B"] == (1, 3) and real.steps[1].hits["B"] == 4
    assert real.steps[3].blocks == {"C": (4,)} and real.steps == ours.steps


def test_missing_vllm_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EngineMissing, match="pip install --no-deps vllm==0.34.0"):
        require_vllm()
