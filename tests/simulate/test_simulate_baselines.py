"""The paper's baselines (§6.1): reservation rules, the buddy allocator and its invariants,
§6.5's consequence, and paper.py holding each number once.

Bad input to the reservation rules and the contiguous allocators raises a TypeError (wrong
kind) or a ValueError (wrong value) naming the argument and the value; a refused allocation
or free changes nothing."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pagedlab.ground import paper
from pagedlab.simulate import (
    PAPER_POOL_SLOTS,
    BuddyAllocator,
    FirstFit,
    Trace,
    buddy_extent,
    orca_oracle,
    orca_pow2,
    reserved_slots,
    simulate,
)
from pagedlab.simulate.reservation import OneRequest
from tests.refuses import refuses


def test_reserved_slots_examples() -> None:
    assert reserved_slots("pow2", 100, 25) == 132
    assert reserved_slots("max", 100, 25) == 2048 == paper.MAX_SEQ_LEN
    assert reserved_slots("oracle", 100, 25) == 125
    out, reserved_for_out = paper.POW2_EXAMPLE  # §6.1: output 25 -> 32 positions
    assert reserved_slots("pow2", 1, out) - 1 == reserved_for_out
    assert reserved_slots("pow2", 1500, 548) == 2048  # never beyond the longest sequence
    assert reserved_slots("pow2", 10, 32) == 42 and reserved_slots("pow2", 10, 33) == 74


def test_buddy_extent_examples() -> None:
    assert buddy_extent(132) == 256
    assert [buddy_extent(n) for n in (1, 2, 3, 4, 5, 1024, 1025, 2048)] == [
        1,
        2,
        4,
        4,
        8,
        1024,
        2048,
        2048,
    ]


@given(p=st.integers(1, 2047), data=st.data())
def test_reservation_rules(p: int, data: st.DataObject) -> None:
    o = data.draw(st.integers(1, 2048 - p))
    for policy in ("max", "pow2", "oracle"):
        r = reserved_slots(policy, p, o)
        assert p + o <= r <= 2048  # the request always fits its reservation
        e = buddy_extent(r)
        assert r <= e < 2 * r and e & (e - 1) == 0
    assert reserved_slots("pow2", p, o) - p < 2 * o or reserved_slots("pow2", p, o) == 2048
    assert reserved_slots("oracle", p, o) == p + o


def test_chatbot_consequence_section_6_5() -> None:
    """§6.5: with 1024-token prompts, the buddy allocator leaves 1024 slots for the output,
    whatever the baseline predicts."""
    prompt = paper.CHATBOT_PROMPT_LEN
    for policy in ("max", "pow2", "oracle"):
        outputs = range(1, paper.CHATBOT_MAX_OUTPUT_LEN + 1)
        room = {buddy_extent(reserved_slots(policy, prompt, o)) - prompt for o in outputs}
        assert room == {1024}, policy


def test_buddy_splits_and_merges_by_hand() -> None:
    b = BuddyAllocator(16)
    assert b.alloc(3) == 0  # 16 -> 8 + 8 -> 4 + 4: extent [0, 4)
    assert b.free_blocks() == [(4, 4), (8, 8)]
    assert b.alloc(4) == 4 and b.alloc(1) == 8  # the 8 at 8 splits to 1 + 1 + 2 + 4
    assert b.free_blocks() == [(9, 1), (10, 2), (12, 4)]
    assert b.alloc(16) is None and b.free_blocks() == [(9, 1), (10, 2), (12, 4)]  # no change
    b.free(0)
    assert b.free_blocks() == [(0, 4), (9, 1), (10, 2), (12, 4)]  # buddy at 4 is live
    b.free(4)
    assert b.free_blocks() == [(0, 8), (9, 1), (10, 2), (12, 4)]
    b.free(8)  # 8+9 -> 8..10, +10..12 -> 8..12, +12..16 -> 8..16, + 0..8 -> 0..16
    assert b.free_blocks() == [(0, 16)] and b.used == 0
    with pytest.raises(ValueError, match="no live extent starts at 8"):
        b.free(8)


def test_buddy_pool_of_the_paper() -> None:
    b = BuddyAllocator(PAPER_POOL_SLOTS)
    assert [z for _, z in b.initial_blocks()] == [8192, 4096, 2048, 1024, 256, 64, 32, 16]
    starts = [b.alloc(2048) for _ in range(8)]
    assert None not in starts[:7] and starts[7] is None  # 7 Max reservations fit, not 8
    assert PAPER_POOL_SLOTS - b.used == 1392  # what Orca (Max) can never use: 8.9 %
    paper_max_external = paper.FIG2_BREAKDOWN["Orca (Max)"]["external"]
    assert paper_max_external is not None
    assert math.isclose(round(1392 / PAPER_POOL_SLOTS, 3), paper_max_external)


def test_buddy_fragmentation_first_fit_would_not_have() -> None:
    """Rounding: three requests of 132 slots take 3 x 256 in a buddy space of 768 and a
    fourth does not fit, where first-fit still has room for two more."""
    b, f = BuddyAllocator(768), FirstFit(768)
    assert all(b.alloc(132) is not None for _ in range(3)) and b.alloc(132) is None
    assert all(f.alloc(132) is not None for _ in range(5)) and f.alloc(132) is None


class BuddyMachine(RuleBasedStateMachine):
    """Random alloc / free on a buddy allocator of random size; invariants after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.b: BuddyAllocator | None = None
        self.live: dict[int, int] = {}

    @initialize(size=st.integers(1, 5000))
    def make(self, size: int) -> None:
        self.b = BuddyAllocator(size)

    @rule(n=st.integers(1, 2100))
    def alloc(self, n: int) -> None:
        assert self.b is not None
        before = self.b.free_blocks()
        start = self.b.alloc(n)
        if start is None:
            assert self.b.free_blocks() == before  # a failed alloc changes nothing
            assert self.b.largest_free < buddy_extent(n)
        else:
            self.live[start] = buddy_extent(n)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        assert self.b is not None
        start = data.draw(st.sampled_from(sorted(self.live)))
        self.b.free(start)
        del self.live[start]

    @invariant()
    def extents_are_aligned_powers_of_two_without_overlap(self) -> None:
        if self.b is None:
            return
        assert self.b.live_extents() == sorted(self.live.items())
        pieces = self.b.live_extents() + self.b.free_blocks()
        for start, size in pieces:
            assert size & (size - 1) == 0 and start % size == 0
        pieces.sort()
        for (s0, z0), (s1, _) in zip(pieces, pieces[1:], strict=False):
            assert s0 + z0 <= s1  # no overlap
        assert sum(z for _, z in pieces) == self.b.size  # live + free cover the pool
        assert pieces[-1][0] + pieces[-1][1] <= self.b.size

    def teardown(self) -> None:
        if self.b is None:
            return
        for start in list(self.live):
            self.b.free(start)
        assert self.b.free_blocks() == self.b.initial_blocks()  # merging restores the pool


