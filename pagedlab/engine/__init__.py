"""The serving engine: the §4.5 scheduler, the pages and a real model, token for token.

The engine sits above everything it composes: :mod:`pagedlab.memory` (allocator, tables,
scheduler, prefix cache), :mod:`pagedlab.attention` (pages, kernel) and
:mod:`pagedlab.model`. None of those imports it.
"""

from pagedlab.attention import backend  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.engine.engine import Engine, EngineRun, StepRecord
from pagedlab.engine.runner import ForwardStats, ModelRunner

__all__ = ["Engine", "EngineRun", "ForwardStats", "ModelRunner", "StepRecord"]
