"""The two free rules: a plain FIFO queue, and vLLM V1's split (unhashed front, hashed back).

The state machine replays any mix of tables, forks, prefix-cache admissions and frees under
either rule, and checks the allocator's free list against an oracle written the way vLLM's
``BlockPool.free_blocks`` is (``prepend_n`` of the unhashed blocks, ``append_n`` of the
hashed ones, a request's blocks given last block first).
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError, PrefixCache
from pagedlab.memory.allocator import FREE_RULES
from tests.machine_steps import (
    PICK,
    check,
    choose,
    integer,
    integers,
    one_of,
    run_random,
    setup,
    step,
)

SIZE = 4


def oracle_free(queue: list[int], ordered: list[int], hashed: set[int], rule: str) -> list[int]:
    """The free queue after blocks ``ordered`` (all reaching ref count 0) are freed."""
    if rule == "fifo":
        return queue + ordered
    fresh = [b for b in ordered if b not in hashed]
    cached = [b for b in ordered if b in hashed]
    return fresh + queue + cached  # prepend_n(fresh), append_n(cached)


class FreeRules(RuleBasedStateMachine):
    @setup(rule=one_of(list(FREE_RULES)), num_blocks=integer(2, 12))
    def start(self, rule: str, num_blocks: int) -> None:
        self.alloc = BlockAllocator(num_blocks, SIZE, free_rule=rule)  # type: ignore[arg-type]
        self.cache = PrefixCache(self.alloc)
        self.rule = rule
        self.queue = list(range(num_blocks))  # the oracle's free queue
        self.live: list[BlockTable] = []

    def _taken(self, before: list[int]) -> None:
        """Blocks that left the free list: the oracle drops them; new ones came off the front."""
        now = self.alloc.refcounts()
        taken = {b for b in range(len(now)) if before[b] == 0 < now[b]}
        self.queue = [b for b in self.queue if b not in taken]

    def _allocated_from_front(self, before: list[int], table: BlockTable, old: list[int]) -> None:
        new = [b for b in table.blocks if b not in old]
        assert new == before[: len(new)], f"allocated {new}, free list was {before}"

    @step(tokens=integers(0, 3, 1, 14))
    def admit(self, tokens: list[int]) -> None:
        refcounts, free = self.alloc.refcounts(), self.alloc.free_list()
        try:
            admission = self.cache.admit(tokens)
        except OutOfBlocksError:
            assert self.alloc.free_list() == free
            return
        hits = admission.hit_blocks
        free_after_hits = [b for b in free if b not in hits]
        new = admission.table.blocks[len(hits) :]
        assert new == free_after_hits[: len(new)], "new blocks come off the front"
        self._taken(refcounts)
        self.live.append(admission.table)

    @step(pre=lambda self: self.live, pick=PICK, n=integer(1, 6))
    def append(self, pick: int, n: int) -> None:
        table = choose(self.live, pick)
        refcounts, free, old = self.alloc.refcounts(), self.alloc.free_list(), table.blocks
        try:
            table.append_tokens(n)
        except OutOfBlocksError:
            return
        self._allocated_from_front(free, table, old)
        self._taken(refcounts)

    @step(pre=lambda self: self.live, pick=PICK)
    def fork(self, pick: int) -> None:
        self.live.append(choose(self.live, pick).fork())

    @step(pre=lambda self: self.live, pick=PICK)
    def free(self, pick: int) -> None:
        table = choose(self.live, pick)
        last_holder = [b for b in table.blocks[::-1] if self.alloc.refcount(b) == 1]
        hashed = {b for b in last_holder if self.alloc.is_hashed(b)}
        table.free()
        self.live.remove(table)
        self.queue = oracle_free(self.queue, last_holder, hashed, self.rule)

    @check
    def free_list_is_the_oracles(self) -> None:
        assert self.alloc.free_list() == self.queue

    @check
    def hashed_blocks_are_the_cached_ones(self) -> None:
        cached = set(self.cache.cached_blocks()) | self.cache.duplicates
        assert {b for b in range(self.alloc.num_blocks) if self.alloc.is_hashed(b)} == cached

    def teardown(self) -> None:
        for table in list(self.live):
            table.free()
        assert self.alloc.num_free == self.alloc.num_blocks


TestFreeRules = FreeRules.TestCase
TestFreeRules.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


def test_free_rules_2000_random_sequences() -> None:
    assert run_random(FreeRules, 2_000, steps=30) > 40_000


def _example(rule: str, prefix_caching: bool) -> BlockAllocator:
    """Notebook 02's history on 8 blocks: A takes 0, 1; B 2, 3; C 4; D 5-7; C, then A, end."""
    alloc = BlockAllocator(8, SIZE, free_rule=rule)  # type: ignore[arg-type]
    cache = PrefixCache(alloc)
    tables = []
    for i, blocks in enumerate((2, 2, 1, 3)):
        tokens = [100 * i + t for t in range(blocks * SIZE)]  # full blocks, no shared prefix
        if prefix_caching:
            tables.append(cache.admit(tokens).table)
        else:
            table = BlockTable(alloc)
            table.append_tokens(len(tokens))
            tables.append(table)
    a, _, c, _ = tables
    c.free()
    a.free()
    return alloc