TestBuddy = BuddyMachine.TestCase
TestBuddy.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_buddy_rounding_is_its_own_category() -> None:
    """One request of prompt 100, output 25 under Pow2: reservation 132, extent 256."""
    tr = Trace(np.zeros(1), np.array([100]), np.array([25]), 100.0)
    r = simulate(tr, orca_pow2(), pool_slots=1024, record=True)
    h = r.history
    assert h is not None
    assert set(h["internal"]) == {132 - 125} and set(h["rounding"]) == {256 - 132}
    ff = simulate(tr, orca_pow2(allocator="first_fit"), pool_slots=1024, record=True)
    assert ff.history is not None and set(ff.history["rounding"]) == {0}
    oracle = simulate(tr, orca_oracle(), pool_slots=1024)
    assert oracle.mean_slots["internal"] == 0 and oracle.mean_slots["rounding"] == 128 - 125
    # nobody waits, so the free 1024 - 128 slots are idle; the rounding is "external & others"
    assert oracle.mean_slots["idle"] == 1024 - 128
    assert math.isclose(oracle.fig2_shares()["external"], 3 / 128)


def test_paper_numbers_are_consistent() -> None:
    for name, row in paper.FIG2_BREAKDOWN.items():
        known = [v for v in row.values() if v is not None]
        assert len(known) == 1 or math.isclose(sum(known), 1.0, abs_tol=0.0011), name
    assert paper.TOKEN_SHARE_RANGE_EXISTING == (0.204, 0.382)
    assert paper.KV_BYTES_PER_TOKEN_OPT13B == 800 * 1024
    assert PAPER_POOL_SLOTS == 15728
    for mode, by_width in paper.FIG15_SAVED.items():
        lo, hi = paper.SECTION_6_3_SAVED_RANGE[mode]  # the text's range, Fig. 15 rounded
        assert round(min(by_width.values()), 3) == lo and round(max(by_width.values()), 3) == hi


