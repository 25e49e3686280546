"""BlockAllocator refuses bad input: a wrong kind is a TypeError, a wrong value a ValueError
(or OutOfBlocksError), each naming the value, and a refused call changes nothing; a table's
reference cannot be dropped by a stranger, and an anonymous reference goes before a table's.

Its behaviour under any sequence of operations: test_allocator_properties; its free rules:
test_free_rules.
"""

from __future__ import annotations

import numpy as np
import torch

from pagedlab import BlockAllocator, BlockTable
from tests.memory.bad_calls import (
    IntCall,
    OtherCall,
    misuse_tests,
)
from tests.refuses import refuses

INT_ARGUMENTS: list[tuple[str, IntCall]] = [
    ("num_blocks", lambda s, v: BlockAllocator(v, 4)),
    ("block_size", lambda s, v: BlockAllocator(4, v)),
    ("free_order", lambda s, v: BlockAllocator(2, 4, free_order=[0, v])),
    ("block", lambda s, v: s.alloc.refcount(v)),
    ("block", lambda s, v: s.alloc.free(v)),
    ("block", lambda s, v: s.alloc.share(v)),
    ("block", lambda s, v: s.alloc.reuse(v)),
    ("block", lambda s, v: s.alloc.free_many([v])),
    ("block", lambda s, v: s.alloc.hold([v])),
    ("count", lambda s, v: s.alloc.can_allocate(v)),
]


OTHER_CALLS: list[OtherCall] = [
    (lambda s: BlockAllocator(2**20 + 1, 1), ValueError, "num_blocks must be <= 1048576"),
    (lambda s: BlockAllocator(2**20, 2**12), ValueError, "exceeds 2\\*\\*31 - 1"),
    (lambda s: BlockAllocator(3, 4, free_order="012"), TypeError, "free_order must be"),
    (lambda s: BlockAllocator(3, 4, free_order=3), TypeError, "free_order must be"),
    (
        lambda s: BlockAllocator(3, 4, free_order=[0, 1, 1]),
        ValueError,
        r"permutation of range\(3\), got \[0, 1, 1\]",
    ),
    (lambda s: BlockAllocator(3, 4, free_order=[0, 1]), ValueError, "permutation"),
    (lambda s: BlockAllocator(3, 4, free_order=[0, 1, "x"]), ValueError, "permutation"),
    (lambda s: BlockAllocator(0, 4), ValueError, "num_blocks must be >= 1, got 0"),
    (lambda s: BlockAllocator(4, -2), ValueError, "block_size must be >= 1, got -2"),
    (lambda s: BlockAllocator(4, 2.5), TypeError, "block_size must be an integer, got 2.5"),
    (lambda s: s.alloc.subscribe(5), TypeError, "listener must be callable"),
    (lambda s: s.alloc.copy_on_write(0, None), TypeError, "owner must be an Owner"),
    (lambda s: s.alloc.free_many([7, 7]), ValueError, "repeat a block"),
    (lambda s: s.alloc.free_many(torch.tensor(3)), TypeError, "blocks must be a sequence"),
    (lambda s: BlockAllocator(1, 1, free_order=np.array(0)), TypeError, "free_order must"),
]
(
    test_wrong_kinds_are_type_errors,
    test_wrong_values_are_value_errors,
    test_other_bad_arguments,
) = misuse_tests(INT_ARGUMENTS, OTHER_CALLS)


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
    refuses(lambda: a.free(0, stranger), match="block 0 is not held by table 1", state=a.refcounts)
    refuses(lambda: a.free(0, t.id), TypeError, match="owner must be an Owner", state=a.refcounts)  # type: ignore[arg-type]
    assert a.refcounts() == [1, 0, 0, 0]
