"""The memory layer's bad values: one scene, one grid of wrong kinds and values, one check each.

Each memory module's test file lists its integer arguments as ``(name, call)`` rows and its
other bad calls as ``(call, kind, message)`` rows, and checks them with the functions here.
The rules: a wrong kind (bools, numpy and 0-d torch bools, floats, NaN, inf, strings, None,
lists, float tensors) is a ``TypeError`` naming the argument and the value; a wrong value
(negative, zero where a count >= 1 is needed, huge) a ``ValueError`` naming the value or an
``OutOfBlocksError`` (a pure question may answer instead: no, or a number of blocks); and a
refused call changes nothing: ref counts, free list, every table, the prefix cache and its
counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError, PrefixCache
from tests.refuses import refuses

WRONG_KINDS: list[Any] = [
    True,
    False,
    np.bool_(True),
    torch.tensor(True),
    1.5,
    2.0,
    float("nan"),
    float("inf"),
    np.float64(1.0),
    torch.tensor(2.5),
    "2",
    None,
    [1],
]
HUGE = [2**31, 2**64, 10**30]
NEGATIVE = [-1, np.int64(-2), torch.tensor(-3)]
WRONG_VALUES = NEGATIVE + HUGE


@dataclass
class Scene:
    alloc: BlockAllocator
    table: BlockTable  # 5 tokens in blocks 0, 1 (block size 4)
    child: BlockTable  # a fork of it
    cache: PrefixCache

    def state(self) -> tuple[object, ...]:
        return (
            self.alloc.refcounts(),
            self.alloc.free_list(),
            [(t.blocks, t.num_tokens, t.freed, t.lost) for t in (self.table, self.child)],
            self.cache.cached_blocks(),
            repr(self.cache.stats),
        )


def scene() -> Scene:
    alloc = BlockAllocator(8, 4)
    cache = PrefixCache(alloc)
    table = cache.admit([1, 2, 3, 4, 5]).table
    return Scene(alloc, table, table.fork(), cache)


IntCall = Callable[[Scene, Any], object]
"""A call that passes its second argument as the integer argument a row names."""

# values among WRONG_VALUES that an argument legitimately accepts (the call is then skipped)
ACCEPTS: dict[str, Callable[[int], bool]] = {
    "seed": lambda v: True,
    "token id": lambda v: -(2**63) <= v < 2**63,
}


def ids(rows: list[tuple[str, IntCall]]) -> list[str]:
    return [name for name, _ in rows]


def wrong_kind_refused(name: str, call: IntCall, bad: object) -> None:
    """``bad`` (a wrong kind) as ``name``: a TypeError naming both (``free_order``: a
    permutation check, by contract a ValueError), and nothing changed."""
    s = scene()
    if name == "free_order":
        refuses(lambda: call(s, bad), ValueError, state=s.state)
        return
    error = refuses(lambda: call(s, bad), TypeError, state=s.state)
    assert name in str(error) and repr(bad) in str(error), str(error)


def wrong_value_refused(name: str, call: IntCall, bad: object) -> None:
    """``bad`` (negative or huge) as ``name``: a ValueError naming the value, an
    OutOfBlocksError for too many blocks, or a pure question's answer; nothing changed."""
    s = scene()
    value = int(bad)  # type: ignore[call-overload]
    if "block_hashes" in call.__code__.co_names and name == "block_size" and value > 0:
        pytest.skip("tokens shorter than a block have no full block: [] is the answer")
    if ACCEPTS.get(name, lambda v: False)(value):
        pytest.skip(f"{name} accepts {value}")
    before = s.state()
    try:
        result = call(s, bad)
    except OutOfBlocksError as error:  # a huge count of blocks or tokens: too few free blocks
        assert value > 0 and "free" in str(error)
    except ValueError as error:
        assert str(value) in str(error) or "permutation" in str(error), str(error)
    else:  # a pure question with an answer: "no" (False) or a number of blocks
        assert value > 0 and (result is False or isinstance(result, int)), (name, result)
    assert s.state() == before


def other_bad_call_refused(
    call: Callable[[Scene], object], kind: type[BaseException], message: str
) -> None:
    """``call`` raises ``kind`` matching the regex ``message`` and changes nothing."""
    s = scene()
    refuses(lambda: call(s), kind, match=message, state=s.state)


OtherCall = tuple[Callable[[Scene], object], type[BaseException], str]
Test = Callable[..., None]


def misuse_tests(int_arguments: list[tuple[str, IntCall]],
                 other_calls: list[OtherCall]) -> tuple[Test, Test, Test]:  # fmt: skip
    """One module's three misuse tests over its rows, for its test file to bind to ``test_``
    names: wrong kinds and wrong values of each integer argument, then its other bad calls."""

    @pytest.mark.parametrize("bad", WRONG_KINDS, ids=repr)
    @pytest.mark.parametrize(("name", "call"), int_arguments, ids=ids(int_arguments))
    def wrong_kinds(name: str, call: IntCall, bad: object) -> None:
        wrong_kind_refused(name, call, bad)

    @pytest.mark.parametrize("bad", WRONG_VALUES, ids=repr)
    @pytest.mark.parametrize(("name", "call"), int_arguments, ids=ids(int_arguments))
    def wrong_values(name: str, call: IntCall, bad: object) -> None:
        wrong_value_refused(name, call, bad)

    @pytest.mark.parametrize(("call", "kind", "message"), other_calls)
    def other_calls_refused(call: Callable[[Scene], object], kind: type[BaseException],
                            message: str) -> None:  # fmt: skip
        other_bad_call_refused(call, kind, message)

    return wrong_kinds, wrong_values, other_calls_refused
