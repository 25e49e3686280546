"""The engine's tokens equal the contiguous oracle's, whatever the pages and the scheduler did.

One tiny seeded model (TINY: 2 layers, 4 query heads over 2 kv heads, head_dim 8), a fixed
workload of five prompts (two sharing a 7-token prefix, one a duplicate), 6 new tokens each.
The grid crosses pool sizes small enough to preempt, block sizes 1..16, budgets with and
without chunked prefill, swap and recompute, prefix caching on and off; every cell asserts
token identity with generate_contiguous, and the cells meant to preempt assert they did.
Decodes read the pages with batched torch on a CPU (the engine's fast path); the kernel
cells read them through the Triton kernel too and compare every launch with the torch path.
The memory the requests held is checked against an Orca-style reservation.

Parallel sampling (§4.4): ``Engine.sample`` with n = 2 seeded samples per prompt equals
``sample_contiguous`` (each sample alone, the same per-sample generator) over pools that
preempt (swap and recompute), block sizes 1..5 (partly filled last prompt blocks, so the
samples copy on write, counted), prefix caching on and off.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import pagedlab
from pagedlab.engine import Engine
from pagedlab.memory.capacity import prefill_need
from pagedlab.model import TINY, TinyLlama, generate_contiguous, sample_contiguous
from pagedlab.model.sampling import draw, sample_generator, sample_seed

NEW = 6
MODEL = TinyLlama(TINY, seed=11, init_std=0.3)
_g = torch.Generator().manual_seed(7)
_base = [torch.randint(0, 64, (n,), generator=_g).tolist() for n in (6, 11, 3, 9)]
PROMPTS = [*_base, _base[1][:7] + [5, 1, 2], _base[2]]  # shared prefix; a duplicate prompt
ORACLE = [generate_contiguous(MODEL, p, NEW) for p in PROMPTS]
# The engine's own decode read on a CPU is batched torch (fast); the kernel cells of the grids
# read the same pages through the Triton kernel (in its interpreter here) and check every
# launch against the torch path's output.


def kernel_checked(calls: list[int]) -> Callable[..., torch.Tensor]:
    """A decode read that runs the Triton kernel and the torch path on the same pages,
    asserts they agree, records each launch's batch size and returns the kernel's output."""

    def read(query: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        calls.append(query.shape[0])
        out = pagedlab.paged_attention(query, *args)
        torch.testing.assert_close(out, pagedlab.torch_paged_attention(query, *args))
        return out

    return read


# (num_blocks, block_size, preemption, token_budget, chunked, prefix_caching, must_preempt,
#  kernel: decodes through paged_attention in Triton's interpreter, else reference_attention)
GRID = [
    (64, 1, "recompute", None, None, True, False, False),
    (10, 2, "recompute", None, None, False, True, True),
    (10, 2, "swap", None, None, True, True, False),
    (7, 3, "recompute", 6, True, True, True, True),
    (7, 3, "swap", 5, True, False, True, False),
    (5, 4, "swap", 4, True, True, True, True),
    (5, 4, "recompute", 12, False, True, True, False),
    (4, 5, "recompute", 3, True, False, True, False),
    (3, 8, "swap", 7, True, True, True, True),
    (3, 16, "recompute", None, None, True, False, False),
]


@pytest.mark.parametrize(
    (
        "num_blocks",
        "block_size",
        "preemption",
        "budget",
        "chunked",
        "prefix",
        "must_preempt",
        "kernel",
    ),
    GRID,
)
def test_tokens_equal_the_contiguous_oracle(
    num_blocks: int,
    block_size: int,
    preemption: str,
    budget: int | None,
    chunked: bool | None,
    prefix: bool,
    must_preempt: bool,
    kernel: bool,
) -> None:
    launches: list[int] = []
    engine = Engine(
        MODEL,
        num_blocks,
        block_size,
        preemption=preemption,
        token_budget=budget,
        prefix_caching=prefix,
        chunked_prefill=chunked,
        decode_attention=kernel_checked(launches) if kernel else None,
    )
    assert engine.generate(PROMPTS, NEW) == ORACLE
    run = engine.last_run
    assert run is not None
    run.scheduler.check_invariants()  # no block leaked
    assert engine.allocator.num_free == num_blocks
    if must_preempt:
        assert run.preemptions > 0
    assert (len(launches) > 0) == kernel
    if chunked:  # chunked prefill keeps every step within the budget
        assert budget is not None and all(s.result.tokens <= budget for s in run.steps)


def test_steps_stream_the_tokens_and_swaps_copy_every_block_once() -> None:
    engine = Engine(MODEL, 7, 3, preemption="swap", token_budget=5, prefix_caching=False)
    assert engine.generate(PROMPTS, NEW) == ORACLE
    run = engine.last_run
    assert run is not None
    streamed: dict[str, list[int]] = {name: [] for name in run.names}
    for step in run.steps:
        for name, tokens in step.new_tokens.items():
            streamed[name] += tokens
    assert [streamed[name] for name in run.names] == ORACLE  # each token once, in order
    moved = run.scheduler.blocks_swapped_out + run.scheduler.blocks_swapped_in
    assert moved > 0 and engine.stats.blocks_copied == moved


def test_the_kernel_reads_the_pages_the_torch_path_reads() -> None:
    calls: list[int] = []
    engine = Engine(MODEL, 16, 4, decode_attention=kernel_checked(calls))
    assert engine.generate(PROMPTS[:3], NEW) == ORACLE[:3]
    # 7 decode steps per request, once per layer each step; batched: several rows a call.
    assert sum(calls) == 3 * (NEW - 1) * MODEL.num_layers == engine.stats.decode_tokens * 2
    assert len(calls) == engine.stats.kernel_calls and max(calls) == 3


def test_reference_decode_path_gives_the_same_tokens() -> None:
    engine = Engine(MODEL, 12, 4, decode_attention=pagedlab.reference_attention)
    assert engine.generate(PROMPTS, NEW) == ORACLE


def test_prefix_caching_hits_and_saves_prefill_but_not_tokens() -> None:
    # A budget staggers admissions: a prompt admitted in the same step as the one it shares
    # with cannot hit (blocks are cached once their K/V is in the pages, after the step).
    on = Engine(MODEL, 40, 2, token_budget=8)
    off = Engine(MODEL, 40, 2, token_budget=8, prefix_caching=False)
    assert on.generate(PROMPTS, NEW) == off.generate(PROMPTS, NEW) == ORACLE
    assert on.last_run is not None
    assert on.last_run.scheduler.hit_tokens > 0  # type: ignore[attr-defined]
    assert on.stats.prefill_tokens < off.stats.prefill_tokens
    again = on.generate(PROMPTS[:1], NEW)  # a later call hits the earlier call's blocks
    assert again == ORACLE[:1]


def test_memory_held_versus_an_orca_reservation() -> None:
    engine = Engine(MODEL, 64, 4, prefix_caching=False)
    engine.generate(PROMPTS, NEW)
    run = engine.last_run
    assert run is not None
    for step in run.steps:
        groups = run.scheduler.groups.values()
        # §4.2: waste is under one block per running sequence, never the reservation's.
        assert step.running_blocks * 4 - step.slots_used < 4 * len(groups)
        assert step.slots_used <= step.reserved_slots
    peak = max(s.running_blocks * 4 for s in run.steps)
    orca = sum(len(p) + NEW for p in PROMPTS)
    assert peak < orca  # decoding grows block by block; the reservation is held from the start


def test_one_new_token_and_bad_input() -> None:
    engine = Engine(MODEL, 8, 4)
    assert engine.generate([PROMPTS[0]], 1) == [ORACLE[0][:1]]
    with pytest.raises(ValueError, match="more than the pool's 8"):
        engine.generate([[1] * 30], 4)
    with pytest.raises(ValueError, match=r"prompts\[1\]\[0\] must be <= 63"):
        engine.generate([[1], [99]], 2)
    with pytest.raises(ValueError, match="preemption must be one of"):
        Engine(MODEL, 8, 4, preemption="drop")
    with pytest.raises(ValueError, match="block_size"):
        Engine(MODEL, 8, 0)
    assert engine.allocator.num_free == 8
    assert engine.generate([PROMPTS[2]], 3) == [ORACLE[2][:3]]  # still usable


@pytest.mark.slow
@pytest.mark.parametrize("block_size", range(1, 17))
@pytest.mark.parametrize("preemption", ["swap", "recompute"])
def test_every_block_size_under_pressure(block_size: int, preemption: str) -> None:
    """The engine's tables, slot mappings, swaps and recomputes at every block size; decodes
    read the pages through reference_attention (the kernel at every block size 1-16:
    tests/attention/test_kernel_grid.py; the kernel inside the engine: GRID's kernel cells)."""
    longest = max(len(p) for p in PROMPTS) + NEW
    blocks = -(-longest // block_size) + 1
    engine = Engine(MODEL, blocks, block_size, preemption=preemption, token_budget=5)
    assert engine.generate(PROMPTS, NEW) == ORACLE


# --- parallel sampling (§4.4): n seeded samples per prompt, forked, copy-on-write -------------
# Prompts of 6, 11 and 3 tokens; n = 2 samples; the oracle runs each sample alone.
S_PROMPTS, S_NEW, S_N, S_SEED = PROMPTS[:3], 5, 2, 3
S_ORACLE = [
    sample_contiguous(MODEL, p, S_NEW, S_N, temperature=1.0, seed=S_SEED, request=i)
    for i, p in enumerate(S_PROMPTS)
]


def partial_prompts(block_size: int) -> int:
    """Prompts whose last block is partly filled: each sample but one copies it on write."""
    return sum(1 for p in S_PROMPTS if len(p) % block_size)


# (num_blocks, block_size, preemption, token_budget, prefix_caching, must_preempt, kernel)
SAMPLE_GRID = [
    (64, 1, "recompute", None, True, False, False),  # block-aligned prompts: no copy
    (64, 4, "recompute", None, False, False, True),  # every prompt partial, no preemption
    (9, 3, "swap", 6, True, True, False),
    (9, 3, "recompute", 6, False, True, False),
    (6, 5, "swap", None, False, True, False),
    (6, 5, "recompute", None, True, True, False),  # the recompute hits the cached prompt
    (12, 2, "recompute", 4, True, True, False),
]


@pytest.mark.parametrize(
    ("num_blocks", "block_size", "preemption", "budget", "prefix", "must_preempt", "kernel"),
    SAMPLE_GRID,
)
def test_samples_equal_the_oracle_through_fork_and_copy_on_write(
    num_blocks: int,
    block_size: int,
    preemption: str,
    budget: int | None,
    prefix: bool,
    must_preempt: bool,
    kernel: bool,
) -> None:
    engine = Engine(
        MODEL,
        num_blocks,
        block_size,
        preemption=preemption,
        token_budget=budget,
        prefix_caching=prefix,
        decode_attention=kernel_checked([]) if kernel else None,
    )
    out = engine.sample(S_PROMPTS, S_NEW, n=S_N, temperature=1.0, seed=S_SEED)
    assert out == S_ORACLE
    run = engine.last_run
    assert run is not None
    run.scheduler.check_invariants()
    assert engine.allocator.num_free == num_blocks
    assert (run.preemptions > 0) == must_preempt
    copies = engine.stats.copies_on_write
    if must_preempt:  # a recompute forks again and copies again; a swap keeps the copies
        assert copies >= (S_N - 1) * partial_prompts(block_size)
    else:  # exactly one copy per sample but the last, per partly filled prompt block
        assert copies == (S_N - 1) * partial_prompts(block_size)
    if block_size == 1:
        assert copies == 0
    if prefix and preemption == "recompute" and must_preempt:
        assert run.scheduler.hit_tokens > 0  # type: ignore[attr-defined]


def test_samples_are_samples_not_the_greedy_tokens() -> None:
    """The grid's oracle really samples: samples differ from each other and from greedy."""
    greedy = ORACLE[: len(S_PROMPTS)]
    assert any(s[0] != s[1] for s in S_ORACLE)
    assert any(s[0] != [t for t in g[:S_NEW]] for s, g in zip(S_ORACLE, greedy, strict=True))
    other_seed = [
        sample_contiguous(MODEL, p, S_NEW, S_N, 1.0, S_SEED + 1, request=i)
        for i, p in enumerate(S_PROMPTS)
    ]
    assert other_seed != S_ORACLE


def test_the_rng_protocol_is_per_sample() -> None:
    """Sample s's stream depends on (seed, request, s) only: not on n, not on other prompts."""
    p = S_PROMPTS[1]
    assert sample_contiguous(MODEL, p, S_NEW, 3, 1.0, S_SEED, request=1)[:2] == S_ORACLE[1]
    engine = Engine(MODEL, 32, 4)
    alone = engine.sample([S_PROMPTS[0]], S_NEW, n=1, temperature=1.0, seed=S_SEED)
    assert alone == [S_ORACLE[0][:1]]  # request 0, sample 0: the same stream as in the batch
    assert sample_seed(S_SEED, 0, 1) != sample_seed(S_SEED, 1, 0)


def test_temperature_zero_is_greedy_and_a_tiny_temperature_its_limit() -> None:
    greedy = [g[:S_NEW] for g in ORACLE[: len(S_PROMPTS)]]
    engine = Engine(MODEL, 32, 4)
    assert engine.sample(S_PROMPTS, S_NEW, n=2, temperature=0) == [[g, g] for g in greedy]
    tiny = engine.sample(S_PROMPTS, S_NEW, n=1, temperature=1e-6, seed=1)
    assert [s[0] for s in tiny] == greedy
    assert engine.generate(S_PROMPTS, S_NEW) == greedy  # generate's contract unchanged


def test_gumbel_max_draws_follow_the_softmax() -> None:
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    generator = sample_generator(0, 0, 0)
    draws = [draw(logits, generator, 0.5) for _ in range(4000)]
    freq = torch.bincount(torch.tensor(draws), minlength=4).double() / len(draws)
    want = torch.softmax(logits.double() / 0.5, dim=0)
    assert torch.allclose(freq, want, atol=0.03), (freq, want)


def test_right_after_the_fork_the_samples_share_every_prompt_block() -> None:
    """§4.4: the prompt is prefilled once; its n tables hold the same blocks (ref count n)."""
    engine = Engine(MODEL, 32, 4, prefix_caching=False)
    run = engine.start([S_PROMPTS[1]], S_NEW, n=3, temperature=1.0, seed=S_SEED)
    engine.step(run)  # the whole prefill: forked at its end
    group = run.scheduler.groups["A"]
    assert len(group.tables) == 3 and engine.stats.copies_on_write == 0
    assert all(t.blocks == group.tables[0].blocks for t in group.tables)
    assert len(group.device_blocks()) == -(-len(S_PROMPTS[1]) // 4)
    assert all(engine.allocator.refcount(b) == 3 for b in group.device_blocks())
    record = engine.step(run)  # first decode: 2 of the 3 samples copy the partial last block
    assert engine.stats.copies_on_write == 2
    assert [len(t) for t in record.new_sample_tokens["A"]] == [1, 1, 1]


def test_sample_bad_input_changes_nothing() -> None:
    engine = Engine(MODEL, 8, 4, token_budget=2)
    with pytest.raises(ValueError, match="n must be >= 1"):
        engine.sample([S_PROMPTS[0]], 2, n=0)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        engine.sample([S_PROMPTS[0]], 2, temperature=-1.0)
    with pytest.raises(ValueError, match="more than token_budget = 2"):
        engine.sample([S_PROMPTS[0]], 2, n=3)
    with pytest.raises(ValueError, match=r"10 blocks of 4 \(2 sample\(s\) x 27 tokens, "):
        engine.sample([[1] * 16], 12, n=2)
    with pytest.raises(TypeError, match="temperature must be a number"):
        sample_contiguous(MODEL, S_PROMPTS[0], 2, temperature="hot")  # type: ignore[arg-type]
    assert engine.allocator.num_free == 8
    assert engine.sample([S_PROMPTS[0]], 3, n=2, seed=S_SEED) == [
        sample_contiguous(MODEL, S_PROMPTS[0], 3, 2, 1.0, S_SEED)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("block_size", range(1, 17))
@pytest.mark.parametrize("preemption", ["swap", "recompute"])
def test_samples_at_every_block_size_under_pressure(block_size: int, preemption: str) -> None:
    """As test_every_block_size_under_pressure, for n samples (fork, copy-on-write)."""
    need = max(prefill_need(len(p), S_NEW, S_N, block_size) for p in S_PROMPTS)
    engine = Engine(MODEL, need + 1, block_size, preemption=preemption, token_budget=5)
    assert engine.sample(S_PROMPTS, S_NEW, n=S_N, seed=S_SEED) == S_ORACLE
