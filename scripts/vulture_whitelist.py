"""Names in pagedlab/ that look unused to vulture but are used (scripts/check_dead_code.py)."""

# ruff: noqa
_ = object()

_._ipython_display_  # IPython calls it to display an explorer
_._link  # keeps a widget jslink alive (pagedlab/explorers/play.py)
max_blocks_per_seq  # a field of the checked launch shape, for readers (attention/ops.py)
sim_time_s  # a field of SimResult, for readers (simulate/engine.py)
_._repr_pretty_  # IPython's pretty-printer protocol (exercise results)
cycle  # _repr_pretty_'s second argument, required by the protocol
signum  # a signal handler's arguments, required by signal.signal (grade/sandbox.py)
arg  # sys.settrace's callback arguments (grade/sandbox.py)
cases_passed  # a field of an exercise's Result, for readers
exercise_names  # called by the live site's Web Worker (scripts/site_template/live/worker.js)
__getattr__  # a module's lazy attributes (PEP 562; simulate/__init__.py)
# vLLM's KV event fields, read by fields() (frontier/fleet/events.py: as_vllm)
lora_id, medium, lora_name
# what transformers' PagedAttentionCache reads of a request (frontier/oracles/hf_cache.py)
_.current_len
