"""The scheduler's capacity rule (memory/capacity.py) against real block tables.

Each function answers "how many free blocks does this move need" from ``blocks_to_append``;
here the real ``BlockTable`` does the move on a real allocator and the blocks it took are
counted: the answers must be exact, not bounds.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import prefill_need, samples_need, tokens_that_fit


def group_tables(pool: BlockAllocator, prompt: int, extra: list[int]) -> list[BlockTable]:
    """A group as the scheduler builds it: the prompt, forks, then each sample's own tokens."""
    first = BlockTable(pool)
    first.append_tokens(prompt)
    tables = [first] + [first.fork() for _ in extra[1:]]
    for table, n in zip(tables, extra, strict=True):
        if n:
            table.append_tokens(n)
    return tables


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 12),
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.integers(1, 5),
)
def test_samples_need_is_what_the_tables_take(size, prompt, extra, n) -> None:
    pool = BlockAllocator(200, size)
    tables = group_tables(pool, prompt, extra)
    lasts = [(t.num_tokens, t.blocks[-1]) for t in tables]
    need = samples_need(lasts, n, size, pool.refcount)
    free = pool.num_free
    for table in tables:  # in order, as the scheduler decodes or prefills them
        table.append_tokens(n)
    assert free - pool.num_free == need


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 20), st.integers(0, 12), st.integers(1, 4))
def test_prefill_need_is_what_a_whole_prefill_takes(size, prompt, generated, samples) -> None:
    pool = BlockAllocator(200, size)
    extra = [generated] * samples if generated else [0] * samples
    group_tables(pool, prompt, extra)
    assert pool.num_blocks - pool.num_free == prefill_need(prompt, generated, samples, size)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(0, 9), st.booleans(), st.integers(1, 30), st.integers(0, 6))
def test_tokens_that_fit_is_the_most_an_append_can_take(size, tokens, shared, want, spare) -> None:
    pool = BlockAllocator(40, size)
    table = BlockTable(pool)
    if tokens:
        table.append_tokens(tokens)
    other = table.fork() if shared and tokens else None
    filler = BlockTable(pool)
    keep = min(spare, pool.num_free)
    if pool.num_free - keep:
        filler.append_tokens((pool.num_free - keep) * size)
    is_shared = other is not None
    fit = tokens_that_fit(tokens, want, size, is_shared, pool.num_free)
    assert 0 <= fit <= want
    if fit:
        assert table.can_append(fit)
    if fit < want:
        assert not table.can_append(fit + 1)
        try:
            table.append_tokens(fit + 1)
        except OutOfBlocksError:
            pass
        else:
            raise AssertionError(f"{fit + 1} tokens fit, tokens_that_fit said {fit}")
