"""The graders are tested: each accepts its solution, rejects the common wrong answers with a
message that names the failing case, and never raises, whatever the learner's function does."""

# ruff: noqa: E501, E741  (the table of wrong answers reads best one answer per line)

from __future__ import annotations

import dataclasses
import math
import re
import threading
from typing import Any

import pytest

from pagedlab.exercises import EXERCISES, forget_results, in_notebook, progress, solution, stub
from pagedlab.exercises.nb09 import PARTS
from pagedlab.grade.cases import FAILED, PASSED, TODO, CheckResult
from pagedlab.grade.core import Function
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.prefix_cache import ROOT_HASH, block_hashes, chain_hash
from pagedlab.memory.requests import StepPlan
from pagedlab.memory.scheduler import Scheduler

NOTEBOOKS = [
    "01_why_paging",
    "02_block_table",
    "03_same_data_any_layout",
    "04_kernel_at_work",
    "05_sharing",
    "06_prefix_caching",
    "07_memory_at_scale",
    "08_to_vllm",
    "09_when_memory_runs_out",
    "10_real_model",
    "11_pagedattention_in_2026",
    "12_past_one_engine",
]
PLAIN = [name for name, e in EXERCISES.items() if "@triton.jit" not in e.stub_code]  # no triton


def test_enough_and_two_per_notebook() -> None:
    assert len(EXERCISES) >= 31
    for notebook in NOTEBOOKS:
        assert len(in_notebook(notebook[:2])) >= 2, notebook
    assert {e.notebook for e in EXERCISES.values()} == set(NOTEBOOKS)


@pytest.mark.parametrize("name", PLAIN)
def test_solution_passes(name: str) -> None:
    result = EXERCISES[name].check(EXERCISES[name].solution)
    assert result.passed, result.message
    assert result.status == PASSED and "✓" in result.message and "passed" in result.message


@pytest.mark.parametrize("name", PLAIN)
def test_the_cases_are_the_same_every_run(name: str) -> None:
    first, second = EXERCISES[name].cases(), EXERCISES[name].cases()
    assert [c.label or repr(c.args) for c in first] == [c.label or repr(c.args) for c in second]
    assert len(first) >= 5


