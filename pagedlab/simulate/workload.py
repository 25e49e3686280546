"""Synthetic request traces for the memory simulator: Poisson arrivals, long-tailed lengths.

Poisson arrivals at ``rate`` per second over ``duration_s``. Prompt and output lengths are
lognormal with a stated log-space ``sigma`` (ShareGPT 1.0 / 0.8, Alpaca 0.6 / 0.8), the
log-mean solved so that ``E[min(X, cap)]`` is the paper's dataset mean (§6.1: ShareGPT
161.31 / 337.99, Alpaca 19.31 / 58.45; nothing downloaded); ``prompt + output <= max_len``
then shortens a few outputs (``Trace.summary`` prints both means). Not handled: correlated
lengths, multi-turn sessions, burstier arrivals. Invariants: same seed, identical arrays;
``arrival`` ascending; lengths int64 in ``[1, MAX_TOKENS]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pagedlab.ground import paper
from pagedlab.ground.checks import ArgumentTypeError, check_choice, check_int
from pagedlab.simulate.reservation import MAX_TOKENS as MAX_TOKENS  # re-exported
from pagedlab.simulate.validate import check_real, check_type

MAX_LEN = paper.MAX_SEQ_LEN  # OPT's longest sequence (§3, §6.1)
MAX_REQUESTS = 10_000_000  # a bound on rate x duration, so a typo cannot exhaust memory


@dataclass(frozen=True)
class LengthDist:
    """A lognormal length distribution clipped to ``[1, cap]`` with a target mean."""

    mean: float
    sigma: float

    def __post_init__(self) -> None:
        check_real(self.mean, "mean", at_least=1)
        check_real(self.sigma, "sigma", above=0)

    def mu(self, cap: int) -> float:
        """Log-mean such that E[min(X, cap)] == self.mean (bisection, exact formula)."""
        target = min(self.mean, cap - 1e-9)

        def capped_mean(mu: float) -> float:
            s = self.sigma
            z = (math.log(cap) - mu) / s
            phi = 0.5 * (1.0 + math.erf((z - s) / math.sqrt(2.0)))
            tail = 0.5 * math.erfc(z / math.sqrt(2.0))
            return math.exp(mu + s * s / 2.0) * phi + cap * tail

        lo, hi = -10.0, math.log(cap) + 10.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if capped_mean(mid) < target:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def sample(self, rng: np.random.Generator, n: int, cap: int) -> np.ndarray:
        x = rng.lognormal(self.mu(cap), self.sigma, size=n)
        return np.clip(np.rint(x), 1, cap).astype(np.int64)


# Log-space spreads (prompt, output): ours, stated in the module docstring, not the paper's.
SIGMAS = {"sharegpt": (1.0, 0.8), "alpaca": (0.6, 0.8)}

# name -> (prompt distribution, output distribution); means from the paper (§6.1, Fig. 11).
WORKLOADS: dict[str, tuple[LengthDist, LengthDist]] = {
    name: (LengthDist(mean_in, SIGMAS[name][0]), LengthDist(mean_out, SIGMAS[name][1]))
    for name, (mean_in, mean_out) in paper.MEAN_LENGTHS.items()
}


@dataclass(frozen=True)
class Trace:
    """A request trace: arrival times (s), prompt and output lengths (tokens)."""

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    duration_s: float
    name: str = "custom"

    def __post_init__(self) -> None:
        check_real(self.duration_s, "duration_s", above=0)
        check_type(self.name, "name", str)
        for field_name in ("arrival", "prompt", "output"):
            value = getattr(self, field_name)
            check_type(value, field_name, np.ndarray)
            if value.ndim != 1:
                raise ValueError(f"{field_name} must be 1-D, got shape {value.shape}")
            kinds, what = ("iuf", "real numbers") if field_name == "arrival" else ("iu", "integers")
            if value.dtype.kind not in kinds:
                raise ArgumentTypeError(f"{field_name} must hold {what}, got dtype {value.dtype}")
        if not np.all(np.isfinite(self.arrival)) or np.any(self.arrival < 0):
            raise ValueError("arrival times must be finite and >= 0")
        n = len(self.arrival)
        if len(self.prompt) != n or len(self.output) != n:
            raise ValueError(
                f"arrival, prompt, output must have equal lengths, got "
                f"{n}, {len(self.prompt)}, {len(self.output)}"
            )
        for field_name in ("prompt", "output"):
            value = getattr(self, field_name)
            if n and int(value.min()) < 1:
                raise ValueError(f"every {field_name} length must be >= 1, got {int(value.min())}")
            if n and int(value.max()) > MAX_TOKENS:
                raise ValueError(
                    f"every {field_name} length must be <= {MAX_TOKENS} (2**31 - 1), "
                    f"got {int(value.max())}"
                )
            object.__setattr__(self, field_name, value.astype(np.int64))  # a copy, widened
        if n and np.any(np.diff(self.arrival) < 0):
            raise ValueError("arrival times must be sorted ascending")

    @property
    def final_len(self) -> np.ndarray:
        return self.prompt + self.output

    def __len__(self) -> int:
        return len(self.arrival)

    def summary(self) -> str:
        tgt = WORKLOADS.get(self.name)
        goal = f" (paper: {tgt[0].mean} / {tgt[1].mean})" if tgt else ""
        return (
            f"{self.name}: {len(self)} requests over {self.duration_s:.0f} s, mean prompt "
            f"{self.prompt.mean():.1f} / mean output {self.output.mean():.1f} tokens{goal}"
        )


def make_trace(
    rate: float,
    duration_s: float,
    workload: str = "sharegpt",
    seed: int = 0,
    max_len: int = MAX_LEN,
) -> Trace:
    """Poisson arrivals at ``rate`` req/s for ``duration_s`` s with the named workload's lengths."""
    rate = check_real(rate, "rate", above=0)
    duration_s = check_real(duration_s, "duration_s", above=0)
    check_choice(workload, "workload", tuple(WORKLOADS))
    seed = check_int(seed, "seed", minimum=0)
    max_len = check_int(max_len, "max_len", minimum=2, maximum=MAX_TOKENS)
    if rate * duration_s > MAX_REQUESTS:
        raise ValueError(
            f"rate x duration_s must be <= {MAX_REQUESTS} requests, got rate={rate!r}, "
            f"duration_s={duration_s!r}"
        )
    rng = np.random.default_rng(seed)
    # Enough exponential gaps to pass duration_s with overwhelming probability, then cut.
    n_draw = int(rate * duration_s + 10 * math.sqrt(rate * duration_s) + 10)
    arrival = np.cumsum(rng.exponential(1.0 / rate, size=n_draw))
    arrival = arrival[arrival < duration_s]
    n = len(arrival)
    pd, od = WORKLOADS[workload]
    prompt = pd.sample(rng, n, max_len - 1)
    output = od.sample(rng, n, max_len - 1)
    output = np.minimum(output, max_len - prompt)
    return Trace(arrival, prompt, output, float(duration_s), workload)
