"""The data plane's bad-call tables: one world, one way to build rows, one check for a row.

Each data-plane test file (kv_cache, ops, kernel_steps, batch) keeps a :class:`BadCalls` table
of its module's bad calls and checks every row with :func:`refused`. The rule a row checks:
a wrong kind (bools, floats, strings, numpy and torch scalars, sparse, meta, quantized and
integer tensors) raises ``TypeError`` (``ArgumentTypeError``, also a ``ValueError`` for the
contract's sake); a wrong value (negative, huge, NaN/inf, out of range, duplicate) raises a
``ValueError`` that is *not* a ``TypeError``; the message names the argument and, for scalars,
the value; and afterwards the cache's K/V bytes and every input tensor's bytes are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from pagedlab import PagedKVCache
from tests.refuses import refuses

KIND, VALUE = TypeError, ValueError
# Not an integer, whatever operator.index or torch.as_tensor would make of it.
NOT_INTS: list[object] = [True, np.bool_(True), torch.tensor(True), 1.5, np.float64(2.0)]
NOT_INTS += [torch.tensor(2.0), "3", None, [1], 1 + 0j, math.nan]
HUGE = 2**70


@dataclass
class World:
    """A written cache and valid attention inputs over it (the example's layout, two sequences)."""

    cache: PagedKVCache
    k: torch.Tensor  # [3, 2, 3], three fresh tokens
    v: torch.Tensor
    attention: dict[str, torch.Tensor]

    def snapshot(self) -> list[bytes]:
        tensors = [self.cache.key, self.cache.value, self.k, self.v, *self.attention.values()]
        return [t.detach().contiguous().view(torch.uint8).numpy().tobytes() for t in tensors]


def world() -> World:
    gen = torch.Generator().manual_seed(0)
    cache = PagedKVCache(6, 4, 2, 3, device="cpu")
    cache.write(list(range(24)), *torch.randn(2, 24, 2, 3, generator=gen))
    k, v = torch.randn(2, 3, 2, 3, generator=gen)
    attention = {
        "query": torch.randn(2, 4, 3, generator=gen),
        "key_cache": cache.key.clone(),
        "value_cache": cache.value.clone(),
        "block_tables": torch.tensor([[4, 1], [0, -1]], dtype=torch.int32),
        "seq_lens": torch.tensor([5, 3], dtype=torch.int32),
    }
    return World(cache, k, v, attention)


Call = Callable[[World], object]


@dataclass(frozen=True)
class BadCall:
    """One bad call: its label, the call on a fresh world, the error kind, the words named."""

    label: str
    call: Call
    kind: type[Exception]
    words: tuple[str, ...]


class BadCalls(list[BadCall]):
    """A module's table of bad calls."""

    def case(self, label: str, call: Call, kind: type[Exception], *words: str) -> None:
        self.append(BadCall(label, call, kind, words))

    def ints(
        self,
        label: str,
        name: str,
        call: Callable[[World, object], object],
        bad_values: Iterable[object],
        *,
        kinds: bool = True,
        value_says: str | None = None,
    ) -> None:
        """Every non-integer (unless ``kinds`` is false: a ``TypeError`` saying "``name`` must
        be an integer") and each of ``bad_values`` (a ``ValueError`` naming ``name`` and the
        value, and saying ``value_says.format(name=name, x=value)`` when given) passed as the
        integer argument ``name``."""
        for x in NOT_INTS if kinds else []:
            words = (name, f"{name} must be an integer")
            self.case(f"{label} {x!r}", lambda w, x=x: call(w, x), KIND, *words)
        for x in bad_values:
            says = () if value_says is None else (value_says.format(name=name, x=x),)
            self.case(f"{label} {x!r}", lambda w, x=x: call(w, x), VALUE, name, str(x), *says)

    def ids(self) -> list[str]:
        return [f"{i:03d} " + " ".join(c.label.split())[:70] for i, c in enumerate(self)]

    def labels(self) -> str:
        return " ".join(c.label for c in self)


def refused(bad: BadCall) -> None:
    """``bad`` raises its kind (a wrong value never as a ``TypeError``), a pagedlab or builtin
    error naming every one of its words, and leaves the world's bytes as they were."""
    w = world()
    error = refuses(lambda: bad.call(w), bad.kind, state=w.snapshot)
    if bad.kind is VALUE:
        assert not isinstance(error, TypeError), f"a wrong value, reported as a wrong kind: {error}"
    assert type(error).__module__.startswith(("pagedlab", "builtins")), repr(error)
    for word in bad.words:
        assert word in str(error), f"{word!r} not named in: {error}"