@pytest.mark.parametrize("name", PLAIN)
def test_the_stub_is_not_done_yet(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(stub(name), namespace)
    entry = EXERCISES[name].entry or f"my_{name}"
    result = EXERCISES[name].check(namespace[entry])
    assert result.status == TODO and result.message.startswith(f"… {name}: not done yet")
    assert EXERCISES[name].check(namespace[entry]).message == result.message

    def raising(*args: object) -> object:
        raise NotImplementedError

    if EXERCISES[name].adapt is None:  # a class capstone takes a class, not a function
        assert EXERCISES[name].check(raising).status == TODO


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# name -> [(wrong implementation, words its message must hold[, words it must not hold])]:
# the wrong answers a learner writes first, and hostile ones
GENERIC = "what this case was built to catch"
WRONG = {
    # notebook 11 (oracle37): the hit-rate law and classifying a miss
    "shared_prefix_hits": [
        (lambda p, s, b: len(s) * (p // b) * b, "empty cache"),
        (lambda p, s, b: (len(s) - 1) * -(-p // b) * b, "round the prefix down"),
        (lambda p, s, b: (len(s) - 1) * (p // b) * b, "last prompt token"),
        (lambda p, s, b: (len(s) - 1) * p, GENERIC),
    ],
    "miss_counts": [
        (lambda n, h, b, c, s: {"hit": 0}, "inputs:"),
        (lambda n, h, b, c, s: _miss_counts(n, h, b, c, set()), "was evicted"),
        (lambda n, h, b, c, s: _miss_counts(n, h, b, set(), s), GENERIC),
    ],
    "blocks_needed": [
        (lambda n, b: n // b, "partly filled last block counts"),
        (lambda n, b: n // b + 1, "take no extra block"),
        (lambda n, b: round(n / b), "why:      5 tokens"),
        (lambda n, b: float(_ceil(n, b)), "should be an int, got a float"),
        (lambda n, b: (n + b - 1) >> (b.bit_length() - 1), "not a power of two"),  # pow2 only
        (lambda n, b: _ceil(n, 16), GENERIC, "partly filled"),  # block_size ignored
        (lambda n, b: _Yes(), "should be an int"),  # an object whose == always says yes
    ],
    "empty_slots": [
        (lambda n, b: b - n % b, "0 empty slots"),
        (lambda n, b: n % b, "counts the tokens"),
        (lambda n, b: (n // b) * b - n, "partly filled last block counts"),
        (lambda n, b: (-n) & (b - 1), "not a power of two"),  # pow2 only
    ],
    "reservation_waste": [
        (lambda p, r, s: s - r, "prompt"),
        (lambda p, r, s: s - p, "response"),
        (lambda p, r, s: s - p - r - 1, "expected:"),
        (lambda p, r, s: 2048 - p - r, "wastes nothing"),  # reserved_slots taken as constant
    ],
    "slot": [
        (lambda p, bl, b: (bl[p // b], p % b + 1), "offset counted from 1"),
        (lambda p, bl, b: (p // b, p % b), "logical block"),
        (lambda p, bl, b: (p % b, bl[p // b]), "wrong order"),
        (lambda p, bl, b: [bl[p // b], p % b], "got a list"),
        (lambda p, bl, b: (bl[p >> 2], p & 3), "not a power of two"),  # blocks of 4 only
        (lambda p, bl, b: _YesTuple((0, 0)), "case 2"),  # a tuple whose == lies
    ],
    "slot_mapping": [
        (lambda bl, n, b: [x * b + o for x in bl for o in range(b)], "empty slots"),
        (lambda bl, n, b: list(range(n)), "logical positions"),
        (lambda bl, n, b: [bl[p // b] * b + p % b + 1 for p in range(n)], "offset counted from 1"),
        (lambda bl, n, b: [bl[p // b] * b + p % b for p in range(n)][::-1], "inputs:"),
        (lambda bl, n, b: [bl[p // b] + p % b for p in range(n)], "is not a slot"),
    ],
    "new_blocks": [
        (lambda t, n, b: _ceil(n, b), "still have room"),
        (lambda t, n, b: _ceil(t + n, b), "every block the table holds"),
        (lambda t, n, b: (t + n) // b - t // b, "a partly filled block is a block too"),
        (lambda t, n, b: int((t + n) / b) - int(t / b), "inputs:", "//"),  # float division, truncated: no //
    ],
    "gather_kv": [
        (lambda k, bl, n: k[sorted(x for x in bl if x >= 0)[: _ceil(n, k.shape[1])]].flatten(0, 1)[:n], "sorted"),
        (lambda k, bl, n: k[: _ceil(n, k.shape[1])].flatten(0, 1)[:n], "go through blocks"),
        (lambda k, bl, n: k[bl[: _ceil(n, k.shape[1])]].flatten(0, 1), "drop the empty slots"),
        (lambda k, bl, n: k[bl[: _ceil(n, k.shape[1])]].flatten(0, 1)[:n].tolist(), "should be a torch.Tensor"),
    ],
    "online_step": [
        (lambda m, l, acc, s, v: _step(m, l, acc, s, v, rescale=False), "shrink to match the new one"),
        (lambda m, l, acc, s, v: _step(m, l, acc, s, v, invert=True), "alpha is at most 1"),
        (lambda m, l, acc, s, v: _step(m, l, acc, s, v)[:2], "expected:"),
        (lambda m, l, acc, s, v: list(_step(m, l, acc, s, v)), "got a list"),
    ],
    "valid_slots": [
        (lambda n, i, b: b, "partly filled last block"),
        (lambda n, i, b: n % b if i == (n - 1) // b else b, "a full last block"),
        (lambda n, i, b: n - i * b, "no block holds more"),
        (lambda n, i, b: min(4, n - i * 4), "blocks of 16"),  # block_size taken as 4
    ],
    "kv_head": [
        (lambda h, n, k: h % k, "not interleaved"),
        (lambda h, n, k: h // k, "how many query heads share one kv head"),
        (lambda h, n, k: round(h * k / n), GENERIC, "interleaved"),  # rounds instead of integer division
        (lambda h, n, k: h >> 2, "inputs:"),  # groups of 4 only
    ],
    "must_copy": [
        (lambda n, b, h: h > 1, "full last block"),
        (lambda n, b, h: n % b != 0, "written in place"),
        (lambda n, b, h: n % b != 0 and h > 2, "a ref count of 2"),
        (lambda n, b, h: int(n % b != 0 and h > 1), "should be a bool"),
        (lambda n, b, h: n < b and h > 1, GENERIC, "ref count"),  # partial only while n < b (the first block)
        (lambda n, b, h: (n & (b - 1)) != 0 and h > 1, "not a power of two"),  # pow2 only
    ],
    "refcounts_after_fork": [
        (lambda p, b, n: [n] * _ceil(p, b), "copy-on-write"),
        (lambda p, b, n: [n] * (p // b) + ([0] if p % b else []), "keeps the original"),
        (lambda p, b, n: ([n] * (p // b) + ([1] if p % b else []))[::-1], "inputs:"),
        (lambda p, b, n: [n] * (_ceil(p, b) - 1) + [1], "never copied"),
    ],
    "blocks_held": [
        (lambda p, o, n, b: n * _ceil(p + o, b), "without sharing"),
        (lambda p, o, n, b: _ceil(p, b) + n * (_ceil(p + o, b) - _ceil(p, b)), "partly filled"),
        (lambda p, o, n, b: p // b + 2 * (_ceil(p + o, b) - p // b), "3 samples"),  # n taken as 2
    ],
    "chain_hashes": [
        (lambda t, b: [chain_hash(ROOT_HASH, t[s : s + b]) for s in range(0, len(t) - b + 1, b)], "not chained"),
        (lambda t, b: block_hashes(t + [0] * (-len(t) % b), b), "why:      two full blocks"),
        (lambda t, b: block_hashes(t, b)[::-1], "inputs:"),
    ],
    "prefix_hits": [
        (lambda c, p, b: _hits(c, p, b, keep_last=True), "last prompt token"),
        (lambda c, p, b: _hits(c, p, b, chained=False), "chained hashes"),
        (lambda c, p, b: (len(p) - 1) // b if c else 0, "behind another prefix"),  # no hashing
        (lambda c, p, b: sum(h in c for h in block_hashes(p[:-1], b)) and 2, "inputs:"),
    ],
    "reserved_slots": [
        (lambda r, p, o, m: min(1 << (p + o - 1).bit_length(), m) if r == "pow2" else (m if r == "max" else p + o), "only the output"),
        (lambda r, p, o, m: min(p + (1 << o.bit_length()), m) if r == "pow2" else (m if r == "max" else p + o), "its own"),
        (lambda r, p, o, m: p + (1 << (o - 1).bit_length()) if r == "pow2" else (m if r == "max" else p + o), "max_len"),
        (lambda r, p, o, m: p + o, "inputs:"),
        (lambda r, p, o, m: min(p + (1 << (o - 1).bit_length()), 2048) if r == "pow2" else (2048 if r == "max" else p + o), "64"),  # max_len constant
    ],
    "mix_memory": [
        (lambda ls, m, b: (len(ls) * m, sum(ls)), "whole blocks"),
        (lambda ls, m, b: (len(ls) * m, sum(n // b * b for n in ls)), "partly filled"),
        (lambda ls, m, b: [len(ls) * m, sum(_ceil(n, b) * b for n in ls)], "got a list"),
        (lambda ls, m, b: (len(ls) * 2048, sum(_ceil(n, b) * b for n in ls)), "64"),  # max_len constant
    ],
    "pad_block_tables": [
        (lambda t: [r + [0] * (max(map(len, t)) - len(r)) for r in t], "0 is a real block"),
        (lambda t: [[-1] * (max(map(len, t)) - len(r)) + r for r in t], "after a row's blocks"),
        (lambda t: t, "expected:"),
    ],
    "place_newcomer": [
        (lambda r, f, n: (None, f[:n]), "why:      a newcomer that fits a hole"),
        (lambda r, f, n: (r.index(0), f[:n]), "must refuse (None)"),
        (lambda r, f, n: (_first_fit(r, n), sorted(f)[:n]), "free list's front"),
        (lambda r, f, n: (_first_fit(r, n), f[-n:]), "why:      notebook 1's pool"),
        (lambda r, f, n: (_first_fit(r, n, last=True), f[:n]), "first run that is long enough"),
        (lambda r, f, n: [_first_fit(r, n), f[:n]], "got a list"),
        (lambda r, f, n: (_first_fit(r[:-1], n), f[:n]), "ends at the pool's last block"),
    ],
    "pick_victim": [
        (lambda r: r[-1][0], "no particular order"),
        (lambda r: min(r, key=lambda x: x[1])[0], "preempts the latest"),
        (lambda r: r[0][0], "why:      listed in arrival order"),
        (lambda r: sorted(r)[-1][0], GENERIC, "no particular order"),  # by name, not arrival
    ],
    "tokens_to_recompute": [
        (lambda p, n, g: p + g, "every sample's generated tokens"),
        (lambda p, n, g: n * g, "prompt's K/V"),
        (lambda p, n, g: n * (p + g), "recomputed once"),
        (lambda p, n, g: p + n * g - 1, "inputs:"),  # the last token taken as already there
    ],
    "can_swap_in": [
        (lambda s, b, f: sum(len(x) for x, _ in s) + len(s) <= f, "why:      2 blocks"),
        (lambda s, b, f: len({x for bl, _ in s for x in bl}) <= f, "full last block needs a new block"),
        (lambda s, b, f: _swap_need(s, b, per_sample=True) <= f, "comes back once"),
        (lambda s, b, f: _swap_need(s, b, cow=False) <= f, "copy-on-write"),
        (lambda s, b, f: _swap_need(s, b) < f, "why:      2 blocks"),  # off by one: < not <=
        (lambda s, b, f: _swap_need(s, b, once=True) <= f, "one copy per sharer"),
        (lambda s, b, f: _swap_need(s, b, pow2=True) <= f, "fill 2 blocks of 3 exactly"),  # t & (b - 1)
    ],
    "swap_or_recompute": [
        (lambda n, b, r: ("recompute", "bandwidth"), "why:      big blocks and a slow prefill"),
        (lambda n, b, r: _decide(n, b, r, ways=10**9), "recompute is not always cheaper"),
        (lambda n, b, r: ("swap", "prefill"), "small blocks mean many transfers"),  # right on case 1
        (lambda n, b, r: _decide(n, b, r, ways=1), "count both ways"),
        (lambda n, b, r: _decide(n, b, r, reason="bandwidth"), "moving the bytes alone"),
        (lambda n, b, r: _decide(n, b, r, reason="latency"), "even the bytes alone"),
        (lambda n, b, r: _decide(n, b, r)[0], "should be a tuple[str, str], got a str"),
        (lambda n, b, r: ("recompute" if b < 64 else "swap", "latency" if b < 64 else "prefill"), "inputs:"),  # a block-size rule of thumb
    ],
    "pack_decode": [
        (lambda t, n, b: (_pad(t), list(n), [r[k // b] * b + k % b if k // b < len(r) else -1 for r, k in zip(t, n, strict=True)]), "off by one"),
        (lambda t, n, b: (_pad(t), list(n), [k - 1 for k in n]), "logical slot"),
        (lambda t, n, b: (_pad(t), list(n), [r[p // b] * b + p % b for r, k in zip(t, n, strict=True) for p in range(k)]), "one token per sequence"),
    ],
    # notebook 10: graded against the real engine's first steps
    "orca_vs_paged_slots": [
        (lambda ls, m, b: (len(ls) * m, sum(_ceil(p, b) * b for p in ls)), "prompt included"),
        (lambda ls, m, b: (sum(ls), sum(_ceil(p, b) * b for p in ls)), "new tokens too"),
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(ls)), "whole blocks"),
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(p // b * b for p in ls)), "one token needs it"),
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(_ceil(p + 1, b) * b for p in ls)), "written by the next step"),
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(_ceil(p, b) for p in ls)), "why:      notebook 10"),  # blocks, not slots
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(_ceil(p, 8) * 8 for p in ls)), GENERIC),  # block_size ignored
        (lambda ls, m, b: [sum(ls) + len(ls) * m, sum(_ceil(p, b) * b for p in ls)], "tuple"),
        (lambda ls, m, b: (sum(ls) + len(ls) * m, sum(_pow2_ceil(p, b) * b for p in ls)), "blocks of 3"),
    ],
    "samples_share": [
        (lambda p, n, b: (n * _ceil(p, b), n * _ceil(p, b) + (n - 1) * (p % b != 0)), "copies no block"),
        (lambda p, n, b: (_ceil(p, b), _ceil(p, b) + n), "writes in place"),
        (lambda p, n, b: (_ceil(p, b), _ceil(p, b) + n - 1), "never copied"),
        (lambda p, n, b: (p // b, p // b + n), "one token needs it"),
        (lambda p, n, b: (_ceil(p, b), _ceil(p, b)), "expected:"),  # no block for the new tokens
        (lambda p, n, b: (_ceil(p, b), n * _ceil(p + 1, b)), "expected:"),  # copies every block
        (lambda p, n, b: (_ceil(p, b), _ceil(p, b) + n - 1 if p % b else _ceil(p, b) + 1), "expected:"),
        (lambda p, n, b: (_pow2_ceil(p, b), _pow2_ceil(p, b) + (n - 1 if p & (b - 1) else n)), "blocks of 3"),
    ],
    "kv_route": [  # notebook 12's slips: a few written out
        (lambda p, b, i, l, w: min(l, key=l.get), "the overlap counts"),
        (lambda p, b, i, l, w: list(l)[0], "inputs:"),
        (lambda p, b, i, l, w: max(l, key=lambda n: w * len(i[n]) - l[n]), "its later blocks cannot hit"),
    ],
    "disagg_bytes": [
        (lambda l, h, d, b, t, s: l * 2 * h * d * b * t, "round the tokens up"),
        (lambda l, h, d, b, t, s: l * 2 * h * d * b * (t // s + 1) * s, "inputs:"),  # one block too many when aligned
    ],
}  # fmt: skip


class _Yes:
    """An answer whose == always says yes (and is an int subclass's cousin: no __index__)."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _YesTuple(tuple):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = tuple.__hash__


def _decide(n, b, r, ways=2, reason=None):  # type: ignore[no-untyped-def]
    from pagedlab.attention.swap_cost import CostModel

    model = CostModel(prefill_tokens_per_s=r)
    if ways * model.swap_s(n, b) < model.recompute_s(n):
        return "swap", "prefill"
    if reason is not None:
        return "recompute", reason
    bytes_s = 2 * n * model.kv_bytes_per_token / model.pcie_bytes_per_s
    return "recompute", "latency" if bytes_s < model.recompute_s(n) else "bandwidth"


def _first_fit(refcounts, need, last=False):  # type: ignore[no-untyped-def]
    found = None
    for first in range(len(refcounts) - need + 1):
        if all(c == 0 for c in refcounts[first : first + need]):
            found = first
            if not last:
                break
    return found


class _Table:
    """A block table with switches for the mistakes a learner makes building one."""

    fill_last = True  # fill the last block's empty slots before taking new blocks
    free_last_first = True
    reset_on_free = True
    count_tokens = True
    ceil_new = True  # ceiling division for the new blocks

    def __init__(self, allocator):  # type: ignore[no-untyped-def]
        self.allocator = allocator
        self.blocks = []
        self.num_tokens = 0

    def append_tokens(self, n):  # type: ignore[no-untyped-def]
        size = self.allocator.block_size
        room = len(self.blocks) * size - self.num_tokens if self.fill_last else 0
        rest = max(0, n - room)
        new = -(-rest // size) if self.ceil_new else rest // size
        for _ in range(new):
            self.blocks.append(self.allocator.allocate())
        if self.count_tokens:
            self.num_tokens += n

    def free(self):  # type: ignore[no-untyped-def]
        for block in reversed(self.blocks) if self.free_last_first else self.blocks:
            self.allocator.free(block)
        if self.reset_on_free:
            self.blocks = []
            self.num_tokens = 0


def _table(**switches: bool) -> type:
    return type("MyBlockTable", (_Table,), switches)


def _cow(copy=True, free_old=True, full_new=True, copy_when_full=False):  # type: ignore[no-untyped-def]
    def append(allocator, blocks, num_tokens):  # type: ignore[no-untyped-def]
        blocks = list(blocks)
        full = num_tokens % allocator.block_size == 0
        if full and not copy_when_full:
            if full_new:
                blocks.append(allocator.allocate())
            return blocks
        if copy and allocator.refcount(blocks[-1]) > 1:
            new = allocator.allocate()
            if free_old:
                allocator.free(blocks[-1])
            blocks[-1] = new
        return blocks

    return append


class _Cache:
    chained = True
    keep_last = False  # the learner forgets that the last prompt token is always computed
    stop_at_miss = True  # (without eviction a later block is never cached past a miss)
    first_wins = True

    def __init__(self, block_size):  # type: ignore[no-untyped-def]
        self.block_size, self.block_of = block_size, {}

    def _hashes(self, tokens):  # type: ignore[no-untyped-def]
        if self.chained:
            return block_hashes(tokens, self.block_size)
        b = self.block_size
        return [chain_hash(ROOT_HASH, tokens[s : s + b]) for s in range(0, len(tokens) - b + 1, b)]

    def lookup(self, tokens):  # type: ignore[no-untyped-def]
        found = []
        for h in self._hashes(tokens if self.keep_last else tokens[:-1]):
            if h in self.block_of:
                found.append(self.block_of[h])
            elif self.stop_at_miss:
                break
        return found

    def register(self, blocks, tokens):  # type: ignore[no-untyped-def]
        for block, h in zip(blocks, self._hashes(tokens), strict=False):
            if self.first_wins:
                self.block_of.setdefault(h, block)
            else:
                self.block_of[h] = block


def _cache(**switches: bool) -> type:
    return type("MyPrefixCache", (_Cache,), switches)


# the capstones: the wrong builds a learner writes first -> words the message must hold
WRONG_BUILDS = {
    "append_cow": [
        (_cow(copy=False), "after event 2 (append T0)"),  # writes into the shared block
        (_cow(free_old=False), "ref counts: expected [2, 1, 1"),  # copies, keeps its reference
        (_cow(full_new=False), "why:      a full shared last block"),
        (_cow(copy_when_full=True), "why:      a full shared last block"),
    ],
    "prefix_cache": [
        (_cache(chained=False), "why:      the same tokens behind another prefix"),
        (_cache(keep_last=True), "why:      a block-aligned prompt"),
        (_cache(first_wins=False), "why:      B recomputes A's last block"),
    ],
}


@pytest.mark.parametrize(
    ("name", "index"), [(n, i) for n, v in WRONG_BUILDS.items() for i in range(len(v))]
)
def test_a_wrong_build_is_rejected_at_the_first_event_it_gets_wrong(name: str, index: int) -> None:
    built, words = WRONG_BUILDS[name][index]
    result = EXERCISES[name].check(built)
    assert result.status == FAILED, f"{name} accepted wrong build #{index}"
    for part in ("why:", "inputs:", "expected:", "got:", words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"


# block_table: the wrong classes a learner builds first -> words the message must hold
WRONG_TABLES = {
    "block_table": [
        (_table(fill_last=False), "event 2 (T0.append_tokens(1))"),  # a new block every append
        (_table(free_last_first=False), "after event 2 (T0.free()): free list"),
        (_table(reset_on_free=False), "after event 2 (T0.free()): blocks"),
        (_table(count_tokens=False), "num_tokens"),
        (_table(ceil_new=False), "after event 1 (T0.append_tokens(5)): blocks"),
    ]
}


@pytest.mark.parametrize(("index"), range(len(WRONG_TABLES["block_table"])))
def test_a_wrong_block_table_is_rejected_at_the_first_event_it_gets_wrong(index: int) -> None:
    cls, words = WRONG_TABLES["block_table"][index]
    result = EXERCISES["block_table"].check(cls)
    assert result.status == FAILED
    for part in ("why:", "inputs:", "expected:", "got:", "where:", words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"


def test_a_table_class_passes_and_an_instance_is_refused() -> None:
    assert EXERCISES["block_table"].check(_Table).passed
    result = EXERCISES["block_table"].check(_Table(None))
    assert result.status == FAILED and "pass the class itself" in result.message


def _pow2_ceil(a, b):  # type: ignore[no-untyped-def]
    """ceil(a / b) by shifting: right for powers of two only."""
    return (a + b - 1) >> (b.bit_length() - 1)


def _swap_need(samples, b, cow=True, per_sample=False, once=False, pow2=False):  # type: ignore[no-untyped-def]
    from collections import Counter

    if per_sample:
        need = sum(len(blocks) for blocks, _ in samples)
    else:
        need = len({x for blocks, _ in samples for x in blocks})
    holders = Counter(blocks[-1] for blocks, _ in samples)
    for blocks, tokens in samples:
        if (tokens & (b - 1) if pow2 else tokens % b) == 0:
            need += 1
        elif cow and holders[blocks[-1]] > 1:
            need += 1
            holders[blocks[-1]] = 1 if once else holders[blocks[-1]] - 1
    return need


def _pad(t: list[list[int]]) -> list[list[int]]:
    width = max(map(len, t))
    return [r + [-1] * (width - len(r)) for r in t]


def _step(m, l, acc, s, v, rescale=True, invert=False):  # type: ignore[no-untyped-def]  # noqa: E741
    m_new = max([m, *s])
    alpha = math.exp(m - m_new) if rescale else 1.0
    if invert:
        alpha = math.exp(m_new - m) if m > -math.inf else 0.0
    w = [math.exp(x - m_new) for x in s]
    acc_new = [
        a * alpha + sum(x * vv[d] for x, vv in zip(w, v, strict=True)) for d, a in enumerate(acc)
    ]
    return m_new, l * alpha + sum(w), acc_new


def _miss_counts(n, h, b, c, s):  # type: ignore[no-untyped-def]
    from pagedlab.exercises.nb11 import miss_counts

    return miss_counts(n, h, b, c, s)


def _hits(cached, prompt, b, keep_last=False, chained=True):  # type: ignore[no-untyped-def]
    def hashes_of(t):  # type: ignore[no-untyped-def]
        if chained:
            return block_hashes(t, b)
        return [chain_hash(ROOT_HASH, t[s : s + b]) for s in range(0, len(t) - b + 1, b)]

    hashes = hashes_of(prompt if keep_last else prompt[:-1])
    hits = 0
    for h in hashes:
        if h not in cached:
            break
        hits += 1
    return hits


def test_every_plain_exercise_has_wrong_variants() -> None:
    steps = {"scheduler_step"} if len(WRONG_STEPS) >= 5 else set()
    assert set(WRONG) | set(WRONG_TABLES) | set(WRONG_BUILDS) | steps == set(PLAIN)


@pytest.mark.parametrize(
    ("name", "index"), [(name, i) for name, variants in WRONG.items() for i in range(len(variants))]
)
def test_wrong_variant_is_rejected_naming_the_case(name: str, index: int) -> None:
    wrong, words, *never = WRONG[name][index]
    result = EXERCISES[name].check(wrong)
    assert result.status == FAILED, f"{name} accepted a wrong answer #{index}"
    for part in ("✗", "case ", "inputs:", "expected:", "got:", "hint:", words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"
    hint = result.message.split("hint:", 1)[1]
    for part in never:  # a hint that names a mistake the learner did not make misleads
        assert part not in hint, f"{part!r} wrongly in:\n{result.message}"
    first = result.message.splitlines()[0]
    case_kind = first.split("(")[1].split(")")[0]
    if case_kind == "fixed":  # every fixed case says why it exists
        assert "  why:      " in result.message, result.message


def _raises(*args: object) -> object:
    return 1 // 0


class _Weird:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing me")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")

    __hash__ = None  # type: ignore[assignment]


FUNCTIONS = [name for name, e in EXERCISES.items() if isinstance(e, Function)]


@pytest.mark.parametrize(
    ("name", "key"), [(name, m.key) for name in FUNCTIONS for m in EXERCISES[name].mistakes]
)
def test_a_mistake_written_out_gets_its_own_hint(name: str, key: str) -> None:
    """Each Mistake is a wrong answer a learner writes: written out as the learner's function,
    it fails on a case designed against it, and the message gives its hint."""
    mistake = next(m for m in EXERCISES[name].mistakes if m.key == key)
    result = EXERCISES[name].check(mistake.answer)
    assert result.status == FAILED and f"hint:     {mistake.hint}" in result.message, result.message


@pytest.mark.parametrize("name", PLAIN)
def test_check_never_raises(name: str) -> None:
    exercise = dataclasses.replace(EXERCISES[name], budget_s=0.2)
    odd_inputs: list[object] = [
        _raises,
        lambda *a: _Weird(),
        lambda *a: "a string",
        lambda *a: [],
        lambda *a: (_ for _ in ()).throw(SystemExit(3)),
        lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()),
        3,
        None,
    ]
    for fn in odd_inputs:
        result = exercise.check(fn)
        assert isinstance(result, CheckResult) and result.status == FAILED, (fn, result)
    if not exercise.entry:
        assert "raised ZeroDivisionError" in exercise.check(_raises).message
    else:  # a class capstone: a function is refused by name
        assert "pass the class itself" in exercise.check(_raises).message


def _forever(*args: object) -> int:
    count = 0
    while True:
        try:
            count += 1
        except Exception:  # a learner's catch-all does not swallow the time budget
            count = 0


def test_an_endless_loop_is_stopped_by_the_budget() -> None:
    exercise = dataclasses.replace(EXERCISES["blocks_needed"], budget_s=0.3)
    result = exercise.check(_forever)
    assert result.status == FAILED and "no answer within 0.3 s" in result.message


def test_the_budget_holds_outside_the_main_thread_too() -> None:
    exercise = dataclasses.replace(EXERCISES["slot"], budget_s=0.3)
    found: list[CheckResult] = []
    worker = threading.Thread(target=lambda: found.append(exercise.check(_forever)))
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and "no answer within" in found[0].message


def test_the_learner_cannot_change_a_case() -> None:
    def mutating(blocks: list[int], num_tokens: int, block_size: int) -> list[int]:
        answer = [blocks[p // block_size] * block_size + p % block_size for p in range(num_tokens)]
        blocks.clear()
        return answer

    assert EXERCISES["slot_mapping"].check(mutating).passed


def test_progress_counts_the_checks_run_here() -> None:
    forget_results()
    assert progress("01").text.startswith("exercises in this notebook: 0 of 4 done")
    EXERCISES["blocks_needed"].check(EXERCISES["blocks_needed"].solution)
    EXERCISES["empty_slots"].check(lambda n, b: 0)
    assert progress("01").text == (
        "exercises in this notebook: 1 of 4 done (to do: empty_slots, reservation_waste, "
        "place_newcomer)"
    )
    EXERCISES["blocks_needed"].check(lambda n, b: 0)  # the latest check counts
    assert progress("01").done == ()
    forget_results()


def test_solution_shows_source() -> None:
    for name in EXERCISES:
        shown = solution(name)
        builds = ("block_table", "masked_copy", "gather_rows", "block_softmax")
        assert "def " in shown and ("return" in shown or name in builds) or name == "paged_kernel"
    assert "tl.load" in solution("paged_kernel")
    with pytest.raises(ValueError, match="no exercise named 'nope'"):
        solution("nope")


def test_results_render_as_text_and_html() -> None:
    result = EXERCISES["slot"].check(lambda p, bl, b: (bl[p // b], p % b + 1))
    assert repr(result) == result.message == str(result)
    assert (
        "&lt;lambda&gt;" in result._repr_html_() and "offset counted from 1" in result._repr_html_()
    )


def test_numpy_and_torch_scalars_count_as_numbers() -> None:
    import numpy as np
    import torch

    assert EXERCISES["blocks_needed"].check(lambda n, b: np.int64(_ceil(n, b))).passed
    assert EXERCISES["blocks_needed"].check(lambda n, b: torch.tensor(_ceil(n, b))).passed
    assert EXERCISES["must_copy"].check(lambda n, b, h: np.bool_(n % b != 0 and h > 1)).passed
    assert not EXERCISES["must_copy"].check(lambda n, b, h: np.int64(n % b != 0 and h > 1)).passed
    assert not EXERCISES["blocks_needed"].check(lambda n, b: np.float64(_ceil(n, b))).passed


def test_an_error_names_the_learners_line() -> None:
    def buggy(num_tokens: int, block_size: int) -> int:
        blocks = num_tokens / 0
        return int(blocks)

    message = EXERCISES["blocks_needed"].check(buggy).message
    assert "it raised ZeroDivisionError: division by zero" in message
    assert "at line " in message and "blocks = num_tokens / 0" in message


def test_the_alarm_and_its_handler_are_restored() -> None:
    import signal

    before = signal.getsignal(signal.SIGALRM)
    EXERCISES["blocks_needed"].check(_raises)
    dataclasses.replace(EXERCISES["slot"], budget_s=0.2).check(_forever)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def _stubborn(*args: object) -> int:
    while True:  # swallows every interruption, forever
        try:
            while True:
                pass
        except BaseException:  # noqa: S110
            pass


def test_a_function_that_swallows_every_interruption_is_still_stopped() -> None:
    from pagedlab.grade.sandbox import can_isolate

    if not can_isolate():  # pragma: no cover - Pyodide: no process to kill
        pytest.skip("no os.fork here")
    exercise = dataclasses.replace(EXERCISES["slot"], budget_s=0.3)
    result = exercise.check(_stubborn)
    assert result.status == FAILED and "no answer within 0.3 s (stopped)" in result.message


def _swallows_once(*args: object) -> int:
    try:
        while True:
            pass
    except BaseException:  # noqa: S110
        pass
    while True:
        pass


def test_in_process_the_alarm_fires_again_after_one_is_swallowed() -> None:
    from pagedlab.grade.sandbox import run_limited

    outcome = run_limited(_swallows_once, (), 0.2)
    assert outcome.timed_out


def test_a_written_body_without_return_is_asked_about_it() -> None:
    def forgot(num_tokens: int, block_size: int) -> None:
        blocks = -(-num_tokens // block_size)  # noqa: F841

    result = EXERCISES["blocks_needed"].check(forgot)
    assert result.status == FAILED and "did you forget `return`?" in result.message


class _LyingList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter([99])


class _Hangs:
    def __repr__(self) -> str:
        while True:
            pass


@pytest.mark.parametrize("isolate", [True, False], ids=["child", "in-process"])
def test_answers_are_plain_values_never_the_learners_eq(isolate: bool) -> None:
    """In a child or in this process, an answer is made plain where it is made, so the
    learner's ``==``, ``__iter__`` or ``__index__`` never decides what it is compared as."""
    import numpy as np
    import torch

    from pagedlab.grade.sandbox import Worker
    from pagedlab.grade.wire import WrongKind, to_plain

    def settled(answer: Any, like: Any, seconds: float = 3.0) -> Any:
        with Worker(lambda: lambda: answer, isolate) as worker:
            return to_plain(worker.call((), seconds).value, like)

    assert settled(_YesTuple((1, 2)), (0, 0)) == (1, 2)
    assert type(settled(_YesTuple((1, 2)), (0, 0))) is tuple
    assert settled(_LyingList([1, 2]), [0]) == [1, 2]
    assert isinstance(settled(_Yes(), 3), WrongKind)
    assert isinstance(settled(True, 3), WrongKind) and isinstance(settled(1, True), WrongKind)
    assert isinstance(settled(2.0, 3), WrongKind) and isinstance(settled([1], (1,)), WrongKind)
    assert settled([1, 2.0], [1, 1]) == [1, WrongKind("float", "2.0")]
    assert settled(np.int64(3), 0) == 3 and settled(torch.tensor(3), 0) == 3
    assert settled(np.bool_(True), False) is True and settled(torch.tensor(True), False) is True
    assert settled(np.float32(0.5), 1.0) == 0.5 and settled(torch.tensor(2), 1.0) == 2.0
    assert isinstance(settled(torch.tensor(2.0), 3), WrongKind)
    assert torch.equal(settled(torch.arange(3), torch.zeros(3)), torch.arange(3))
    assert isinstance(to_plain(_YesTuple((1, 2)), (0, 0)), WrongKind)  # never made plain
    assert settled(_Hangs(), 3, 0.2) is None or isinstance(settled(_Hangs(), 3, 0.2), WrongKind)


def test_what_the_learner_prints_in_a_child_still_shows(capsys: pytest.CaptureFixture[str]) -> None:
    def chatty(num_tokens: int, block_size: int) -> int:
        print("trying", num_tokens)
        return -(-num_tokens // block_size)

    assert EXERCISES["blocks_needed"].check(chatty).passed
    assert "trying 5" in capsys.readouterr().out


@pytest.mark.parametrize("name", PLAIN)
def test_every_parameter_is_varied_by_some_case(name: str) -> None:
    """A constant in place of a parameter must fail some case: each argument position takes at
    least two values over the cases (and every fixed case says why it exists)."""
    cases = EXERCISES[name].cases()
    for position, param in enumerate(EXERCISES[name].params):
        seen = {repr(case.args[position]) for case in cases if position < len(case.args)}
        assert len(seen) >= 2, f"{name}: {param} never varies"
    assert all(case.why for case in cases if case.kind == "fixed"), name


# scheduler_step (notebook 09's capstone): the wrong policies a learner writes first
def _sched_step(**wrong: bool) -> type[Scheduler]:
    """A subclass of the real Scheduler whose policy has the switches in ``wrong`` set (the
    right one with none)."""
    on = {k: wrong.get(k, False) for k in (
        "oldest", "back", "skip_ahead", "newest_first", "admit_after", "lose_victim",
        "admit_while_swapped", "swap_in_first", "swap_in_newest", "swap_in_after_preempt",
        "ignore_mode")}  # fmt: skip
    prefill_only = wrong.get("prefill_only", True)

    class MyScheduler(Scheduler):
        def admit_all(self, out: StepPlan) -> None:
            k = 0
            while k < len(self.waiting) and (on["admit_while_swapped"] or not self.swapped):
                if not self.admit(self.waiting[k], out):
                    if not on["skip_ahead"]:
                        return
                    k += 1

        def swap_in_all(self, out: StepPlan) -> None:
            while self.swapped and self.swap_in(
                self.swapped[-1 if on["swap_in_newest"] else 0], out
            ):
                pass

        def policy(self, out: StepPlan) -> None:
            if not on["admit_after"]:
                self.admit_all(out)
                if out.admitted and prefill_only:
                    return
            if on["swap_in_first"]:
                self.swap_in_all(out)
            for group in list(self.running)[:: -1 if on["newest_first"] else 1]:
                if group.name in out.admitted or group.name in out.swapped_in:
                    continue
                while group in self.running and not self.decode(group, out):
                    victim = self.running[0 if on["oldest"] else -1]
                    swap = self.mode == "swap" or on["ignore_mode"]
                    if not (swap and self.swap_out(victim, out)):
                        self.recompute(victim, out)
                        if on["back"] or on["lose_victim"]:
                            self.waiting.remove(victim)
                            self.waiting += [victim] if on["back"] else []
            if on["admit_after"] and not out.preempted:
                self.admit_all(out)
            if not on["swap_in_first"] and (on["swap_in_after_preempt"] or not out.preempted):
                self.swap_in_all(out)

    return MyScheduler


WRONG_STEPS = [
    (_sched_step(oldest=True), "preempted: expected ['C'], got ['B']"),  # the oldest preempted
    (_sched_step(back=True), "a preempted group arrived before everything still waiting"),
    (_sched_step(prefill_only=False), "a step that admits runs its prefills only"),
    (_sched_step(skip_ahead=True), "why:      admission is FCFS: B does not fit"),
    (_sched_step(newest_first=True), "decoded: expected ['A', 'B'], got ['B', 'A']"),
    (_sched_step(admit_after=True), "after step 3: decoded: expected [], got ['B']"),
    (_sched_step(lose_victim=True), "after step 5: waiting: expected ['C'], got []"),
    (_sched_step(admit_while_swapped=True), "nothing new is admitted"),  # the Mistake's hint
    (
        _sched_step(swap_in_first=True),
        "after step 16: running groups' blocks: expected [[[0, 2]], [[1]]], got [[[0, 1]], [[2]]]",
    ),
    (_sched_step(swap_in_newest=True), "swapped_in: expected ['B', 'C'], got ['C', 'B']"),
    (_sched_step(swap_in_after_preempt=True), "after step 7: swapped_in: expected [], got ['D']"),
    (
        _sched_step(ignore_mode=True),
        "swapped_out: expected [], got ['C']",
    ),  # swaps in recompute mode
]


def test_the_right_step_with_no_switch_passes() -> None:
    assert EXERCISES["scheduler_step"].check(_sched_step()).passed


@pytest.mark.parametrize("index", range(len(WRONG_STEPS)))
def test_a_wrong_scheduler_step_is_rejected_at_the_first_step_it_gets_wrong(index: int) -> None:
    step, words = WRONG_STEPS[index]
    result = EXERCISES["scheduler_step"].check(step)
    assert result.status == FAILED, f"scheduler_step accepted wrong step #{index}"
    for part in ("why:", "inputs:", "expected:", "got:", words):
        assert part in result.message, f"{part!r} not in:\n{result.message}"
    assert "self.running[-1]" not in result.message  # names what differed, not the code


def test_the_scheduler_step_cases_show_what_their_why_says() -> None:
    """Each fixed case's expected log (pagedlab's Scheduler's) holds the event its why names."""
    cases = EXERCISES["scheduler_step"].cases()

    def by_why(start: str) -> Any:
        return next(c.expected for c in cases if c.why.startswith(start))

    at = {part: PARTS.index(part) for part in PARTS}
    front = by_why("D never ran; C is preempted at step 3")
    assert front[2][at["preempted"]] == ["C"] and front[2][at["waiting"]] == ["C", "D"]
    prefill = by_why("C is admitted at step 3 while B runs")
    assert prefill[2][at["admitted"]] == ["C"] and prefill[2][at["decoded"]] == []
    assert "B" in prefill[2][at["running"]]
    freed = by_why("A and B finish at step 3 and their block")
    assert freed[2][at["finished"]] == ["A", "B"] and freed[2][at["admitted"]] == []
    assert freed[3][at["admitted"]] == ["C"]
    fcfs = by_why("admission is FCFS")
    assert fcfs[0][at["admitted"]] == ["A"] and fcfs[0][at["waiting"]] == ["B", "C"]
    newest = by_why("three requests fill the pool, and the po")
    victims = [s[at["preempted"]] for s in newest if s[at["preempted"]]]
    assert victims and all(v == ["C"] for v in victims[:1])
    itself = by_why("the group that needs a block is the newe")
    assert itself[2][at["decoded"]] == ["A"] and itself[2][at["preempted"]] == ["B"]
    shared = by_why("two samples share the prompt")  # the copy: each sample's own last block
    first_decode = shared[1][at["running groups' blocks"]]
    assert first_decode[0][0][-1] != first_decode[0][1][-1]
    assert any(s[at["preempted"]] for s in by_why("blocks of 3 (not a power of two), preemp"))


def test_the_scheduler_step_driver_refuses_what_is_not_a_policy_of_its_own() -> None:
    from pagedlab.grade.drivers import adapt_scheduler

    class Lazy(Scheduler):
        pass

    class Delegates(Scheduler):
        def policy(self, out: StepPlan) -> None:
            super().policy(out)

    saved = getattr(Scheduler, "pol" + "icy")  # a reference taken before the replay

    class Hidden(Scheduler):  # neither the name policy nor super() in its code
        def policy(self, out: StepPlan) -> None:
            saved(self, out)

    class Internal(Scheduler):  # the routines Scheduler's policy calls, called directly
        def policy(self, out: StepPlan) -> None:
            if not self._admit_whole(out, 1 << 62):
                self._decode(out, 1 << 62)

    for learner, words in [
        (Lazy, "Lazy does not define policy(self, out): write it"),
        (Scheduler, "Scheduler does not define policy(self, out)"),
        (len, "pass the class itself (MyScheduler)"),
        (int, "int must subclass Scheduler (class MyScheduler(Scheduler))"),
    ]:
        with pytest.raises(TypeError, match=re.escape(words)):
            adapt_scheduler(learner)
        result = EXERCISES["scheduler_step"].check(learner)
        assert result.status == FAILED and words in result.message, result.message
    for learner in (Delegates, Hidden, Internal):
        result = EXERCISES["scheduler_step"].check(learner)
        words = f"{learner.__name__}.policy calls Scheduler's own policy: write it yourself"
        assert result.status == FAILED and words in result.message, result.message
    with pytest.raises(TypeError, match="Hidden.policy calls Scheduler's own policy"):
        adapt_scheduler(Hidden)(6, 4, [("A", 6, 8, 1)], "recompute")  # in this process
    assert Scheduler.policy.__code__.co_name == "policy"  # restored on the way out
    assert Scheduler(BlockAllocator(4, 4)).step() is not None


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_the_reference_step_is_the_scheduler_on_many_seeded_traces(mode: str) -> None:
    """The grader's two sides agree well past its cases: the solution's policy is the
    Scheduler's with whole prefills and no token budget."""
    import random

    from pagedlab.exercises.nb09 import MyScheduler, _generated_specs, replay_steps

    rng = random.Random(20 if mode == "swap" else 21)
    preempted = 0
    for _ in range(80):
        num_blocks, size, specs = _generated_specs(rng)
        expected = replay_steps(Scheduler, num_blocks, size, specs, mode)
        assert replay_steps(MyScheduler, num_blocks, size, specs, mode) == expected, specs
        preempted += any(s[PARTS.index("preempted")] for s in expected)
    assert preempted >= 20  # the traces do exercise preemption


def test_cases_builds_fixed_then_seeded_cases_and_refuses_a_fixed_case_without_why() -> None:
    from pagedlab.grade.cases import cases, held_back

    def draw(rng: Any) -> tuple[int, int]:
        return rng.randint(0, 10**9), 2

    built = cases([(3, 2, "why one", ("k",)), (4, 2, "why two")], draw, 3, 7, expect=pow)
    assert [(c.args, c.expected, c.kind, c.why, c.catches) for c in built[:2]] == [
        ((3, 2), 9, "fixed", "why one", ("k",)), ((4, 2), 16, "fixed", "why two", ()),
    ]  # fmt: skip
    assert [c.kind for c in built[2:]] == ["generated"] * 3
    assert all(c.expected == c.args[0] ** 2 for c in built)
    assert [c.args for c in cases([], draw, 3, 7, expect=pow)] == [c.args for c in built[2:]]
    with held_back("salt"):
        salted = cases([(3, 2, "why one")], draw, 3, 7, expect=pow)
    assert salted[0].args == (3, 2)  # the fixed cases stay; the seeded ones come from the salt
    assert [c.args for c in salted[1:]] != [c.args for c in built[2:]]
    with pytest.raises(ValueError, match="a fixed case needs a one-line why"):
        cases([(3, 2, "")], expect=pow)


def test_every_exercise_is_one_of_the_three_kinds() -> None:
    from pagedlab.grade.core import Function, Kernel, Replay

    kinds = {name: type(e) for name, e in EXERCISES.items()}
    assert set(kinds.values()) <= {Function, Replay, Kernel}
    replays = {"block_table", "append_cow", "prefix_cache", "scheduler_step"}
    assert {n for n, k in kinds.items() if k is Replay} == replays
    for name in replays:  # each replay names the first step that differs, in one format
        assert EXERCISES[name].parts and EXERCISES[name].driver


def test_exercises_run_in_notebook_order_and_class_stubs_are_made_from_their_solutions() -> None:
    """EXERCISES is ordered by notebook; a class capstone's starter cell is its solution with
    each public method's body replaced (no stub text stored beside the solution)."""
    import inspect

    notebooks = [e.notebook for e in EXERCISES.values()]
    assert notebooks == sorted(notebooks)
    for name in ("block_table", "prefix_cache"):
        exercise = EXERCISES[name]
        assert not exercise.stub_code
        text, source = stub(name), inspect.getsource(exercise.solution)
        namespace: dict[str, object] = {}
        exec(text, namespace)  # the starter cell runs; its methods are not written yet
        methods = [m for m in vars(exercise.solution) if not m.startswith("_")]
        for method in methods:
            assert f'raise NotImplementedError("write {method}")' in text
            assert inspect.getdoc(getattr(namespace[exercise.entry], method)) == inspect.getdoc(
                getattr(exercise.solution, method))  # fmt: skip
        assert "def __init__" in text and text.count("def ") == len(methods) + 1
        assert source.split('"""')[1] in text  # the class docstring: the task
        print(f"{name}: stub of {len(text.splitlines())} lines made from its solution; "
              f"methods to write: {methods}")  # fmt: skip
