"""Honest wrong answers that once passed, one per mistake: each is now rejected, by name.

Each variant is what a learner plausibly writes; each test asserts the check fails and that
its message names the case designed against that mistake (its ``why``).
"""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab.exercises import EXERCISES
from pagedlab.grade.cases import FAILED
from pagedlab.memory.prefix_cache import ROOT_HASH, chain_hash


def _fails_on(name: str, learner: Any, why: str) -> None:
    result = EXERCISES[name].check(learner)
    assert result.status == FAILED, result.message
    assert why in result.message, result.message


def test_blocks_needed_for_no_token() -> None:
    _fails_on("blocks_needed", lambda n, b: max(1, -(-n // b)), "an empty sequence")
    _fails_on("empty_slots", lambda n, b: (b - n % b) % b or (b if n == 0 else 0),
              "an empty sequence")  # fmt: skip


def test_place_newcomer_by_best_fit() -> None:
    def best_fit(refcounts: list[int], free_list: list[int], need: int) -> Any:
        holes, start = [], None
        for block, count in enumerate([*refcounts, 1]):
            if count == 0 and start is None:
                start = block
            elif count != 0 and start is not None:
                holes.append((block - start, start))
                start = None
        fitting = sorted(h for h in holes if h[0] >= need)
        return (fitting[0][1] if fitting else None), free_list[:need]

    _fails_on("place_newcomer", best_fit, "first fit takes the first hole")


class _Table:
    """A right block table, and the base of the wrong ones."""

    def __init__(self, allocator: Any) -> None:
        self.allocator, self.blocks, self.num_tokens = allocator, [], 0

    def append_tokens(self, n: int) -> None:
        size = self.allocator.block_size
        while len(self.blocks) * size < self.num_tokens + n:
            self.blocks.append(self.allocator.allocate())
        self.num_tokens += n

    def free(self) -> None:
        for block in reversed(self.blocks):
            self.allocator.free(block)
        self.blocks, self.num_tokens = [], 0


class _PerTokenRecursion(_Table):
    def append_tokens(self, n: int) -> None:
        if n == 0:
            return
        _Table.append_tokens(self, 1)
        self.append_tokens(n - 1)


class _SevenBlocks(_Table):
    def append_tokens(self, n: int) -> None:
        size = self.allocator.block_size
        while len(self.blocks) < 7 and len(self.blocks) * size < self.num_tokens + n:
            self.blocks.append(self.allocator.allocate())
        self.num_tokens += n


class _OffAtThe13th(_Table):
    def append_tokens(self, n: int) -> None:
        _Table.append_tokens(self, n + 1 if self.num_tokens == 12 else n)


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        (_PerTokenRecursion, "no step per token"),
        (_SevenBlocks, "no limit on the blocks"),
        (_OffAtThe13th, "20 appends of one token"),
    ],
)
def test_block_table_variants(variant: type, why: str) -> None:
    assert EXERCISES["block_table"].check(_Table).passed
    _fails_on("block_table", variant, why)


class _Cache:
    """A right prefix cache, and the base of the wrong ones (``key`` is what they change)."""

    def __init__(self, block_size: int) -> None:
        self.block_size, self.block_of, self.admitted = block_size, {}, 0

    def keys(self, tokens: list[int], partial: bool = False) -> list[Any]:
        size, keys, parent = self.block_size, [], ROOT_HASH
        stop = len(tokens) if partial else len(tokens) - size + 1
        for start in range(0, max(stop, 0), size):
            parent = self.key(parent, start // size, tokens[:start], tokens[start : start + size])
            keys.append(parent)
        return keys

    def key(self, parent: Any, index: int, before: list[int], block: list[int]) -> Any:
        return chain_hash(parent, block)

    def lookup(self, tokens: list[int]) -> list[int]:
        found = []
        for key in self.keys(tokens[:-1], self.partial()):
            if key not in self.block_of:
                break
            found.append(self.block_of[key])
        return found

    def partial(self) -> bool:
        return False

    def register(self, blocks: list[int], tokens: list[int]) -> None:
        self.admitted += 1
        if self.admitted > self.limit():
            return
        for block, key in zip(blocks, self.keys(tokens, self.partial()), strict=False):
            self.block_of.setdefault(key, block)

    def limit(self) -> int:
        return 10**9


class _ByIndex(_Cache):
    def key(self, parent: Any, index: int, before: list[int], block: list[int]) -> Any:
        return (index, tuple(block))


class _ByNeighbour(_Cache):
    def key(self, parent: Any, index: int, before: list[int], block: list[int]) -> Any:
        return (tuple(before[-self.block_size :]), tuple(block))


class _FirstTwoOnly(_Cache):
    def limit(self) -> int:
        return 2


class _CachesPartial(_Cache):
    def partial(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        (_ByIndex, "not its index or its neighbour"),
        (_ByNeighbour, "not its index or its neighbour"),
        (_FirstTwoOnly, "the fourth hits the blocks the third registered"),
        (_CachesPartial, "register only full blocks"),  # said as it registers one
    ],
)
def test_prefix_cache_variants(variant: type, why: str) -> None:
    assert EXERCISES["prefix_cache"].check(_Cache).passed
    _fails_on("prefix_cache", variant, why)


@pytest.mark.skipif("block_softmax" not in EXERCISES, reason="needs triton")
def test_block_softmax_that_ignores_its_scale() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def my_block_softmax(q_ptr, k_ptr, out_ptr, n, scale,  # type: ignore[no-untyped-def]
                         BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):  # fmt: skip
        offs_t = tl.arange(0, BLOCK_SIZE)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + offs_d)
        valid = offs_t < n
        k = tl.load(k_ptr + offs_t[:, None] * HEAD_DIM + offs_d[None, :], mask=valid[:, None],
                    other=0.0)  # fmt: skip
        scores = tl.sum(k * q[None, :], axis=1) * (HEAD_DIM**-0.5)  # not the scale argument
        scores = tl.where(valid, scores, float("-inf"))
        p = tl.exp(scores - tl.max(scores, axis=0))
        tl.store(out_ptr + offs_t, p / tl.sum(p, axis=0))

    _fails_on("block_softmax", my_block_softmax, "scale=2.0")


