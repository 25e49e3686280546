"""Stateful property test: fork / append / free / beam step / prefix reuse, in any order.

A fake KV store (one token id per slot) is written exactly as a model would: the computed
tokens at their slots, copy-on-write copies before writes. Invariants after every step:

- the ref count of every block equals the number of live tables holding it;
- every live table reads back its own token ids through its block table (so copy-on-write
  copied what it had to, and a prefix-cache hit holds the same token ids);
- every write went into a block of ref count 1;
- every cached block that a table holds is cached with that table's token ids;
- failed operations (OutOfBlocksError) changed nothing;
- freeing everything returns every block to the pool.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.sharing import beam_step, holders
from tests.machine_steps import PICK, check, choose, integer, integers, run_random, step

SIZE, BLOCKS = 4, 16
TOKENS = integers(0, 2, 1, 12)  # few ids: many shared prefixes


class Sharing(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alloc = BlockAllocator(BLOCKS, SIZE)
        self.cache = PrefixCache(self.alloc)
        self.store = [[-1] * SIZE for _ in range(BLOCKS)]  # the fake KV: a token id per slot
        self.live: list[tuple[BlockTable, list[int]]] = []
        self.alloc.subscribe(self._check_write)

    def _check_write(self, event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "write":
            assert event.refcount == 1, f"write into block {event.block} of ref count >1"

    def _write(self, table: BlockTable, tokens: list[int], first: int) -> None:
        for pos in range(first, len(tokens)):
            block, offset = table.slot(pos)
            self.store[block][offset] = tokens[pos]

    def _snapshot(self) -> tuple[list[int], list[int], dict[int, str]]:
        return self.alloc.refcounts(), self.alloc.free_list(), self.cache.cached_blocks()

    @step(tokens=TOKENS)
    def admit(self, tokens: list[int]) -> None:
        before = self._snapshot()
        try:
            result = self.cache.admit(tokens)
        except OutOfBlocksError:
            assert self._snapshot() == before
            return
        for i, block in enumerate(result.hit_blocks):  # a hit holds the same token ids
            assert self.store[block] == tokens[i * SIZE : (i + 1) * SIZE]
        self._write(result.table, tokens, result.hit_tokens)
        self.live.append((result.table, list(tokens)))

    @step(pre=lambda self: self.live, pick=PICK)
    def fork(self, pick: int) -> None:
        table, tokens = choose(self.live, pick)
        self.live.append((table.fork(), list(tokens)))

    @step(pre=lambda self: self.live, pick=PICK, new=TOKENS)
    def append(self, pick: int, new: list[int]) -> None:
        table, tokens = choose(self.live, pick)
        before = self._snapshot()
        try:
            copy = table.append_tokens(len(new))
        except OutOfBlocksError:
            assert self._snapshot() == before
            return
        if copy is not None:
            self.store[copy.dst] = list(self.store[copy.src])
        first = len(tokens)
        tokens.extend(new)
        self._write(table, tokens, first)
        self.cache.register(table, tokens)

    @step(pre=lambda self: self.live, pick=PICK)
    def free(self, pick: int) -> None:
        index = pick % len(self.live)
        table, _ = self.live.pop(index)
        table.free()

    @step(
        pre=lambda self: self.live,
        picks=integers(0, 99, 1, 3),
        kept=integers(0, 99, 1, 4),
        n=integer(1, 5),
        token=integer(0, 2),
    )
    def beam(self, picks: list[int], kept: list[int], n: int, token: int) -> None:
        chosen = list(dict.fromkeys(p % len(self.live) for p in picks))
        beams = [self.live[i] for i in chosen]
        parents = [k % len(beams) for k in kept]
        before = self._snapshot()
        try:
            step = beam_step([t for t, _ in beams], parents, n)
        except OutOfBlocksError:
            assert self._snapshot() == before
            return
        for copy in step.copies:  # copies first, then writes (see beam_step)
            self.store[copy.dst] = list(self.store[copy.src])
        self.live = [item for i, item in enumerate(self.live) if i not in chosen]
        for table, p in zip(step.beams, parents, strict=True):
            tokens = beams[p][1] + [token] * n
            self._write(table, tokens, len(beams[p][1]))
            self.live.append((table, tokens))

    @check
    def refcount_is_number_of_holders(self) -> None:
        held = holders([t for t, _ in self.live])
        counts = self.alloc.refcounts()
        assert all(counts[b] == len(held.get(b, [])) for b in range(BLOCKS))
        assert self.alloc.num_free == counts.count(0)

    @check
    def every_table_reads_back_its_tokens(self) -> None:
        for table, tokens in self.live:
            assert table.num_tokens == len(tokens)
            read = [self.store[s // SIZE][s % SIZE] for s in table.slot_mapping()]
            assert read == tokens

    @check
    def held_cached_blocks_hold_their_tokens(self) -> None:
        cached = self.cache.cached_blocks()
        for table, tokens in self.live:
            held = [(i, b) for i, b in enumerate(table.blocks) if b in cached]
            hashes = self.cache.hashes(tokens) if held else []
            for i, block in held:
                if (i + 1) * SIZE <= len(tokens):
                    assert self.cache.tokens_of(block) == tuple(tokens[i * SIZE : (i + 1) * SIZE])
                    assert hashes[i] == cached[block]

    def teardown(self) -> None:
        for table, _ in self.live:
            table.free()
        assert self.alloc.num_free == BLOCKS
        assert set(self.alloc.refcounts()) == {0}


TestSharing = Sharing.TestCase
TestSharing.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)


@pytest.mark.slow
def test_sharing_10000_random_sequences() -> None:
    assert run_random(Sharing, 10_000, steps=20) > 120_000
