"""The counters ``Group``'s docstring draws (pagedlab/memory/requests.py) hold after every step,
mid-prefill after a recompute preemption included, with and without prefix-cache hits."""

from __future__ import annotations

import pytest

from pagedlab.engine.prefix import PrefixCachingScheduler
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, Request
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig

# (prompt_len, output_len, num_samples): the prompts share their first tokens (cache hits).
SPECS = [(5, 9, 1), (6, 7, 1), (3, 6, 2), (4, 8, 1)]


def check_drawn(group: Group, block_size: int) -> None:
    """Every relation the diagram draws, on ``group``'s real attributes."""
    r, work, prefilled, left = group.request, group.work, group.prefilled, group.recompute_left
    assert 0 <= prefilled <= work and 0 <= left <= work - prefilled
    assert 0 <= group.generated <= r.output_len
    assert group.num_tokens == r.prompt_len + group.generated
    if group.prefilling:
        assert work == r.prompt_len + r.num_samples * group.generated
    if group.status != "running":
        return
    for table in group.tables:  # slots held: the tokens, and less than a block more
        slots = len(table.blocks) * block_size
        assert table.num_tokens <= slots < table.num_tokens + block_size
    if group.prefilling:
        assert group.tables[0].num_tokens == min(prefilled, group.num_tokens)
    else:
        assert [t.num_tokens for t in group.tables] == [group.num_tokens] * r.num_samples


@pytest.mark.parametrize("cached", [False, True])
def test_the_drawn_counters_hold_mid_prefill_after_a_recompute(cached: bool) -> None:
    device = BlockAllocator(10, 2)
    config = SchedulerConfig("recompute", token_budget=4, chunked_prefill=True)
    s = (
        PrefixCachingScheduler(device, PrefixCache(device), config)
        if cached
        else Scheduler(device, config)
    )
    for i, (prompt, output, samples) in enumerate(SPECS):
        s.add(Request(f"r{i}", prompt, output, samples, prompt=tuple(range(prompt))))
    seen = []  # running groups mid-prefill with dropped K/V still to redo
    while not s.done:
        s.step()
        for group in s.groups.values():
            check_drawn(group, device.block_size)
        seen += [g for g in s.running if g.preemptions and g.prefilled and g.recompute_left]
    assert seen and any(g.request.num_samples == 2 for g in seen)
    assert not cached or s.hit_tokens > 0  # type: ignore[attr-defined]
