"""How many free blocks the scheduler's moves need, all from the one rule ``blocks_to_append``.

A sequence group is several tables that may share their last block, so the scheduler asks
:func:`pagedlab.memory.block_table.blocks_to_append` once per sample, in the order the samples
write: a shared, partly filled last block is copied by each sample that writes while others
still hold it; the last one to write holds it alone and writes in place.

Pure functions of numbers: no allocator is changed. The rule depends on a table's length only
through ``tokens % block_size``, so its answers are memoised (the decode loop asks it once per
sample per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from pagedlab.memory.block_table import blocks_to_append

_rule = lru_cache(maxsize=4096)(blocks_to_append)


def append_need(tokens: int, n: int, block_size: int, last_block_shared: bool = False) -> int:
    """``blocks_to_append(tokens, n, block_size, last_block_shared)``, memoised."""
    return _rule(tokens % block_size, n, block_size, last_block_shared)


def samples_need(
    lasts: Sequence[tuple[int, int]], n: int, block_size: int, refcount: Callable[[int], int]
) -> int:
    """Free blocks ``n`` more tokens for each ``(tokens held, last block)`` take, in order.

    ``refcount(block)`` is the block's ref count now; each sample that copies a shared last
    block drops one reference to it, so the last writer writes in place.
    """
    holders: dict[int, int] = {}
    need = 0
    for tokens, last in lasts:
        partly_filled = tokens % block_size != 0  # only then can sharing it cost a copy
        left = holders.setdefault(last, refcount(last)) if partly_filled else 0
        need += append_need(tokens, n, block_size, left > 1)
        if left > 1:  # it copied the block: one holder fewer
            holders[last] = left - 1
    return need


def prefill_need(prompt: int, generated: int, samples: int, block_size: int) -> int:
    """Free blocks a whole (re)prefill of ``prompt`` + ``generated`` tokens per sample needs.

    The prompt goes into one table; then ``samples - 1`` forks share it, and each sample
    appends its ``generated`` tokens (the first ``samples - 1`` writers copy a partly filled
    shared last prompt block, the last one writes into it). ``generated = output_len`` gives
    the most a group ever holds.
    """
    need = append_need(0, prompt, block_size)
    if generated == 0:
        return need
    copied = append_need(prompt, generated, block_size, last_block_shared=samples > 1)
    in_place = append_need(prompt, generated, block_size)
    return need + (samples - 1) * copied + in_place


def tokens_that_fit(
    tokens: int, want: int, block_size: int, last_block_shared: bool, free: int
) -> int:
    """The most of ``want`` tokens a table holding ``tokens`` can take with ``free`` blocks.

    ``blocks_to_append`` grows with the count, so a binary search over it finds the answer.
    """
    if append_need(tokens, want, block_size, last_block_shared) <= free:
        return want
    lo, hi = 0, want  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if append_need(tokens, mid, block_size, last_block_shared) <= free:
            lo = mid
        else:
            hi = mid
    return lo
