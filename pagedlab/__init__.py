"""pagedlab: learn PagedAttention with a real allocator, real block tables and a Triton kernel.

One folder per topic (ARCHITECTURE.md is the map):

- ``ground``: argument checks, the paper's numbers, the vLLM code the notebooks cite
- ``memory``: the control plane (who holds which block); ``attention``: the data plane (where
  K/V live and how the kernel reads them); ``simulate``: memory at scale
- ``model`` and ``engine``: a real Llama decoder on the pages, and the serving loop
- ``frontier``: what engines do in 2026 (notebook 11) and past one engine (notebook 12)
- ``pictures`` (state -> picture; ``scenes``, every staged example), ``exercises``, ``grade``
- ``explorers`` (sliders -> state -> picture; ``views``: one setting, no widgets; ``site``:
  the static site and its live pages; ``figures``: the README's pictures)

The top level exports the state and the kernels; pictures and explorers import matplotlib
and ipywidgets, so they load on demand.

Import order matters: ``pagedlab.attention.backend`` decides whether Triton compiles for a GPU
or runs in its interpreter, and must do so before anything imports triton.
"""

import importlib.util

#: Whether the data plane (torch) is installed. Without it (e.g. in a browser, Pyodide) the
#: package exports the control plane only; ``pagedlab.attention`` is then not imported.
HAS_TORCH = importlib.util.find_spec("torch") is not None

if HAS_TORCH:
    from pagedlab.attention import (  # first: imports backend, which sets TRITON_INTERPRET
        LoopStep,
        PagedKVCache,
        block_tables_tensor,
        paged_attention,
        paged_attention_steps,
        reference_attention,
        torch_paged_attention,
    )
    from pagedlab.attention.environment import environment_report

from pagedlab.memory import (  # noqa: E402 (after the data plane: TRITON_INTERPRET first)
    BeamStepResult,
    BlockAllocator,
    BlockTable,
    CacheStats,
    CopyOnWrite,
    Event,
    OutOfBlocksError,
    PrefixCache,
    beam_step,
    fork_samples,
)

__all__ = [
    "HAS_TORCH",
    "BeamStepResult",
    "BlockAllocator",
    "BlockTable",
    "CacheStats",
    "CopyOnWrite",
    "Event",
    "OutOfBlocksError",
    "PrefixCache",
    "beam_step",
    "fork_samples",
]
if HAS_TORCH:
    __all__ += [
        "LoopStep",
        "PagedKVCache",
        "block_tables_tensor",
        "environment_report",
        "paged_attention",
        "paged_attention_steps",
        "reference_attention",
        "torch_paged_attention",
    ]
__version__ = "0.1.0"
