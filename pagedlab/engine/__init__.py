"""The serving engine: the §4.5 scheduler, the pages and a real model, token for token.

- :mod:`~pagedlab.engine.engine`   ``Engine(model, num_blocks, block_size, ...)``:
  ``generate(prompts, max_new_tokens)`` -> the new tokens of each prompt
- :mod:`~pagedlab.engine.model_kv` ``ModelKV``: the scheduler's K/V hooks, run as model forwards
- :mod:`~pagedlab.engine.prefix`   ``PrefixCachingScheduler``: admission on cached prefix blocks

The engine sits above everything it composes: :mod:`pagedlab.memory` (allocator, tables,
scheduler, prefix cache), :mod:`pagedlab.attention` (pages, kernel) and
:mod:`pagedlab.model`. None of those imports it.
"""

from pagedlab.attention import backend  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.engine.engine import Engine, EngineRun, StepRecord
from pagedlab.engine.model_kv import ForwardStats, ModelKV

__all__ = ["Engine", "EngineRun", "ForwardStats", "ModelKV", "StepRecord"]
