"""Fixtures several tests share: the example of notebook 02, built by
:mod:`pagedlab.pictures.scenes`, and SmolLM2's ``transformers`` oracle.

The example (ARCHITECTURE.md): blocks of 4, a pool whose free list starts 4, 1, 0 because of what
other requests did (:func:`pagedlab.pictures.scenes.example_history`), and a five-token sequence
that lands in physical blocks 4 and 1. Each fixture builds fresh objects per test, so a test may
mutate what it gets.
"""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures import scenes


@pytest.fixture
def example_pool() -> tuple[BlockAllocator, list[BlockTable]]:
    """8 blocks of 4 after the example's history, B and D still running: free list 4, 1, 0."""
    return scenes.example_history(8, 4, finished=False)


@pytest.fixture
def example_sequence() -> tuple[BlockAllocator, BlockTable]:
    """The example's five tokens in blocks [4, 1] of an otherwise free pool of 8 blocks of 4."""
    allocator, _ = scenes.example_history(8, 4)
    table = BlockTable(allocator)
    table.append_tokens(5)
    return allocator, table


@pytest.fixture(scope="session")
def smollm2_transformers() -> Any:
    """``transformers``' own reading of SmolLM2's GGUF (``smollm2.transformers_model()``), loaded
    once per worker: seconds of work that ``tests/model/test_pretrained.py`` and
    ``tests/engine/test_smollm2_engine.py`` share (the root conftest keeps both on one worker).
    Shared: a test reads it and never changes its weights."""
    pytest.importorskip("transformers")
    from pagedlab.model.smollm2 import transformers_model

    return transformers_model()
