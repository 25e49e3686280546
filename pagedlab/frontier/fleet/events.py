"""Block events in the shape of vLLM 0.34's KV events (``vllm.distributed.kv_events``).

vLLM 0.34.0 publishes ``BlockStored(block_hashes, parent_block_hash, token_ids, block_size,
lora_id, medium, lora_name, ...)``, ``BlockRemoved(block_hashes, medium, ...)`` and
``AllBlocksCleared()``: a router sees only these. The classes below carry the same required
fields under the same names as dataclasses (``import pagedlab`` never imports vLLM);
:func:`as_vllm` rebuilds one as vLLM's own class where vLLM is installed. Hashes are ints (vLLM's
``ExternalBlockHash`` is ``bytes | int``): pagedlab's chained sha256 read as a hex number.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

MEDIUM_GPU = "GPU"  # vLLM's MEDIUM_GPU


@dataclass(frozen=True)
class BlockStored:
    """Blocks ``block_hashes`` (a chain, first after ``parent_block_hash``) now cached."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None
    medium: str | None = MEDIUM_GPU
    lora_name: str | None = None


@dataclass(frozen=True)
class BlockRemoved:
    """Blocks ``block_hashes`` no longer cached (evicted) on ``medium``."""

    block_hashes: list[int]
    medium: str | None = MEDIUM_GPU


@dataclass(frozen=True)
class AllBlocksCleared:
    """Every block of the engine forgotten (a reset)."""


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


def to_int(block_hash: str) -> int:
    """A pagedlab hex hash as vLLM's int form."""
    return int(block_hash, 16)


def as_vllm(event: KVEvent) -> Any:
    """The same event as vLLM's own class (imports vLLM: only where it is installed)."""
    from vllm.distributed import kv_events  # noqa: PLC0415 (optional, never at import time)

    cls = getattr(kv_events, type(event).__name__)
    return cls(**{f.name: getattr(event, f.name) for f in fields(event)})
