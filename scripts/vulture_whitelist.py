"""Names in pagedlab/ that look unused to vulture but are used (scripts/check_dead_code.py)."""

# ruff: noqa
_ = object()

_._ipython_display_  # IPython calls it to display an explorer
_._link  # keeps a widget jslink alive (pagedlab/explorers/allocation.py)
max_blocks_per_seq  # a field of the checked launch shape, for readers (attention/ops.py)
sim_time_s  # a field of SimResult, for readers (simulate/engine.py)

# Dead code that issue 11 item 5 removes (pagedlab/pictures, another helper's area): delete
# these two lines once it is gone.
draw_scene
render_frames
