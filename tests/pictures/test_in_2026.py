"""pagedlab.pictures.in_2026: drawn from real state, counts match, nothing is mutated."""

from __future__ import annotations

from pagedlab.frontier.async_steps import run_async
from pagedlab.frontier.hybrid import HybridRequest, group_layers
from pagedlab.frontier.partial_prefix import PartialPrefixCache
from pagedlab.frontier.peers import run_trace, vllm_block_pool
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.pictures import in_2026 as pictures
from pagedlab.pictures.canvas import drawing_png
from pagedlab.pictures.control_scenes import miss_scene


def _keyed(d) -> bool:  # type: ignore[no-untyped-def]
    keys = {r.face for r in d.rects if r.kind == "key"}
    return {r.face for r in d.rects if r.kind != "key"} <= keys | {"#FFFFFF"}


def test_three_allocators_draws_each_rules_blocks() -> None:
    results = [run_trace(r) for r in ("pagedlab", "vllm", "hf")]
    d = pictures.three_allocators(results, [range(8), range(8), range(10)], [[], [0], [0, 1]])
    assert d.count("reserved") == 3 and d.count("held") == 3 * 5  # B's 3 and C's 2, per row
    texts = {lb.text for lb in d.labels}
    assert {
        "pagedlab FIFO: C gets [5, 6]",
        "vLLM: C gets [2, 1]",
        "Hugging Face: C gets [8, 9]",
    } <= texts
    assert _keyed(d) and drawing_png(d)[:4] == b"\x89PNG"


def test_partial_hit_arrow_from_source_to_copy_and_state_unchanged() -> None:
    alloc = BlockAllocator(8, 4)
    cache = PartialPrefixCache(alloc, prefix_match_unit=2)
    first = cache.admit([1, 2, 3, 4, 5, 6, 7, 8, 9])
    cache.finish_step()
    second = cache.admit([1, 2, 3, 4, 5, 6, 20, 21])
    before = (alloc.refcounts(), alloc.free_list())
    d = pictures.partial_hit(alloc, first, second, kept=True)
    assert (alloc.refcounts(), alloc.free_list()) == before
    assert [(a.logical, a.physical) for a in d.arrows] == [(1, 3)]
    assert any("KVCacheBlockCopy(src=1, dst=3)" in lb.text for lb in d.labels) and _keyed(d)


def test_hybrid_async_and_miss_pictures_count_what_they_show() -> None:
    request = HybridRequest(vllm_block_pool(64, 16), group_layers(10, 20, 32))
    request.append(112)
    d = pictures.hybrid_tables(request)
    assert d.count("null-entry") == 10 and d.count("table-cell") == 11 and _keyed(d)
    timeline = run_async()
    d = pictures.async_timeline(timeline)
    assert d.count("stale") == 1 and d.count("placeholder") == timeline.placeholders
    assert _keyed(d)
    classifier = miss_scene(16)
    d = pictures.miss_bars(classifier.results, 16)
    assert d.count("evicted") == 1 and d.count("hit") == 3 and _keyed(d)  # R2, R3, R5