@pytest.mark.skipif("paged_kernel" not in EXERCISES, reason="needs triton")
def test_puzzle_feedback_names_an_inverted_alpha() -> None:
    """It was told the first case's purpose ("the table lookup, the K/V offsets ...")."""
    import triton
    import triton.language as tl

    @triton.jit
    def my_paged_kernel(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, seq_lens_ptr, scale,  # type: ignore[no-untyped-def]
                        max_blocks, NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):  # fmt: skip
        seq = tl.program_id(0)
        head = tl.program_id(1)
        kv_head = head // (NUM_HEADS // NUM_KV_HEADS)
        seq_len = tl.load(seq_lens_ptr + seq)
        offs_t = tl.arange(0, BLOCK_SIZE)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d) * scale
        m = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)
        l = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)  # noqa: E741
        acc = tl.zeros([HEAD_DIM], tl.float32)
        for b in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):
            physical = tl.load(table_ptr + seq * max_blocks + b)
            valid = b * BLOCK_SIZE + offs_t < seq_len
            offs = ((physical * BLOCK_SIZE + offs_t[:, None]) * NUM_KV_HEADS + kv_head) * HEAD_DIM
            k = tl.load(k_ptr + offs + offs_d[None, :], mask=valid[:, None], other=0.0)
            v = tl.load(v_ptr + offs + offs_d[None, :], mask=valid[:, None], other=0.0)
            scores = tl.where(valid, tl.sum(k * q[None, :], axis=1), float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, axis=0))
            alpha = tl.exp(m_new - m)  # inverted
            p = tl.exp(scores - m_new)
            l = l * alpha + tl.sum(p, axis=0)  # noqa: E741
            acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
            m = m_new
        tl.store(out_ptr + (seq * NUM_HEADS + head) * HEAD_DIM + offs_d, acc / l)

    _fails_on(
        "paged_kernel", my_paged_kernel, "the factor applied to the old l and acc is inverted"
    )


@pytest.mark.skipif("gather_rows" not in EXERCISES, reason="needs triton")
def test_gather_rows_that_also_writes_the_next_programs_row() -> None:
    """The owner overwrote the stray row (programs run in order); the last one's fell past out."""
    import triton
    import triton.language as tl

    @triton.jit
    def my_gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.program_id(0)
        offs = tl.arange(0, 2 * D)  # two rows: its own and the next program's
        row = tl.load(index_ptr + i)
        tl.store(out_ptr + i * D + offs, tl.load(x_ptr + row * D + offs, mask=offs < D, other=0.0))

    _fails_on("gather_rows", my_gather_rows, "stored outside out")


def _interpreted() -> bool:
    from pagedlab.attention import backend

    return backend.BACKEND == "interpreter"


