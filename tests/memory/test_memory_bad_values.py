"""Every public function of the memory layer, given every kind of bad value.

Wrong kinds (bools, numpy and 0-d torch bools, floats, NaN, inf, strings, None, lists, float
tensors) raise TypeError; wrong values (negative, zero where a count >= 1 is needed, huge)
raise ValueError or OutOfBlocksError. Every message names the value, and nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from pagedlab import BlockAllocator, BlockTable, OutOfBlocksError, PrefixCache
from pagedlab.memory.block_table import blocks_to_append
from pagedlab.memory.prefix_cache import block_hashes, chain_hash
from pagedlab.memory.savings import (
    alpaca_savings,
    beam_savings,
    format_savings,
    parallel_savings,
    savings_table,
)
from pagedlab.memory.sharing import beam_step, can_beam_step, fork_samples, holders
from pagedlab.scenes import figure9_before

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


# (name of the integer argument, a call that passes the bad value as that argument)
INT_ARGUMENTS: list[tuple[str, Callable[[Scene, Any], object]]] = [
    ("num_blocks", lambda s, v: BlockAllocator(v, 4)),
    ("block_size", lambda s, v: BlockAllocator(4, v)),
    ("free_order", lambda s, v: BlockAllocator(2, 4, free_order=[0, v])),
    ("block", lambda s, v: s.alloc.refcount(v)),
    ("block", lambda s, v: s.alloc.free(v)),
    ("block", lambda s, v: s.alloc.share(v)),
    ("block", lambda s, v: s.alloc.reuse(v)),
    ("block", lambda s, v: s.alloc.free_many([v])),
    ("block", lambda s, v: s.alloc.hold([v])),
    ("block", lambda s, v: s.alloc.holds(s.alloc.new_owner(), v)),
    ("count", lambda s, v: s.alloc.allocate_many(v)),
    ("count", lambda s, v: s.alloc.can_allocate(v)),
    ("n", lambda s, v: s.table.append_tokens(v)),
    ("n", lambda s, v: s.table.blocks_needed(v)),
    ("n", lambda s, v: s.table.can_append(v)),
    ("pos", lambda s, v: s.table.slot(v)),
    ("block", lambda s, v: BlockTable(s.alloc).hold_prefix([v])),
    ("num_tokens", lambda s, v: blocks_to_append(v, 1, 4)),
    ("n", lambda s, v: blocks_to_append(4, v, 4)),
    ("block_size", lambda s, v: blocks_to_append(4, 1, v)),
    ("n (number of samples)", lambda s, v: fork_samples(s.table, v)),
    ("num_tokens", lambda s, v: beam_step([s.table, s.child], [0, 1], v)),
    ("num_tokens", lambda s, v: can_beam_step([s.table, s.child], [0, 1], v)),
    ("parent index", lambda s, v: beam_step([s.table, s.child], [0, v])),
    ("num_blocks", lambda s, v: figure9_before(v)),
    ("hash_bytes", lambda s, v: PrefixCache(s.alloc, hash_bytes=v)),
    ("hash_bytes", lambda s, v: block_hashes([1, 2, 3, 4], 4, hash_bytes=v)),
    ("hash_bytes", lambda s, v: chain_hash("", [1], hash_bytes=v)),
    ("block_size", lambda s, v: block_hashes([1, 2, 3, 4], v)),  # a huge one: no full block
    ("token id", lambda s, v: s.cache.admit([1, v])),
    ("token id", lambda s, v: s.cache.lookup([1, v])),
    ("token id", lambda s, v: s.cache.can_admit([1, v])),
    ("token id", lambda s, v: s.cache.register(s.table, [1, 2, 3, 4, v])),
    ("token id", lambda s, v: chain_hash("", [v])),
    ("block", lambda s, v: s.cache.tokens_of(v)),
    ("prompt_len", lambda s, v: parallel_savings(v, 4, 2)),
    ("output_len", lambda s, v: parallel_savings(4, v, 2)),
    ("n", lambda s, v: parallel_savings(4, 4, v)),
    ("block_size", lambda s, v: parallel_savings(4, 4, 2, v)),
    ("k", lambda s, v: beam_savings(4, 4, v)),
    ("seed", lambda s, v: beam_savings(4, 4, 2, seed=v)),
    ("width", lambda s, v: alpaca_savings("beam", v, num_requests=2)),
    ("num_requests", lambda s, v: alpaca_savings("beam", 2, num_requests=v)),
    ("width", lambda s, v: savings_table(4, 4, widths=(2, v))),
]
# values among NEGATIVE + HUGE that an argument legitimately accepts (the call is then skipped)
ACCEPTS: dict[str, Callable[[int], bool]] = {
    "seed": lambda v: True,
    "token id": lambda v: -(2**63) <= v < 2**63,
}


def _check(call: Callable[[], object], s: Scene, kinds: tuple[type[BaseException], ...]) -> str:
    before = s.state()
    with pytest.raises(kinds) as raised:
        call()
    assert s.state() == before, f"{raised.value!r} changed the state"
    return str(raised.value)


@pytest.mark.parametrize("bad", WRONG_KINDS, ids=repr)
@pytest.mark.parametrize(("name", "call"), INT_ARGUMENTS, ids=[a[0] for a in INT_ARGUMENTS])
def test_wrong_kinds_are_type_errors(name: str, call, bad: object) -> None:  # type: ignore[no-untyped-def]
    s = scene()
    kinds: tuple[type[BaseException], ...] = (TypeError,)
    if name == "free_order":  # a permutation check, by contract a ValueError
        kinds = (ValueError,)
    message = _check(lambda: call(s, bad), s, kinds)
    if name != "free_order":
        assert name in message and repr(bad) in message, message


@pytest.mark.parametrize("bad", NEGATIVE + HUGE, ids=repr)
@pytest.mark.parametrize(("name", "call"), INT_ARGUMENTS, ids=[a[0] for a in INT_ARGUMENTS])
def test_wrong_values_are_value_errors(name: str, call, bad: object) -> None:  # type: ignore[no-untyped-def]
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


def test_the_issues_examples_raise_clearly_and_change_nothing() -> None:
    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(4)
    a.free(1)  # behind the table's back
    before = (a.refcounts(), a.free_list(), t.blocks)
    with pytest.raises(ValueError, match="block 1 was freed behind its back"):
        t.fork()
    assert (a.refcounts(), a.free_list(), t.blocks) == before == ([1, 0, 0, 0], [2, 3, 1], [0, 1])

    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(3)
    a.free(1)
    with pytest.raises(ValueError, match="block 1 was freed behind its back"):
        t.append_tokens(1)
    assert (t.num_tokens, a.refcounts()) == (3, [1, 0, 0, 0])

    with pytest.raises(TypeError, match="BlockTable needs a BlockAllocator.*got None"):
        BlockTable(None)  # type: ignore[arg-type]


def test_a_block_freed_behind_a_tables_back_is_never_freed_twice_or_overwritten() -> None:
    a = BlockAllocator(2, 2)
    t = BlockTable(a)
    t.append_tokens(3)  # blocks 0, 1
    a.free(1)
    other = BlockTable(a)
    other.append_tokens(2)  # is handed block 1
    assert other.blocks == [1] and t.lost == [1]
    for call in (t.free, t.append_token, t.slot_mapping, lambda: t.slot(0)):
        with pytest.raises(ValueError, match="freed behind its back"):
            call()
    assert a.refcounts() == [1, 1]  # the old table's free did not drop the new holder's block


def test_a_shared_block_freed_behind_the_back_costs_exactly_one_holder() -> None:
    a = BlockAllocator(4, 2)
    parent = BlockTable(a)
    parent.append_tokens(3)  # blocks 0 (full), 1 (one of two slots)
    child = parent.fork()
    a.free(1)  # drops the most recent holder's reference: the child's
    assert child.lost == [1] and parent.lost == [] and a.refcount(1) == 1
    assert parent.append_tokens() is None  # the parent alone holds block 1: in place
    with pytest.raises(ValueError, match="table 1: block 1 was freed behind its back"):
        child.append_tokens()


def test_anonymous_references_are_dropped_before_a_tables() -> None:
    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(1)
    a.share(0)  # a learner holds block 0 too
    a.free(0)  # drops the learner's reference, not the table's
    assert t.lost == [] and a.refcount(0) == 1
    assert t.append_tokens() is None


def test_impersonating_a_table_is_refused() -> None:
    a = BlockAllocator(4, 2)
    t = BlockTable(a)
    t.append_tokens(2)
    stranger = a.new_owner()
    with pytest.raises(ValueError, match="block 0 is not held by table 1"):
        a.free(0, stranger)
    with pytest.raises(TypeError, match="owner must be an Owner"):
        a.free(0, t.id)  # type: ignore[arg-type]
    assert a.refcounts() == [1, 0, 0, 0]


def test_a_closed_prefix_cache_answers_nothing() -> None:
    s = scene()
    s.table.free()
    s.child.free()  # block 0 is cached and free
    assert not s.cache.closed
    s.cache.close()
    s.cache.close()  # twice is harmless
    assert s.cache.closed
    BlockTable(s.alloc).append_tokens(32)  # every block handed out again, block 0 included
    assert s.cache.cached_blocks() == {}
    for call in (lambda: s.cache.lookup([1, 2, 3, 4, 5]), lambda: s.cache.admit([1, 2, 3, 4, 5])):
        with pytest.raises(ValueError, match="the prefix cache was closed"):
            call()


def test_cache_settings_are_read_only() -> None:
    s = scene()
    for name in ("hash_bytes", "allocator", "block_size", "stats"):
        with pytest.raises(AttributeError):
            setattr(s.cache, name, 0)


def test_beam_parents_may_be_a_numpy_array() -> None:
    s = scene()
    step = beam_step([s.table, s.child], np.array([1, 1]))
    assert [t.num_tokens for t in step.beams] == [6, 6]


def test_table_ids_are_read_only() -> None:
    s = scene()
    with pytest.raises(AttributeError):
        s.table.id = 7  # type: ignore[misc]


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda s: BlockAllocator(2**20 + 1, 1), ValueError, "num_blocks must be <= 1048576"),
        (lambda s: BlockAllocator(2**20, 2**12), ValueError, "exceeds 2\\*\\*31 - 1"),
        (lambda s: BlockAllocator(3, 4, free_order="012"), TypeError, "free_order must be"),
        (lambda s: BlockAllocator(3, 4, free_order=3), TypeError, "free_order must be"),
        (lambda s: BlockAllocator(3, 4, free_order=[0, 1, 1]), ValueError, "permutation"),
        (lambda s: BlockTable(s.cache), TypeError, "BlockTable needs a BlockAllocator"),
        (lambda s: s.table.hold_prefix(5), TypeError, "blocks must be a sequence"),
        (lambda s: BlockTable(s.alloc).hold_prefix([3, 3]), ValueError, "repeat a block"),
        (lambda s: BlockTable(s.alloc).hold_prefix([8]), ValueError, "block 8 is out of range"),
        (lambda s: s.alloc.subscribe(5), TypeError, "listener must be callable"),
        (lambda s: s.alloc.copy_on_write(0, None), TypeError, "owner must be an Owner"),
        (lambda s: s.alloc.free_many([7, 7]), ValueError, "repeat a block"),
        (lambda s: PrefixCache(None), TypeError, "PrefixCache needs a BlockAllocator"),
        (lambda s: s.cache.block_for(["x"]), TypeError, "block_hash must be a hex string"),
        (lambda s: s.cache.admit("abc"), TypeError, "tokens must be a sequence"),
        (lambda s: s.cache.admit(5), TypeError, "tokens must be a sequence"),
        (lambda s: s.cache.lookup(torch.tensor(3)), TypeError, "tokens must be a sequence"),
        (lambda s: s.cache.admit(np.array(3)), TypeError, "tokens must be a sequence"),
        (lambda s: s.alloc.free_many(torch.tensor(3)), TypeError, "blocks must be a sequence"),
        (lambda s: BlockTable(s.alloc).hold_prefix(np.array(1)), TypeError, "blocks must be"),
        (lambda s: BlockAllocator(1, 1, free_order=np.array(0)), TypeError, "free_order must"),
        (lambda s: s.cache.admit([]), ValueError, "at least one token"),
        (lambda s: s.cache.register("t", [1]), TypeError, "table must be a BlockTable"),
        (lambda s: chain_hash(None, [1]), TypeError, "parent must be a hex hash string"),
        (lambda s: chain_hash("", [2**64]), ValueError, "does not fit in 64 bits"),
        (lambda s: fork_samples(None, 2), TypeError, "prompt must be a BlockTable"),
        (lambda s: fork_samples(s.table, 10**9), ValueError, "must be <= 1024"),
        (lambda s: beam_step(s.table, [0]), TypeError, "beams must be a list"),
        (lambda s: beam_step([s.table], "0"), TypeError, "parents must be a sequence"),
        (lambda s: beam_step([s.table], 0), TypeError, "parents must be a sequence"),
        (lambda s: beam_step([s.table, s.table], [0]), ValueError, "repeat a table"),
        (lambda s: beam_step(["x"], [0]), TypeError, "beams must hold BlockTables"),
        (lambda s: beam_step([s.table], [0] * 1025), ValueError, "must be <= 1024"),
        (lambda s: beam_step([s.table], [1]), ValueError, "out of range"),
        (lambda s: holders([None]), TypeError, "tables must hold BlockTables"),
        (lambda s: alpaca_savings(["beam"], 2), TypeError, "mode must be"),
        (lambda s: alpaca_savings("greedy", 2), ValueError, "mode must be"),
        (lambda s: parallel_savings(4096, 4096, 64, 1), ValueError, "at most 4096"),
        (lambda s: savings_table(widths=4), TypeError, "widths must be a tuple"),
        (lambda s: format_savings([None]), TypeError, "rows must hold Savings"),
    ],
)
def test_other_bad_arguments(call, kind, message) -> None:  # type: ignore[no-untyped-def]
    s = scene()
    before = s.state()
    with pytest.raises(kind, match=message):
        call(s)
    assert s.state() == before
