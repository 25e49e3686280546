"""The serving engine: the §4.5 scheduler, the pages and a real model, token for token.

- :mod:`~pagedlab.engine.engine`   ``Engine(model, num_blocks, block_size, ...,
  batch_invariant=False)``: ``generate(prompts, max_new_tokens, eos_token_id=None)`` -> the
  new tokens of each prompt; ``start`` / ``step`` / ``abort`` for a run step by step
- :mod:`~pagedlab.engine.runner`   ``ModelRunner``: a plan's K/V store: swaps, copies, one forward
- :mod:`~pagedlab.engine.prefix`   ``PrefixCachingScheduler``: admission on cached prefix blocks
- :mod:`~pagedlab.engine.guard`    the argument checks; ``weights_content``: no stale K/V
- :mod:`~pagedlab.engine.near_tie` ``forge_near_tie``: a near-tie that batching decides

The engine sits above everything it composes: :mod:`pagedlab.memory` (allocator, tables,
scheduler, prefix cache), :mod:`pagedlab.attention` (pages, kernel) and
:mod:`pagedlab.model`. None of those imports it.
"""

from pagedlab.attention import backend  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.engine.engine import Engine, EngineRun, StepRecord
from pagedlab.engine.runner import ForwardStats, ModelRunner

__all__ = ["Engine", "EngineRun", "ForwardStats", "ModelRunner", "StepRecord"]