@pytest.mark.parametrize("rule", FREE_RULES)
def test_the_example_is_the_same_under_both_rules_with_prefix_caching(rule: str) -> None:
    # every block of the example is full, so with prefix caching every one is hashed: all go back
    assert _example(rule, prefix_caching=True).free_list() == [4, 1, 0]


def test_without_prefix_caching_vllm_v1_puts_every_freed_block_in_front() -> None:
    assert _example("fifo", prefix_caching=False).free_list() == [4, 1, 0]
    # C's block 4 to the front, then A's run 1, 0 in front of it
    assert _example("vllm-v1", prefix_caching=False).free_list() == [1, 0, 4]


@pytest.mark.parametrize(("rule", "expected"), [("fifo", [2, 3, 1, 0]), ("vllm-v1", [1, 2, 3, 0])])
def test_a_partly_filled_last_block_is_reused_first_only_under_vllm_v1(
    rule: str, expected: list[int]
) -> None:
    alloc = BlockAllocator(4, SIZE, free_rule=rule)  # type: ignore[arg-type]
    table = PrefixCache(alloc).admit(list(range(6))).table  # block 0 full (hashed), 1 partial
    assert table.blocks == [0, 1] and alloc.is_hashed(0) and not alloc.is_hashed(1)
    table.free()
    assert alloc.free_list() == expected
    assert alloc.allocate() == expected[0]


@pytest.mark.parametrize("rule", FREE_RULES)
def test_prefix_cached_blocks_go_to_the_back_tail_first(rule: str) -> None:
    alloc = BlockAllocator(5, SIZE, free_rule=rule)  # type: ignore[arg-type]
    table = PrefixCache(alloc).admit(list(range(3 * SIZE))).table
    assert table.blocks == [0, 1, 2]
    table.free()
    # the tail is evicted first, the first block (the most shared prefix) last
    assert alloc.free_list() == [3, 4, 2, 1, 0]


def test_free_many_is_vllms_free_blocks_one_run_at_each_end() -> None:
    alloc = BlockAllocator(8, SIZE, free_rule="vllm-v1")
    blocks = [alloc.allocate() for _ in range(6)]  # 0..5; free list [6, 7]
    for b in (1, 3):
        alloc.mark_hashed(b)
    alloc.free_many([5, 1, 4, 3, 0])
    assert alloc.free_list() == [5, 4, 0, 6, 7, 1, 3]
    assert blocks[2] == 2 and alloc.refcount(2) == 1


@pytest.mark.parametrize("rule", FREE_RULES)
def test_evict_first_puts_hashed_blocks_at_the_front_keeping_their_hash(rule: str) -> None:
    # vLLM's free_blocks(evict_first=True), for blocks another tier holds: a front run
    alloc = BlockAllocator(5, SIZE, free_rule=rule)  # type: ignore[arg-type]
    cache = PrefixCache(alloc)
    table = cache.admit(list(range(3 * SIZE))).table
    table.free(evict_first=[0, 1])
    assert alloc.free_list() == [1, 0, 3, 4, 2]
    assert alloc.is_hashed(0) and set(cache.cached_blocks()) == {0, 1, 2}


def test_the_hash_mark_goes_when_the_block_is_handed_out_and_stays_on_reuse() -> None:
    alloc = BlockAllocator(2, SIZE, free_rule="vllm-v1")
    block = alloc.allocate()
    alloc.mark_hashed(block)
    alloc.free(block)  # hashed: to the back
    assert alloc.free_list() == [1, 0]
    alloc.reuse(block)  # a cache hit: the contents, and so the hash, are still there
    assert alloc.is_hashed(block)
    alloc.free(block)
    alloc.allocate()
    alloc.allocate()  # hands 0 out again: its old hash is evicted
    assert not alloc.is_hashed(block)


def test_a_closed_prefix_cache_drops_its_marks() -> None:
    alloc = BlockAllocator(4, SIZE, free_rule="vllm-v1")
    cache = PrefixCache(alloc)
    table = cache.admit(list(range(9))).table
    assert [alloc.is_hashed(b) for b in table.blocks] == [True, True, False]
    cache.close()
    assert not any(alloc.is_hashed(b) for b in range(4))
    table.free()
    assert alloc.free_list() == [2, 1, 0, 3]  # no hashes left: all to the front


@pytest.mark.parametrize(
    ("rule", "error", "message"),
    [
        ("lifo", ValueError, "free_rule must be one of ('fifo', 'vllm-v1'), got 'lifo'"),
        (1, TypeError, "free_rule must be a str, one of ('fifo', 'vllm-v1'), got 1"),
        (None, TypeError, "got None"),
    ],
)
def test_a_bad_free_rule_is_named(rule: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        BlockAllocator(4, SIZE, free_rule=rule)  # type: ignore[arg-type]


def test_marking_a_free_block_is_refused_and_changes_nothing() -> None:
    alloc = BlockAllocator(4, SIZE, free_rule="vllm-v1")
    with pytest.raises(ValueError, match="block 2 is already free"):
        alloc.mark_hashed(2)
    with pytest.raises(ValueError, match="block 9 is out of range"):
        alloc.mark_hashed(9)
    assert not alloc.is_hashed(2) and alloc.free_list() == [0, 1, 2, 3]
    alloc.unmark_hashed(2)  # nothing to drop: harmless
    assert alloc.free_rule == "vllm-v1"
    assert "free_rule='vllm-v1'" in repr(alloc)
