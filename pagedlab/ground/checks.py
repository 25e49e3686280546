"""Small shared checks: integer arguments, ceiling division and the slot formula.

Every public entry point validates its integers with :func:`check_int`, so every layer refuses
in the same words: a bool, float, string or non-integer 0-d tensor is a wrong *kind*
(:class:`ArgumentTypeError`), an integer out of range a wrong *value* (``ValueError``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind (``1.5`` or ``True`` for a count): a ``TypeError``, also a
    ``ValueError`` as the public contract promised before kinds and values were told apart."""


class Refused(Exception):
    """A request understood but refused by the model (e.g. no free block for it): nothing
    changed. ``OutOfBlocksError`` is one; an explorer shows any of them in its readout."""


def check_int(
    value: object, name: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` (an int or anything with ``__index__``, not a bool) as an int in
    ``[minimum, maximum]`` (either bound optional)."""
    if type(value) is int:  # the common case, decided at once (a bool's type is bool)
        number = value
    elif isinstance(value, bool) or _is_bool_like(value):
        raise ArgumentTypeError(f"{name} must be an integer, got {value!r}")
    else:
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise ArgumentTypeError(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {number}")
    return number


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of the strings ``choices``."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, one of {choices}, got {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_bool(value: object, name: str) -> bool:
    """``value`` is ``True`` or ``False`` (not 1, not a numpy bool); else an
    :class:`ArgumentTypeError` naming ``name`` and the value."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, got {value!r}")
    return value


def _is_bool_like(value: object) -> bool:
    """numpy bools and 0-d torch bool tensors: ``operator.index`` would take them as 0 / 1."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and str(dtype) in ("bool", "torch.bool")


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints, ``b > 0``: blocks that ``a`` positions need at ``b`` per block."""
    return -(-a // b)


def slot_mapping(blocks: Sequence[int], first: int, count: int, block_size: int) -> list[int]:
    """The slot mapping of positions ``first .. first + count - 1`` through ``blocks``: position
    ``p`` lives at offset ``p % block_size`` of block ``blocks[p // block_size]``, flat slot
    ``block * block_size + offset`` (vLLM's ``slot_mapping``). Written once, on the ground
    floor: ``BlockTable``, the scheduler's ``Work`` and the model's pieces all call it."""
    positions = range(first, first + count)
    return [blocks[p // block_size] * block_size + p % block_size for p in positions]
