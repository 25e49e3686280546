"""Fig. 19 two ways: swap time against block size, measured here and from a cost model.

The paper (§7.3, Fig. 19; its experiments run on NVIDIA A100 GPUs, §6.1) found that swapping
is slow with small blocks ("numerous small data transfers between CPU and GPU, which limits the
effective PCIe bandwidth"), that recomputation's overhead does not depend on the block size,
that swapping is the more efficient with large blocks though recomputation's overhead is "never
higher than 20% of swapping's latency", and that from block size 16 to 64 the two have
comparable end-to-end performance (Fig. 19b).

:func:`measure_swap` times :func:`pagedlab.attention.swap.copy_blocks` for the *same bytes*
cut into blocks of each size on this machine (timings vary; the shape does not: the cost per
block dominates at small blocks). :class:`CostModel` is arithmetic with stated constants
(assumptions, not the paper's measurements): one transfer per block per layer for K and V, a
fixed latency plus bytes over PCIe bandwidth; recompute is one prefill at a fixed throughput.
At the defaults and 1,024 tokens recompute stays just below swap even at 256-token blocks.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.swap import HostPool, copy_blocks
from pagedlab.ground.checks import ArgumentTypeError, ceil_div, check_int


@dataclass(frozen=True)
class SwapTiming:
    """Best-of-``repeats`` seconds to copy ``num_blocks`` blocks of ``block_size`` out and in."""

    block_size: int
    num_blocks: int
    nbytes: int  # K and V together, the same for every block size
    swap_out_s: float
    swap_in_s: float

    @property
    def total_s(self) -> float:
        return self.swap_out_s + self.swap_in_s


def measure_swap(
    block_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    num_tokens: int = 4096,
    num_kv_heads: int = 4,
    head_dim: int = 64,
    dtype: torch.dtype = torch.float16,
    repeats: int = 3,
    device: torch.device | str | None = None,
) -> list[SwapTiming]:
    """Time swapping ``num_tokens`` tokens of K/V out and back in, for each block size (each
    dividing ``num_tokens``: the same bytes); ``device`` defaults to CUDA when available."""
    if isinstance(block_sizes, (str, bytes)) or not isinstance(block_sizes, Sequence):
        raise TypeError(f"block_sizes must be a sequence of block sizes, got {block_sizes!r}")
    num_tokens = check_int(num_tokens, "num_tokens", 1)
    repeats = check_int(repeats, "repeats", 1)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    timings = []
    for size in block_sizes:
        size = check_int(size, "block size", 1)
        if num_tokens % size:
            raise ValueError(f"block size {size} does not divide num_tokens = {num_tokens}")
        blocks = num_tokens // size
        cache = PagedKVCache(blocks, size, num_kv_heads, head_dim, dtype, device=device)
        host = HostPool.like(cache)
        pairs = [(b, b) for b in range(blocks)]
        swap_out = swap_in = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            copy_blocks(cache, host.cache, pairs)
            middle = time.perf_counter()
            copy_blocks(host.cache, cache, pairs)
            end = time.perf_counter()
            swap_out, swap_in = min(swap_out, middle - start), min(swap_in, end - middle)
        timings.append(SwapTiming(size, blocks, cache.nbytes, swap_out, swap_in))
    return timings


def _check_rate(value: object, name: str, positive: bool) -> None:
    """A finite real number, > 0 (``positive``) or >= 0; TypeError / ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}")
    number = float(value)
    ok = math.isfinite(number) and (number > 0 if positive else number >= 0)
    if not ok:
        raise ValueError(
            f"{name} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}"
        )


@dataclass(frozen=True)
class CostModel:
    """Swap and recompute time of one sequence, in seconds. Defaults: OPT-13B on one A100.

    ``kv_bytes_per_token`` and ``num_layers`` are the paper's (§3); the rest are pagedlab's
    assumptions: ``pcie_bytes_per_s`` (half of PCIe 4.0 x16's ~32 GB/s peak per direction),
    ``transfer_latency_s`` (one copy call) and ``prefill_tokens_per_s``."""

    kv_bytes_per_token: int = 2 * 5120 * 40 * 2
    num_layers: int = 40
    pcie_bytes_per_s: float = 16e9
    transfer_latency_s: float = 3e-6
    prefill_tokens_per_s: float = 10_000.0

    def __post_init__(self) -> None:
        check_int(self.kv_bytes_per_token, "kv_bytes_per_token", 1)
        check_int(self.num_layers, "num_layers", 1)
        _check_rate(self.pcie_bytes_per_s, "pcie_bytes_per_s", positive=True)
        _check_rate(self.transfer_latency_s, "transfer_latency_s", positive=False)
        _check_rate(self.prefill_tokens_per_s, "prefill_tokens_per_s", positive=True)

    def transfers(self, num_tokens: int, block_size: int) -> int:
        """Copies one swap direction makes: K and V of every block, layer by layer (vLLM V0)."""
        num_tokens = check_int(num_tokens, "num_tokens", 0)
        block_size = check_int(block_size, "block_size", 1)
        return 2 * self.num_layers * ceil_div(num_tokens, block_size)

    def swap_s(self, num_tokens: int, block_size: int) -> float:
        """One direction (out or in): whole blocks move, empty slots of the last one too."""
        num_tokens = check_int(num_tokens, "num_tokens", 0)
        block_size = check_int(block_size, "block_size", 1)
        moved = ceil_div(num_tokens, block_size) * block_size * self.kv_bytes_per_token
        latency = self.transfers(num_tokens, block_size) * self.transfer_latency_s
        return latency + moved / self.pcie_bytes_per_s

    def recompute_s(self, num_tokens: int) -> float:
        """One prefill over the tokens whose K/V was dropped; no blocks involved."""
        num_tokens = check_int(num_tokens, "num_tokens", 0)
        return num_tokens / self.prefill_tokens_per_s