def test_paper_imports_nothing_from_pagedlab() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(paper))
    modules = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])  # type: ignore[attr-defined]
    ]
    assert not [m for m in modules if m and m.startswith("pagedlab")], modules


# --- bad input: (call, exception, words the message must contain) ---------------------------
BAD_CALLS: list[tuple[Callable[[], object], type[Exception], str]] = [
    # reserved_slots / buddy_extent / OneRequest
    (lambda: reserved_slots("half", 10, 5), ValueError, "policy must be one of"),
    (lambda: reserved_slots(2, 10, 5), TypeError, "policy must be a str"),
    (lambda: reserved_slots("pow2", True, 5), TypeError, "prompt_len must be an integer, got True"),
    (lambda: reserved_slots("pow2", 1.5, 5), TypeError, "prompt_len must be an integer, got 1.5"),
    (lambda: reserved_slots("pow2", 0, 5), ValueError, "prompt_len must be >= 1, got 0"),
    (lambda: reserved_slots("pow2", 10, -3), ValueError, "output_len must be >= 1, got -3"),
    (lambda: reserved_slots("max", 2000, 49), ValueError, "output_len must be <= 48, got 49"),
    (lambda: reserved_slots("max", 10**30, 5), ValueError, "prompt_len must be <= 2047"),
    (lambda: reserved_slots("oracle", np.bool_(True), 5), TypeError, "prompt_len"),
    (lambda: reserved_slots("oracle", torch.tensor(True), 5), TypeError, "prompt_len"),
    (lambda: reserved_slots("oracle", 10, 5, max_len=1), ValueError, "max_len must be >= 2"),
    (lambda: buddy_extent(0), ValueError, "slots must be >= 1, got 0"),
    (
        lambda: buddy_extent(np.float64(3.0)),
        TypeError,
        "slots must be an integer, got np.float64(3.0)",
    ),
    (lambda: buddy_extent("4"), TypeError, "slots must be an integer, got '4'"),
    (lambda: OneRequest(8, 2, 3, 2048, 16), ValueError, "generated must be in [0, 2], got 3"),
    (lambda: OneRequest(8, 2, 0, 9, 16), ValueError, "reservation of 9 slots"),
    (lambda: OneRequest(8.0, 2, 0, 2048, 16), TypeError, "prompt must be an integer, got 8.0"),
    (lambda: OneRequest(8, 2, 0, 2048, 0), ValueError, "block_size must be >= 1, got 0"),
    # contiguous allocators
    (lambda: BuddyAllocator(0), ValueError, "size must be >= 1, got 0"),
    (lambda: BuddyAllocator(16.0), TypeError, "size must be an integer, got 16.0"),
    (lambda: BuddyAllocator(16).alloc(0), ValueError, "slots must be >= 1, got 0"),
    (lambda: BuddyAllocator(16).alloc(None), TypeError, "slots must be an integer, got None"),
    (lambda: BuddyAllocator(16).free(3), ValueError, "no live extent starts at 3"),
    (lambda: BuddyAllocator(16).free(-1), ValueError, "start must be >= 0, got -1"),
    (lambda: FirstFit(-5), ValueError, "size must be >= 1, got -5"),
    (lambda: FirstFit(16).alloc(False), TypeError, "slots must be an integer, got False"),
    (lambda: FirstFit(16).free(2.0), TypeError, "start must be an integer, got 2.0"),
    (
        lambda: reserved_slots("pow2", 1, 2**62, max_len=2**63),
        ValueError,
        "max_len must be <= ",
    ),  # beyond what the model represents
]


@pytest.mark.parametrize(("call", "kind", "words"), BAD_CALLS, ids=[c[2][:40] for c in BAD_CALLS])
def test_bad_values(call: Callable[[], object], kind: type[Exception], words: str) -> None:
    refuses(call, kind, match=re.escape(words))


def _used(space: BuddyAllocator | FirstFit) -> tuple[object, ...]:
    return space.used, (space.free_blocks() if isinstance(space, BuddyAllocator) else None)


def test_refused_calls_change_nothing() -> None:
    for space in (BuddyAllocator(100), FirstFit(100)):
        space.alloc(30)
        state = lambda space=space: _used(space)  # noqa: E731
        for bad in (0, -1, True, 2.5, "3"):  # ArgumentTypeError is a ValueError too
            refuses(lambda space=space, bad=bad: space.alloc(bad), state=state)  # type: ignore[misc]
        refuses(lambda space=space: space.free(7), state=state)
