"""Fig. 3's pictures: the reservation's zooms, external fragmentation drawn from a real pool."""

from __future__ import annotations

import pytest

from pagedlab import BlockAllocator, BlockTable
from pagedlab.pictures.canvas import drawing_png as to_png
from pagedlab.pictures.drawing import Drawing, Label, stack
from pagedlab.pictures.fragmentation import fig3_scene, fragmentation_scene, holes
from pagedlab.pictures.reservation import reservation_scene
from pagedlab.pictures.scenes import fragmented_pool
from pagedlab.simulate.policies import OneRequest

NAMES = ["R2", "R4", "R6", "R8"]


def every_other_finished(
    newcomer_tokens: int = 64, finished: slice = slice(0, None, 2)
) -> tuple[BlockAllocator, list[BlockTable], BlockTable]:
    """16 blocks of 16; 8 requests of 2 blocks; those in ``finished`` free theirs; a newcomer."""
    pool = BlockAllocator(num_blocks=16, block_size=16)
    requests = [BlockTable(pool) for _ in range(8)]
    for r in requests:
        r.append_tokens(32)
    for r in requests[finished]:
        r.free()
    running = [r for r in requests if not r.freed]
    newcomer = BlockTable(pool)
    newcomer.append_tokens(newcomer_tokens)
    return pool, running, newcomer


def texts(d: Drawing) -> list[str]:
    return [lb.text for lb in d.labels]


def test_fragmented_pool_is_the_notebooks_pool() -> None:
    pool, running, newcomer = fragmented_pool()
    built = every_other_finished()
    assert (
        [t.blocks for t in running]
        == [t.blocks for t in built[1]]
        == [[2, 3], [6, 7], [10, 11], [14, 15]]
    )
    assert newcomer.blocks == built[2].blocks == [1, 0, 5, 4] and pool.num_free == 4
    with pytest.raises(ValueError, match="num_requests"):
        fragmented_pool(num_requests=1)


def test_holes_are_the_runs_no_running_table_holds() -> None:
    pool, running, _ = every_other_finished()
    assert holes(pool, running) == [(0, 2), (4, 2), (8, 2), (12, 2)]
    assert holes(pool, []) == [(0, 16)]


def test_scene_draws_holes_reservations_and_where_paging_put_the_newcomer() -> None:
    pool, running, newcomer = every_other_finished()
    before = (pool.refcounts(), pool.free_list(), [t.blocks for t in [*running, newcomer]])
    d = fragmentation_scene(pool, running, newcomer, NAMES)
    assert (pool.refcounts(), pool.free_list(), [t.blocks for t in [*running, newcomer]]) == before
    assert d.count("hole", "contiguous") == 4 and texts(d).count("hole 32") == 4
    assert d.count("reservation", "contiguous") == 4
    assert d.count("block", "paged") == 8 and d.count("free", "paged") == 4
    placed = sorted(r.block for r in d.rects if r.kind == "newcomer")
    assert placed == sorted(newcomer.blocks) == [0, 1, 4, 5]
    for logical, block in enumerate(newcomer.blocks):  # N<i> sits on the block holding it
        cell = next(r.box for r in d.rects if r.kind == "newcomer" and r.block == block)
        label = next(lb for lb in d.labels if lb.text == f"N{logical}")
        assert cell.x < label.x < cell.x + cell.w
    assert any("no hole of 64 slots: external fragmentation" in t for t in texts(d))
    need = next(r for r in d.rects if r.kind == "need")
    widest = next(r.box for r in d.rects if r.kind == "hole")
    assert need.box.w == pytest.approx(2 * widest.w)  # 4 blocks over a 2-block hole
    assert to_png(d)[:4] == b"\x89PNG"


def test_a_newcomer_that_fits_a_hole_is_said_to_fit() -> None:
    pool, running, newcomer = every_other_finished(32, slice(2, 5))  # requests 3-5 finish
    assert holes(pool, running) == [(4, 6)]
    d = fragmentation_scene(pool, running, newcomer)
    assert any(t.endswith("adjacent slots: fits") for t in texts(d))
    assert {lb.text for lb in d.labels} >= {"R1", "R2", "R3", "R4", "R5"}  # default names


