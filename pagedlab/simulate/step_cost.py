"""How long one step of continuous batching takes: only the simulator's time axis (arrivals
per step) depends on it, never the memory accounting."""

from __future__ import annotations

from dataclasses import dataclass

from pagedlab.ground.checks import check_int
from pagedlab.simulate.validate import check_real


@dataclass(frozen=True)
class StepCost:
    """Seconds per step: ``base_s + per_seq_s * batch + per_prefill_token_s * prompt tokens``.

    Ours (the paper gives no step times): a 30 ms floor (OPT-13B's 26 GB of weights take 17 ms
    at an A100's 1.555 TB/s peak, plus overheads), 0.5 ms per sequence, 0.1 ms per prompt token.
    Chosen so that Little's law lands near the paper's vLLM batch at 2 req/s (30 sequences
    take 45 ms; 2 x 338 x 0.045 = 30.4): vLLM's batch is calibrated, not predicted. The Orca
    baselines' batches are set by memory, so they hardly depend on it.
    """

    base_s: float = 0.030
    per_seq_s: float = 0.0005
    per_prefill_token_s: float = 0.0001

    def __post_init__(self) -> None:
        check_real(self.base_s, "base_s", above=0)
        check_real(self.per_seq_s, "per_seq_s", at_least=0)
        check_real(self.per_prefill_token_s, "per_prefill_token_s", at_least=0)

    def seconds(self, batch: int, prefill_tokens: int = 0) -> float:
        """Duration of one step that runs ``batch`` sequences and prefills ``prefill_tokens``."""
        batch = check_int(batch, "batch", minimum=0)
        prefill_tokens = check_int(prefill_tokens, "prefill_tokens", minimum=0)
        return self.base_s + self.per_seq_s * batch + self.per_prefill_token_s * prefill_tokens

    def scaled(self, factor: float) -> StepCost:
        """Every term times ``factor`` (for sensitivity checks)."""
        f = check_real(factor, "factor", above=0)
        return StepCost(self.base_s * f, self.per_seq_s * f, self.per_prefill_token_s * f)