@pytest.mark.skipif("masked_copy" not in EXERCISES, reason="needs triton")
@pytest.mark.skipif(not _interpreted(), reason="only the interpreter's loads are watched")
def test_masked_copy_with_an_unmasked_load() -> None:
    """The lanes past n were loaded (NaN) and never stored: only the load shows it."""
    import triton
    import triton.language as tl

    @triton.jit
    def my_masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)

    _fails_on("masked_copy", my_masked_copy, "past n=5): load only the lanes")


@pytest.mark.skipif("gather_rows" not in EXERCISES, reason="needs triton")
@pytest.mark.skipif(not _interpreted(), reason="only the interpreter's stores are watched")
def test_gather_rows_that_writes_the_next_programs_row_in_bounds() -> None:
    """Program i also stores into row i + 1 (in bounds): its owner, running later, hid it;
    the interpreter's stores, each with its program, show it."""
    import triton
    import triton.language as tl

    @triton.jit
    def my_gather_rows(x_ptr, index_ptr, out_ptr, D: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.program_id(0)
        offs_d = tl.arange(0, D)
        row = tl.load(index_ptr + i)
        nxt = tl.zeros([D], tl.int32) + i + 1
        tl.store(out_ptr + (i + 1) * D + offs_d, tl.zeros([D], tl.float32) - 1.0,
                 mask=nxt < tl.num_programs(0))  # fmt: skip
        tl.store(out_ptr + i * D + offs_d, tl.load(x_ptr + row * D + offs_d))

    _fails_on(
        "gather_rows", my_gather_rows, "program 0 stored into the part of out that program 1 owns"
    )


@pytest.mark.skipif("paged_kernel" not in EXERCISES, reason="needs triton")
def test_paged_kernel_that_writes_the_next_heads_output_in_bounds() -> None:
    """Each program first scribbles over the next head's output, which then overwrites it
    (outside the interpreter's view, as on a GPU): the launches on grids cut short show it."""
    import torch

    puzzle = EXERCISES["paged_kernel"]
    right = puzzle.solution

    class Scribbler:
        __name__ = "my_paged_kernel"

        def __getitem__(self, grid: tuple[int, int]) -> Any:
            def launch(out: torch.Tensor, *args: Any, **kwargs: Any) -> None:
                seqs, heads = grid
                for s in range(seqs):  # what program (s, h) would store into (s, h + 1)
                    for h in range(heads):
                        if h + 1 < out.shape[1]:
                            out[s, h + 1] = -1.0
                right[grid](out, *args, **kwargs)

            return launch

    _fails_on("paged_kernel", Scribbler(), "with only the programs of heads 0 .. 0 launched")


def test_scheduler_that_never_swaps() -> None:
    """A policy that preempts the right group, always by recompute: the swap-mode case shows
    it (the host pool had room)."""
    from pagedlab.memory.requests import StepPlan
    from pagedlab.memory.scheduler import Scheduler

    class MyScheduler(Scheduler):
        def policy(self, out: StepPlan) -> None:
            if not self.swapped:
                while self.waiting and self.admit(self.waiting[0], out):
                    pass
                if out.admitted:
                    return
            for group in list(self.running):
                while group in self.running and not self.decode(group, out):
                    self.recompute(self.running[-1], out)  # never swap_out
            while not out.preempted and self.swapped and self.swap_in(self.swapped[0], out):
                pass

    _fails_on("scheduler_step", MyScheduler, "swap mode: C is swapped out at step 4")


def test_wrapping_pagedlabs_own_class_is_not_writing_it() -> None:
    """A capstone that hands the work to pagedlab's own BlockTable or PrefixCache (wrapped,
    not subclassed) fails; the classes work again once the check is over."""
    from pagedlab.memory.allocator import BlockAllocator
    from pagedlab.memory.block_table import BlockTable
    from pagedlab.memory.prefix_cache import PrefixCache

    class MyBlockTable:
        def __init__(self, allocator: Any) -> None:
            self._table = BlockTable(allocator)

        def append_tokens(self, n: int) -> None:
            self._table.append_tokens(n)

        def free(self) -> None:
            self._table.free()

        blocks = property(lambda self: self._table.blocks)
        num_tokens = property(lambda self: self._table.num_tokens)

    class MyPrefixCache:
        def __init__(self, block_size: int) -> None:
            self._cache = PrefixCache(BlockAllocator(256, block_size))

        def lookup(self, tokens: list[int]) -> list[int]:
            return list(self._cache.lookup(tokens)[0])

        def register(self, blocks: list[int], tokens: list[int]) -> None:
            pass

    def my_append_cow(allocator: Any, blocks: list[int], num_tokens: int) -> list[int]:
        table = BlockTable(allocator)
        table.blocks, table.num_tokens = list(blocks), num_tokens
        table.append_tokens(1)
        return list(table.blocks)

    for name, learner, words in [
        ("block_table", MyBlockTable, "builds pagedlab's BlockTable"),
        ("prefix_cache", MyPrefixCache, "builds pagedlab's PrefixCache"),
        ("append_cow", my_append_cow, "builds pagedlab's BlockTable"),
    ]:
        result = EXERCISES[name].check(learner)
        assert result.status == FAILED and words in result.message, result.message
    table = BlockTable(BlockAllocator(4, 4))  # in this process, as before
    table.append_tokens(5)
    assert table.blocks == [0, 1]


def test_padding_the_callers_tables_in_place() -> None:
    """pad_block_tables and pack_decode get an engine's live block tables: padding those rows
    in place (and returning them) gives the right answer and breaks the engine's tables."""

    def my_pad_block_tables(tables: list[list[int]]) -> list[list[int]]:
        width = max(len(row) for row in tables)
        for row in tables:
            row += [-1] * (width - len(row))
        return tables

    def my_pack_decode(tables: list[list[int]], num_tokens: list[int], block_size: int) -> Any:
        slots = [row[(n - 1) // block_size] * block_size + (n - 1) % block_size
                 for row, n in zip(tables, num_tokens, strict=True)]  # fmt: skip
        return my_pad_block_tables(tables), list(num_tokens), slots

    for name, learner in [("pad_block_tables", my_pad_block_tables),
                          ("pack_decode", my_pack_decode)]:  # fmt: skip
        result = EXERCISES[name].check(learner)
        assert result.status == FAILED, result.message
        assert "changed the lists it was given" in result.message, result.message


def test_refused_code_comes_back_even_if_interrupted_while_restoring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process (no fork), a budget's alarm can land in refused()'s own ``finally``: the
    restore is retried until it holds, so pagedlab's class never stays refused."""
    import pagedlab.grade.drivers as drivers
    from pagedlab.memory.allocator import BlockAllocator
    from pagedlab.memory.block_table import BlockTable

    class Alarm(BaseException):
        pass

    attempts: list[int] = []

    def interrupted_once(*args: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise Alarm
        return map(*args)

    monkeypatch.setattr(drivers, "map", interrupted_once, raising=False)
    refusing = drivers.refused([BlockTable.__init__], drivers._builds_block_table)
    with refusing, pytest.raises(TypeError, match="builds pagedlab's BlockTable"):
        BlockTable(BlockAllocator(4, 4))
    assert len(attempts) == 2
    table = BlockTable(BlockAllocator(4, 4))
    table.append_tokens(5)
    assert table.blocks == [0, 1]


class _ForgetsLast(_Cache):
    def lookup(self, tokens: list[int]) -> list[int]:
        return super().lookup([*tokens, -1])  # the whole prompt looked up


def test_prefix_cache_mistakes_are_said_in_their_own_words() -> None:
    """Issue 38: caching the partly filled last block passed, and a forgotten last-token rule
    got the grader's own ``ValueError: n must be >= 1``."""
    exercise = EXERCISES["prefix_cache"]
    result = exercise.check(_CachesPartial)
    assert result.status == FAILED and "register only full blocks" in result.message, result
    result = exercise.check(_ForgetsLast)
    assert result.status == FAILED and "its last token is always computed" in result.message
    assert "n must be" not in result.message


def test_scheduler_step_admitting_past_the_head_is_said_so() -> None:
    """Issue 38: admitting a later request when the head does not fit ended in the grader's
    internal "a table was changed behind the scheduler's back"."""
    exercise = EXERCISES["scheduler_step"]

    class MyScheduler(exercise.solution):  # type: ignore[name-defined,misc]
        def policy(self, out):  # type: ignore[no-untyped-def]
            if not self.swapped:
                for group in list(self.waiting):  # every one that fits, not the head only
                    self.admit(group, out)
                if out.admitted:
                    return
            super().policy(out)

    result = exercise.check(MyScheduler)
    assert result.status == FAILED, result.message
    assert "behind the scheduler's back" not in result.message.split("found:")[0]
    assert "admission is FCFS" in result.message, result.message  # the case's why, then where:
    assert "admitted: expected ['A'], got ['A', 'C']" in result.message, result.message