def test_names_must_match_the_running_tables() -> None:
    pool, running, newcomer = every_other_finished()
    with pytest.raises(ValueError, match="names must name each of the 4"):
        fragmentation_scene(pool, running, newcomer, ["A"])


def test_reservation_zoom_shows_reserved_slots_beside_the_paged_block() -> None:
    r = reservation_scene(OneRequest(8, 2, 0, 2048, 16))  # Fig. 3's request A
    widths = {x.kind: x.box.w for x in r.rects if x.view == "contiguous-zoom"}
    assert widths["tokens"] / widths["reserved"] == pytest.approx(8 / 2)
    assert widths["internal"] / widths["reserved"] == pytest.approx(6 / 2)  # clipped to 16
    paged = {x.kind: x.box.w for x in r.rects if x.view == "zoom"}
    assert paged["tokens"] == pytest.approx(widths["tokens"])  # the zooms line up slot for slot
    assert "first 16 of its 2048 slots" in texts(r)


def test_the_paged_zoom_marks_the_slots_the_future_tokens_fill() -> None:
    r = reservation_scene(OneRequest(8, 2, 0, 2048, 16))  # 8 empty: 2 for the future, 6 not
    for row in ("paged", "zoom"):
        paged = {x.kind: x for x in r.rects if x.view == row and x.kind != "slot"}
        assert {"allocated-future", "allocated-empty"} <= paged.keys()
        future, empty = paged["allocated-future"], paged["allocated-empty"]
        assert future.box.x + future.box.w == pytest.approx(empty.box.x)  # future first
    zoom = {x.kind: x.box.w for x in r.rects if x.view == "zoom" and x.kind != "block"}
    assert zoom["allocated-future"] / zoom["allocated-empty"] == pytest.approx(2 / 6)
    assert any("2 of them for future tokens" in t for t in texts(r))
    done = reservation_scene(OneRequest(8, 2, 2, 2048, 16))  # finished: nothing for the future
    assert done.count("allocated-future") == 0 and done.count("allocated-empty", "zoom") == 1


@pytest.mark.parametrize("row", ["contiguous", "contiguous-zoom"])
def test_one_reserved_slot_on_a_long_axis_is_still_drawn(row: str) -> None:
    r = reservation_scene(OneRequest(8, 1000, 999, 1024, 256))  # 1 reserved of 1024 slots
    widths = {x.kind: x.box for x in r.rects if x.view == row}
    assert widths["reserved"].w >= 0.05 and widths["internal"].w >= 0.05
    right = max(b.x + b.w for b in widths.values())
    assert right == pytest.approx(7.8)  # the widest category paid: the bar keeps its length


def test_fig3_stacks_the_reservation_over_the_pool() -> None:
    pool, running, newcomer = every_other_finished()
    request = OneRequest(8, 2, 0, 2048, 16)
    top, bottom = reservation_scene(request), fragmentation_scene(pool, running, newcomer, NAMES)
    d = fig3_scene(request, pool, running, newcomer, NAMES)
    assert d.size == (8.0, top.size[1] + bottom.size[1])
    kinds = {x.kind for x in d.rects}
    assert {"reserved", "internal", "allocated-empty", "hole"} <= kinds  # the three wastes
    lowest_top = min(x.box.y for x in d.rects if x.view == "contiguous-zoom")
    assert lowest_top >= bottom.size[1]  # the reservation sits wholly above the pool
    assert len(d.rects) == len(top.rects) + len(bottom.rects)


def test_stack_shifts_every_part_of_the_top_drawing() -> None:
    top, bottom = Drawing(size=(2.0, 1.0)), Drawing(size=(3.0, 2.0))
    top.labels.append(Label(0.5, 0.5, "t"))
    d = stack(top, bottom)
    assert d.size == (3.0, 3.0) and d.labels[0].y == pytest.approx(2.5)
