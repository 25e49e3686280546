"""Closed-form accounting of a run of steps during which only lengths change: every sequence
gains one token per step, so each category's slots after step ``j = 1..k`` are simple functions
of ``j``, their sums (``CATEGORIES`` order, adding up to ``k x pool``) and rows one numpy
expression each. Categories (slots; they sum to the pool at every step, tests check it):

    tokens    KV of tokens computed so far
    reserved  contiguous slots reserved for the request's future tokens (paged: none)
    internal  contiguous: reservation beyond the true final length; paged: empty slots in
              each sequence's last block (< B per sequence)
    rounding  contiguous: the allocator's extent beyond the reservation (paged: none)
    external  free slots a waiting request cannot use (no extent fits; paged: held back by
              the watermark or too few for the head's prompt, plus ``slots % B``)
    idle      free slots while nobody waits: no demand, not the policy's waste.
``fig2_shares()`` gives the paper's Fig. 2 segments: rounding goes into "external
fragmentation and others" (the paper's Oracle bar has no internal fragmentation though its
buddy allocator rounds); idle is left out (our choice; printed beside them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pagedlab.simulate.policies import Policy

CATEGORIES = ("tokens", "reserved", "internal", "rounding", "external", "idle")
FIG2 = ("tokens", "reserved", "internal", "external")  # the segments of the paper's Fig. 2

Sums = tuple[int, int, int, int, int, int]  # per category of CATEGORIES, summed over the steps
Rows = dict[str, np.ndarray] | None  # per category, one value per step (record mode)


@dataclass
class SimResult:
    policy: Policy
    pool_slots: int
    steps: int
    sim_time_s: float
    finished: int
    admitted: int
    preemptions: int
    mean_batch: float
    mean_slots: dict[str, float]  # category -> mean slots over steps
    history: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def shares(self) -> dict[str, float]:
        """Mean share of the pool in each category of ``CATEGORIES`` (sums to 1)."""
        return {k: v / self.pool_slots for k, v in self.mean_slots.items()}

    def fig2_shares(self) -> dict[str, float]:
        """The paper's Fig. 2 segments, as shares of the non-idle pool (sums to 1);
        ``external`` includes the allocator's rounding."""
        m = self.mean_slots
        busy = self.pool_slots - m["idle"]
        seg = {k: m[k] for k in FIG2}
        seg["external"] += m["rounding"]
        return {k: (v / busy if busy > 0 else 0.0) for k, v in seg.items()}


def _tokens(length: np.ndarray, k: int) -> int:
    """Token states summed over steps 1..k for sequences of ``length`` (one token each a step)."""
    n = len(length)
    return int(length.sum()) * k + n * k * (k + 1) // 2


def _tokens_per_step(length: np.ndarray, k: int) -> np.ndarray:
    """Token states after each of steps 1..k."""
    return int(length.sum()) + len(length) * np.arange(1, k + 1)


def _as_rows(per: Mapping[str, object]) -> dict[str, np.ndarray]:
    return {name: np.asarray(per[name], np.float64) for name in CATEGORIES}


def paged_steps(
    length: np.ndarray,
    k: int,
    block_size: int,
    nblocks: int,
    tail: int,
    waiting: bool,
    blocks_after_first: int,
    rows: bool,
) -> tuple[int, Sums, Rows]:
    """Account up to ``k`` paged steps, stopping before the first that lacks blocks
    (``blocks_after_first`` fit); returns the steps accounted, the sums and the rows."""
    B = block_size
    if k == 1:
        used = np.array([blocks_after_first])
    else:
        j = np.arange(1, k + 1, dtype=np.int64)
        used = (-(-(length[None, :] + j[:, None]) // B)).sum(axis=1)  # blocks after step j
        if used[-1] > nblocks:  # monotone: the first step that cannot get its blocks waits
            k = int(np.argmax(used > nblocks))
            used = used[:k]
    tok = _tokens(length, k)
    used_sum = int(used.sum())
    free = (nblocks * k - used_sum) * B
    sums = (tok, 0, used_sum * B - tok, 0, tail * k + free * waiting, free * (not waiting))
    if not rows:
        return k, sums, None
    free_j = (nblocks - used) * B
    tok_j = _tokens_per_step(length, k)
    per = {
        "tokens": tok_j,
        "reserved": np.zeros(k),
        "internal": used * B - tok_j,
        "rounding": np.zeros(k),
        "external": tail + free_j * waiting,
        "idle": free_j * (not waiting),
    }
    return k, sums, _as_rows(per)


def contiguous_steps(
    length: np.ndarray,
    final: np.ndarray,
    reserved: np.ndarray,
    extent: np.ndarray,
    k: int,
    pool: int,
    waiting: bool,
    rows: bool,
) -> tuple[Sums, Rows]:
    """Account ``k`` steps of contiguous reservations (each request holds its ``extent``)."""
    tok = _tokens(length, k)
    f, r, e = int(final.sum()), int(reserved.sum()), int(extent.sum())
    free = (pool - e) * k
    sums = (tok, f * k - tok, (r - f) * k, (e - r) * k, free * waiting, free * (not waiting))
    if not rows:
        return sums, None
    tok_j = _tokens_per_step(length, k)
    per = {
        "tokens": tok_j,
        "reserved": f - tok_j,
        "internal": np.full(k, r - f),
        "rounding": np.full(k, e - r),
        "external": np.full(k, (pool - e) * waiting),
        "idle": np.full(k, (pool - e) * (not waiting)),
    }
    return sums, _as_rows(per)
