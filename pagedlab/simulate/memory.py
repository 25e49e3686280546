"""KV-pool sizing, reservation policies and a first-fit contiguous address space.

What is handled
    * The paper's pool: OPT-13B on an A100-40GB keeps about 12 GiB of KV cache at 800 KiB per
      token (2 (K and V) x 40 layers x 5120 hidden x 2 bytes = 819,200 B), i.e. 15,728 slots.
    * Four policies (Kwon et al. 2023, Fig. 2): contiguous reservation of ``max_len`` slots per
      request (Orca Max), of the next power of two of its true final length (Orca Pow2), of
      exactly its final length (Orca Oracle), and paged allocation in blocks of ``block_size``
      slots (vLLM).
    * ``FirstFit``: one contiguous address space of ``size`` slots; a request's reservation is
      placed at the lowest address whose hole is large enough, so external fragmentation (free
      holes too small for the next reservation) is real. No compaction, no buddy merging.

Invariants
    FirstFit's live extents never overlap and lie inside ``[0, size)``; ``used + free == size``.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from pagedlab.simulate.workload import MAX_LEN

KV_BYTES_OPT13B_A100 = 12 * 2**30  # KV budget left after 26 GB of weights (paper Fig. 1)
BYTES_PER_TOKEN_OPT13B = 800 * 2**10  # 2 * 40 layers * 5120 * 2 B = 819,200 B
PAPER_POOL_SLOTS = KV_BYTES_OPT13B_A100 // BYTES_PER_TOKEN_OPT13B  # 15,728 token slots

RESERVATIONS = ("max", "pow2", "oracle")


@dataclass(frozen=True)
class Policy:
    """How a request gets KV memory: contiguous ``reserve`` or paging in ``block_size`` blocks."""

    name: str
    reserve: str | None = None  # "max" | "pow2" | "oracle" for contiguous policies
    block_size: int = 0  # > 0 for the paged policy
    max_len: int = MAX_LEN

    def __post_init__(self) -> None:
        if self.reserve is None:
            if isinstance(self.block_size, bool) or not isinstance(self.block_size, int):
                raise ValueError(f"block_size must be an int, got {self.block_size!r}")
            if self.block_size < 1:
                raise ValueError(f"block_size must be >= 1, got {self.block_size!r}")
        elif self.reserve not in RESERVATIONS:
            raise ValueError(f"reserve must be one of {RESERVATIONS}, got {self.reserve!r}")
        if self.max_len < 2:
            raise ValueError(f"max_len must be >= 2, got {self.max_len!r}")

    @property
    def paged(self) -> bool:
        return self.reserve is None

    def reservation(self, final_len: np.ndarray) -> np.ndarray:
        """Contiguous slots reserved for requests whose true final lengths are ``final_len``."""
        final_len = np.asarray(final_len, dtype=np.int64)
        if self.reserve == "max":
            return np.full_like(final_len, self.max_len)
        if self.reserve == "pow2":
            p2 = 1 << np.ceil(np.log2(np.maximum(final_len, 1))).astype(np.int64)
            return np.minimum(p2, self.max_len)
        if self.reserve == "oracle":
            return final_len.copy()
        raise ValueError(f"policy {self.name!r} is paged: it reserves nothing up front")


def orca_max(max_len: int = MAX_LEN) -> Policy:
    return Policy("Orca (Max)", reserve="max", max_len=max_len)


def orca_pow2(max_len: int = MAX_LEN) -> Policy:
    return Policy("Orca (Pow2)", reserve="pow2", max_len=max_len)


def orca_oracle(max_len: int = MAX_LEN) -> Policy:
    return Policy("Orca (Oracle)", reserve="oracle", max_len=max_len)


def vllm(block_size: int = 16, max_len: int = MAX_LEN) -> Policy:
    return Policy("vLLM", block_size=block_size, max_len=max_len)


def paper_policies(block_size: int = 16) -> list[Policy]:
    """The four systems of the paper's Fig. 2 and Fig. 13, in the paper's order."""
    return [orca_max(), orca_pow2(), orca_oracle(), vllm(block_size)]


class FirstFit:
    """A contiguous address space of ``size`` slots with first-fit placement."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size!r}")
        self.size = size
        self._starts: list[int] = []
        self._sizes: list[int] = []

    @property
    def used(self) -> int:
        return sum(self._sizes)

    def alloc(self, n: int) -> int | None:
        """Place ``n`` slots at the lowest fitting address; None (no change) if no hole fits."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n!r}")
        end = 0
        for i, (s, z) in enumerate(zip(self._starts, self._sizes, strict=True)):
            if s - end >= n:
                self._starts.insert(i, end)
                self._sizes.insert(i, n)
                return end
            end = s + z
        if self.size - end >= n:
            self._starts.append(end)
            self._sizes.append(n)
            return end
        return None

    def free(self, start: int) -> None:
        i = bisect_left(self._starts, start)
        if i == len(self._starts) or self._starts[i] != start:
            raise ValueError(f"no extent starts at {start!r}")
        del self._starts[i], self._sizes[i]

    def holes(self) -> list[int]:
        """Sizes of the free holes, in address order."""
        out, end = [], 0
        for s, z in zip(self._starts, self._sizes, strict=True):
            if s > end:
                out.append(s - end)
            end = s + z
        if self.size > end:
            out.append(self.size - end)
        return out


@dataclass(frozen=True)
class OneRequest:
    """One request's memory under contiguous reservation and under paging (paper Fig. 3).

    ``tokens`` slots hold KV now; a contiguous reservation of ``reserved_slots`` splits into
    ``tokens + future + never_used``; paging holds ``ceil(tokens / B)`` blocks whose empty tail
    ``paged_waste`` is always < B.
    """

    prompt: int
    response: int
    generated: int
    reserved_slots: int
    block_size: int

    def __post_init__(self) -> None:
        for name in ("prompt", "response", "reserved_slots", "block_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0 <= self.generated <= self.response:
            raise ValueError(f"generated must be in [0, {self.response}], got {self.generated!r}")
        if self.prompt + self.response > self.reserved_slots:
            raise ValueError(
                f"prompt + response = {self.prompt + self.response} exceeds the reservation "
                f"of {self.reserved_slots} slots"
            )

    @property
    def tokens(self) -> int:
        return self.prompt + self.generated

    @property
    def future(self) -> int:  # reserved for tokens still to come
        return self.prompt + self.response - self.tokens

    @property
    def never_used(self) -> int:  # internal fragmentation of the reservation
        return self.reserved_slots - self.prompt - self.response

    @property
    def paged_blocks(self) -> int:
        return -(-self.tokens // self.block_size)

    @property
    def paged_waste(self) -> int:
        return self.paged_blocks * self.block_size - self.tokens
