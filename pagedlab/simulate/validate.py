"""Argument checks shared by the simulator's public functions (besides ``checks.check_int``):
a wrong kind raises ``ArgumentTypeError``, a wrong value ``ValueError``, each naming the value."""

from __future__ import annotations

import math
import numbers

from pagedlab.ground.checks import ArgumentTypeError


def check_real(
    value: object,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
) -> float:
    """``value`` (a real number or numpy real scalar, not a bool) as a finite float, ``> above``,
    ``>= at_least`` and ``< below`` (each optional)."""
    boolean = isinstance(value, bool) or str(getattr(value, "dtype", "")) == "bool"
    if boolean or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond the largest float (10**400)
        raise ValueError(f"{name} must be finite, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if above is not None and not number > above:
        raise ValueError(f"{name} must be > {above}, got {value!r}")
    if at_least is not None and not number >= at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    if below is not None and not number < below:
        raise ValueError(f"{name} must be < {below}, got {value!r}")
    return number


def check_type(value: object, name: str, kind: type) -> None:
    """Refuse ``value`` unless it is a ``kind``."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{name} must be a {kind.__name__}, got {value!r}")
