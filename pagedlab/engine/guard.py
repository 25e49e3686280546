"""What the engine watches to keep its promise: the model's weights.

Cached K/V are a function of the weights that computed them. :func:`weights_fingerprint`
identifies the weights a model holds now: each parameter's storage (a new tensor:
``param.data = ...``, ``.to(...)``) and its version counter, which torch bumps on every
in-place change (``load_state_dict``'s ``copy_``, ``mul_`` under ``no_grad``, an optimiser
step). Equal fingerprints: the same tensors, unchanged since. Cheap (one tuple of a few
hundred ints), so the engine checks it at every step.
"""

from __future__ import annotations

from torch import nn


def weights_fingerprint(model: nn.Module) -> tuple[tuple[int, int, int], ...]:
    """``(id, data_ptr, version)`` of every parameter and buffer of ``model``, in order."""
    tensors = [*model.parameters(), *model.buffers()]
    return tuple((id(t), t.data_ptr(), t._version) for t in tensors)
