"""KV-pool sizing and the four systems of the paper's Fig. 2 and Fig. 13 (§6.1).

The paper's pool: OPT-13B on an A100-40GB keeps about 12 GB of KV cache (Fig. 1: "> 30 %"; we
take 30 %) at 800 KB per token (§3: 2 x 5120 x 40 x 2 bytes), i.e. 15,728 token slots. The
baselines as §6.1 defines them (``reserved_slots``): Orca (Max) reserves 2048; Orca (Pow2) the
prompt plus the next power of two of the true output ("if the true output length is 25, it
reserves 32 positions for outputs"); Orca (Oracle) exactly prompt + output; each placed by a
buddy allocator (or ``allocator="first_fit"``, unrounded). vLLM: paging in ``block_size`` blocks.

Invariants: prompt + output <= ``reserved_slots`` <= the maximum length; extent >= reservation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pagedlab.ground import paper
from pagedlab.ground.checks import ArgumentTypeError, check_choice, check_int
from pagedlab.simulate.contiguous import ALLOCATORS
from pagedlab.simulate.reservation import RESERVATIONS as RESERVATIONS  # re-exported
from pagedlab.simulate.reservation import OneRequest as OneRequest
from pagedlab.simulate.reservation import reserved_slots as reserved_slots
from pagedlab.simulate.validate import check_type
from pagedlab.simulate.workload import MAX_LEN, MAX_TOKENS

BYTES_PER_TOKEN_OPT13B = paper.KV_BYTES_PER_TOKEN_OPT13B  # 819,200 B ("800 KB")
KV_BYTES_OPT13B_A100 = paper.A100_BYTES * paper.KV_PERCENT_OF_A100 // 100  # 12 GB
PAPER_POOL_SLOTS = KV_BYTES_OPT13B_A100 // BYTES_PER_TOKEN_OPT13B  # 15,728 token slots


@dataclass(frozen=True)
class Policy:
    """How a request gets KV memory: contiguous ``reserve`` (placed by ``allocator``, "buddy"
    or "first_fit") or paging in ``block_size`` blocks."""

    name: str
    reserve: str | None = None  # "max" | "pow2" | "oracle" for contiguous policies
    block_size: int = 0  # > 0 for the paged policy
    max_len: int = MAX_LEN
    allocator: str = "buddy"

    def __post_init__(self) -> None:
        check_type(self.name, "name", str)
        check_int(self.max_len, "max_len", minimum=2, maximum=MAX_TOKENS)
        check_choice(self.allocator, "allocator", tuple(ALLOCATORS))
        if self.reserve is None:
            check_int(self.block_size, "block_size", minimum=1, maximum=self.max_len)
        else:
            check_choice(self.reserve, "reserve", RESERVATIONS)
            check_int(self.block_size, "block_size", minimum=0, maximum=0)

    @property
    def paged(self) -> bool:
        return self.reserve is None

    def reservation(self, prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
        """``reserved_slots`` for each request: integer arrays of equal shape, each >= 1, with
        ``prompt + output <= max_len``."""
        prompt, output = _lengths(prompt, "prompt"), _lengths(output, "output")
        if prompt.shape != output.shape:
            raise ValueError(
                f"prompt and output must have the same shape, got {prompt.shape}, {output.shape}"
            )
        if prompt.size and int((prompt + output).max()) > self.max_len:
            raise ValueError(
                f"prompt + output must be <= max_len={self.max_len}, "
                f"got {int((prompt + output).max())}"
            )
        if self.reserve == "max":
            return np.full_like(prompt, self.max_len)
        if self.reserve == "pow2":
            p2 = np.left_shift(1, _bit_length(output - 1))
            return np.minimum(prompt + p2, self.max_len)
        if self.reserve == "oracle":
            return prompt + output
        raise ValueError(f"policy {self.name!r} is paged: it reserves nothing up front")

    def extent(self, reserved: np.ndarray) -> np.ndarray:
        """Slots the allocator takes for each reservation (buddy: the next power of two)."""
        reserved = _lengths(reserved, "reserved")
        if self.allocator == "buddy":
            return np.left_shift(1, _bit_length(reserved - 1))
        return reserved.copy()


def _lengths(values: object, name: str) -> np.ndarray:
    """``values`` as an int64 array of lengths in ``[1, MAX_TOKENS]`` (integer dtype required),
    widened before any arithmetic (no overflow, no uint64 wrap)."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.size and int(arr.min()) < 1:
        raise ValueError(f"{name} must be >= 1 everywhere, got {int(arr.min())}")
    if arr.size and int(arr.max()) > MAX_TOKENS:
        raise ValueError(f"{name} must be <= {MAX_TOKENS} everywhere, got {int(arr.max())}")
    return arr.astype(np.int64)


def _bit_length(x: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of each non-negative element (exact below 2**53: frexp's exponent)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def orca_max(max_len: int = MAX_LEN, allocator: str = "buddy") -> Policy:
    """Orca (Max): reserve ``max_len`` slots per request (§6.1)."""
    return Policy("Orca (Max)", reserve="max", max_len=max_len, allocator=allocator)


def orca_pow2(max_len: int = MAX_LEN, allocator: str = "buddy") -> Policy:
    """Orca (Pow2): reserve prompt + next_pow2(output) slots per request (§6.1)."""
    return Policy("Orca (Pow2)", reserve="pow2", max_len=max_len, allocator=allocator)


def orca_oracle(max_len: int = MAX_LEN, allocator: str = "buddy") -> Policy:
    """Orca (Oracle): reserve exactly prompt + output slots per request (§6.1)."""
    return Policy("Orca (Oracle)", reserve="oracle", max_len=max_len, allocator=allocator)


def vllm(block_size: int = 16, max_len: int = MAX_LEN) -> Policy:
    """vLLM: paged allocation in blocks of ``block_size`` slots."""
    return Policy("vLLM", block_size=block_size, max_len=max_len)


def paper_policies(block_size: int = 16, allocator: str = "buddy") -> list[Policy]:
    """The four systems of the paper's Fig. 2 and Fig. 13, in the paper's order."""
    return [orca(allocator=allocator) for orca in (orca_max, orca_pow2, orca_oracle)] + [
        vllm(block_size)
    ]
