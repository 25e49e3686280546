"""pagedlab's replica of vLLM (``free_rule="vllm-v1"``, the null block, ``PrefixCache``) against
vLLM 0.34.0's own ``KVCacheManager`` on random traces: shared prefixes, decodes, frees,
evictions, preemptions and resumes. Skipped where vLLM is not installed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedlab.frontier.oracles import EngineMissing, require_vllm, vllm_available
from pagedlab.frontier.oracles.trace import Run, run_pagedlab_vllm_rule

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
    from pagedlab.frontier.oracles.vllm_kv import run_vllm

    trace, num_blocks, block_size = case
    assert_agree(run_pagedlab_vllm_rule(trace, num_blocks, block_size),
                 run_vllm(trace, num_blocks, block_size))  # fmt: skip


def test_the_issue_example_and_a_same_step_hit() -> None:
    from pagedlab.frontier.oracles.vllm_kv import run_vllm

    ten = tuple(range(10))
    trace = ((("admit", "A", ten), ("admit", "B", ten)),)  # one step: B hits what A scheduled
    real = run_vllm(trace, 8, 4)
    assert real.steps[0].blocks == {"A": (1, 2, 3), "B": (1, 2, 4)}
    assert real.steps[0].hits == {"A": 0, "B": 8}
    assert real == Run(real.engine, run_pagedlab_vllm_rule(trace, 8, 4).steps)


def test_a_duplicate_block_is_freed_to_the_back_as_vllm_keeps_it() -> None:
    """An 8-token prompt cached whole; again: 1 block hits, the last is recomputed into a
    duplicate, which vLLM keeps hashed (freed to the back, an eviction when reused)."""
    from pagedlab.frontier.oracles.vllm_kv import run_vllm

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


@pytest.mark.parametrize("block_size", [4, 16, 256, 1056])
def test_the_miss_classifier_hits_what_vllm_hits(block_size: int) -> None:
    """Notebook 11's workload: a prompt admitted after another in the same step hits it."""
    from pagedlab.frontier.oracles.trace import prompt_steps
    from pagedlab.frontier.oracles.vllm_kv import run_vllm
    from pagedlab.ground.checks import ceil_div
    from pagedlab.pictures.control_scenes import MISS_POOL_TOKENS, miss_scene, miss_workload

    pool = ceil_div(MISS_POOL_TOKENS, block_size) + 1
    real = run_vllm(prompt_steps(miss_workload()), pool, block_size)
    hits = {name: h for step in real.steps for name, h in step.hits.items()}
    assert hits == {r.name: r.counts["hit"] for r in miss_scene(block_size).results}


@pytest.mark.parametrize(("prefix", "suffixes", "block_size"), [
    (908, [20] * 4, 1056), (908, [20] * 4, 64), (256, [0, 0, 3], 16), (7, [1, 0], 2),
])  # fmt: skip
def test_the_hit_rate_law_exercise_is_vllms(prefix: int, suffixes: list, block_size: int) -> None:
    from pagedlab.exercises.nb11 import shared_prefix_hits
    from pagedlab.frontier.oracles.vllm_kv import run_vllm

    shared = tuple(range(1, prefix + 1))
    trace = tuple(
        (("admit", f"R{i}", shared + tuple(range(10_000 * (i + 1), 10_000 * (i + 1) + s))),)
        for i, s in enumerate(suffixes)
    )
    real = run_vllm(trace, 4 * (prefix + 64) // block_size + 8, block_size)
    hits = sum(h for step in real.steps for h in step.hits.values())
    assert hits == shared_prefix_hits(prefix, suffixes, block_size)


def test_without_prefix_caching_vllm_gives_c_blocks_2_1_as_peers_says() -> None:
    from pagedlab.frontier.oracles.trace import takes
    from pagedlab.frontier.oracles.vllm_kv import run_vllm
    from pagedlab.frontier.peers import THE_TRACE, run_trace

    real = run_vllm(takes(THE_TRACE), 8, 4, enable_caching=False)
    assert real.steps[-1].blocks["C"] == tuple(run_trace("vllm").blocks["C"]) == (2, 1)
    assert run_vllm(takes(THE_TRACE), 8, 4).steps[-1].blocks["C"] == (2, 6)  # block 1 hashed
