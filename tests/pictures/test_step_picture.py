"""The mixed-step picture: rows of unused request slots are drawn as not sent."""

from __future__ import annotations

from pagedlab.pictures.scenes import mixed_v1_step
from pagedlab.pictures.step import mixed_step_scene
from pagedlab.pictures.theme import FREE_EDGE, INK


def test_unused_request_slots_are_drawn_faded_and_named_not_sent() -> None:
    step = mixed_v1_step()
    d = mixed_step_scene(step)
    cells = [r for r in d.rects if r.view == "block_table"]
    width = int(step.block_table.shape[1])
    rows = [cells[i : i + width] for i in range(0, len(cells), width)]
    assert len(rows) == 6 and step.num_reqs == 4
    assert all(c.edge == INK for row in rows[:4] for c in row)  # sent to attention
    assert all(c.edge == FREE_EDGE and c.face == "white" for row in rows[4:] for c in row)
    texts = [label.text for label in d.labels]
    assert any("rows 4-5: unused request slots, not sent" in t for t in texts)
    assert any("sent: rows 0-3" in t for t in texts)
