"""Drivers: the code that runs a learner's object on one case's arguments, and nothing else.

``ADAPTERS[name](learner_object)`` is a function of a case's arguments. The replays are ONE
loop, :func:`replay`, over a :class:`World` holding pagedlab's real objects (the grader's
expected log) or the learner's (the answer): block tables (:class:`Tables`), forks
(:class:`Forks`), a prefix cache (:class:`Admissions`), scheduler steps (:class:`Steps`).
While a capstone runs, the pagedlab code it replaces is :func:`refused`: wrapping is not writing.

Invariant: no expected value, no case, no solution here, and nothing of
:mod:`pagedlab.exercises`: the grading child loads it beside the learner's code. Torch-free.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any, Protocol

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Request, StepPlan
from pagedlab.memory.scheduler import Scheduler, SchedulerConfig

Spec = tuple[str, int, int, int]  # (name, prompt_len, output_len, num_samples)
Log = list[tuple[Any, ...]]


class World(Protocol):
    """What a replay runs: pagedlab's real objects, or the learner's, behind one interface."""

    def apply(self, event: Any) -> None: ...

    def observe(self) -> tuple[Any, ...]: ...


def replay(world: World, events: Iterable[Any]) -> Log:
    """THE replay: apply each event to ``world``, observing it after each."""
    log = []
    for event in events:
        world.apply(event)
        log.append(world.observe())
    return log


def _named(obj: Any, run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` named as ``obj`` is (a @triton.jit kernel: as the function it wraps)."""
    inner = obj if isinstance(obj, type) else getattr(obj, "fn", obj)
    run.__name__ = str(getattr(inner, "__name__", None) or type(obj).__name__)
    return run


def _needs_class(obj: Any, example: str) -> Any:
    if not isinstance(obj, type):
        raise TypeError(f"pass the class itself ({example}), got {type(obj).__name__}")
    return obj


def _needs_function(obj: Any, what: str) -> Any:
    if not callable(obj):
        raise TypeError(f"pass your {what}, got {type(obj).__name__}")
    return obj


def adapt_unchanged(fn: Any) -> Callable[..., Any]:
    """A learner's function that must leave its arguments as they were (they are the caller's
    live state, an engine's block tables): a call that changes them raises ValueError."""

    def run(*args: Any) -> Any:
        before = copy.deepcopy(args)
        answer = _needs_function(fn, "function")(*args)
        if args != before:
            raise ValueError(
                "your function changed the lists it was given: build new ones and leave the "
                "caller's as they were (they are the engine's own block tables)"
            )
        return answer

    return _named(fn, run)


# --- block tables: appends and frees on tables sharing one pool --------------------------------
Event = tuple[str, int, int]  # ("append", table, n) or ("free", table, 0)


class Tables:
    """Tables made by ``make(pool)`` (pagedlab's BlockTable or the learner's class) over one
    real pool. Observed: (every table's blocks, tokens, the free list, the ref counts)."""

    def __init__(self, make: Callable[[BlockAllocator], Any], num_blocks: int,
                 block_size: int, free_order: list[int]) -> None:  # fmt: skip
        self.make = make
        self.pool = BlockAllocator(num_blocks, block_size, free_order=list(free_order))
        self.tables: dict[int, Any] = {}

    def apply(self, event: Event) -> None:
        kind, which, n = event
        if which not in self.tables:
            self.tables[which] = self.make(self.pool)
        if kind == "append":
            self.tables[which].append_tokens(n)
        else:
            self.tables[which].free()

    def observe(self) -> tuple[Any, ...]:
        tables = [self.tables[t] for t in sorted(self.tables)]
        return (
            [list(map(int, t.blocks)) for t in tables],
            [int(t.num_tokens) for t in tables],
            self.pool.free_list(),
            self.pool.refcounts(),
        )


def table_log(make: Any, num_blocks: int, size: int, order: list[int], events: list[Event]) -> Log:
    return replay(Tables(make, num_blocks, size, order), events)


def adapt_table(cls: Any) -> Callable[..., Any]:
    def run(*args: Any) -> Log:
        with refused([BlockTable.__init__], _builds_block_table):  # wrapped is not written
            return table_log(_needs_class(cls, "MyBlockTable"), *args)

    return _named(cls, run)


# --- copy-on-write: forks and one-token appends ------------------------------------------------
ForkEvent = tuple[str, int]  # ("append", table) or ("fork", table): fork makes a new table


class Forks:
    """Table 0 holds ``prompt`` tokens; forks and one-token appends by pagedlab's BlockTable
    (``append`` None) or by ``append(allocator, blocks, num_tokens) -> new blocks``.
    Observed: (every table's blocks, the free list, the ref counts)."""

    def __init__(self, append: Callable[..., Any] | None, num_blocks: int, block_size: int,
                 prompt: int) -> None:  # fmt: skip
        self.append, self.pool = append, BlockAllocator(num_blocks, block_size)
        first = BlockTable(self.pool)
        first.append_tokens(prompt)
        self.real = [first]
        self.mine: list[tuple[list[int], int]] = [(list(first.blocks), prompt)]

    def apply(self, event: ForkEvent) -> None:
        kind, which = event
        if self.append is None:
            if kind == "fork":
                self.real.append(self.real[which].fork())
            else:
                self.real[which].append_tokens(1)
            return
        blocks, tokens = self.mine[which]
        if kind == "fork":
            for b in blocks:
                self.pool.share(b)
            self.mine.append((list(blocks), tokens))
            return
        new = self.append(self.pool, list(blocks), tokens)
        if new is None:
            raise TypeError("your function returned None: did you forget `return`?")
        self.mine[which] = ([int(b) for b in new], tokens + 1)

    def observe(self) -> tuple[Any, ...]:
        tables = [list(t.blocks) for t in self.real] if self.append is None else [
            b for b, _ in self.mine]  # fmt: skip
        return (tables, self.pool.free_list(), self.pool.refcounts())


def cow_log(append: Any, num_blocks: int, size: int, prompt: int, events: list[ForkEvent]) -> Log:
    return replay(Forks(append, num_blocks, size, prompt), events)


def adapt_cow(fn: Any) -> Callable[..., Any]:
    def run(num_blocks: int, size: int, prompt: int, events: list[ForkEvent]) -> Log:
        world = Forks(_needs_function(fn, "function"), num_blocks, size, prompt)
        with refused([BlockTable.__init__], _builds_block_table):  # its copy-on-write is not
            return replay(world, events)  # the learner's

    return _named(fn, run)


# --- a prefix cache: prompts admitted in turn ------------------------------------------------
Admit = tuple[list[int], bool]  # (prompt tokens, whether the request finishes right after)


class Admissions:
    """Prompts admitted in turn into a large pool (no eviction), by pagedlab's PrefixCache
    (``make`` None) or the learner's ``make(block_size)``. Observed: (hit blocks, the new
    table's blocks). Too many hits, or a partly filled block registered, fail in words."""

    def __init__(self, make: Callable[[int], Any] | None, block_size: int,
                 admits: list[Admit]) -> None:  # fmt: skip
        self.pool = BlockAllocator(sum(len(t) for t, _ in admits) + 4, block_size)
        self.real = PrefixCache(self.pool) if make is None else None
        self.mine: Any = make(block_size) if make is not None else None
        self.seen: tuple[Any, ...] = ()

    def apply(self, event: Admit) -> None:
        tokens, finishes = event
        if self.real is not None:
            admission = self.real.admit(tokens)
            hits, table = list(admission.hit_blocks), admission.table
        else:
            hits = [int(b) for b in self.mine.lookup(list(tokens))]
            _hits_fit(len(hits), len(tokens), self.pool.block_size)
            table = BlockTable(self.pool)
            table.hold_prefix(hits)
            table.append_tokens(len(tokens) - len(hits) * self.pool.block_size)
            self.mine.register(list(table.blocks), list(tokens))
            tail = table.blocks[-1] if len(tokens) % self.pool.block_size else None
            if tail in getattr(self.mine, "block_of", {}).values():
                raise ValueError(
                    f"register cached block {tail}, the prompt's partly filled last block: "
                    "register only full blocks (a partly filled block's tokens are not all "
                    "there yet)"
                )
        self.seen = (hits, list(table.blocks))
        if finishes:
            table.free()

    def observe(self) -> tuple[Any, ...]:
        return self.seen


def _hits_fit(hits: int, tokens: int, size: int) -> None:
    if hits * size > tokens:
        raise ValueError(
            f"lookup returned {hits} blocks for a {tokens}-token prompt: a hit is a full "
            "block, and a partly filled tail is never cached (register only full blocks)"
        )
    if hits > (tokens - 1) // size:
        raise ValueError(
            f"lookup returned {hits} blocks for a {tokens}-token prompt: its last token is "
            f"always computed, so at most {(tokens - 1) // size} of its blocks can be hits"
        )


def cache_log(make: Any, block_size: int, admits: list[Admit]) -> Log:
    return replay(Admissions(make, block_size, admits), admits)


def adapt_cache(cls: Any) -> Callable[..., Any]:
    def run(*args: Any) -> Log:
        with refused([PrefixCache.__init__], _builds_prefix_cache):
            return cache_log(_needs_class(cls, "MyPrefixCache"), *args)

    return _named(cls, run)


# --- scheduler steps: pagedlab's Scheduler, or a learner's subclass with its own policy -------
PARTS = ("admitted", "decoded", "preempted", "swapped_out", "swapped_in", "finished",
         "waiting", "running", "swapped", "finished queue", "running groups' blocks",
         "free list", "host free list")  # fmt: skip


class Steps:
    """Requests in arrival order, stepped by ``cls(pool, SchedulerConfig(mode))``: pagedlab's
    Scheduler or a learner's subclass (its own ``policy``). Observed after each step: PARTS."""

    def __init__(self, cls: type[Scheduler], num_blocks: int, block_size: int,
                 specs: list[Spec], mode: str) -> None:  # fmt: skip
        self.scheduler = cls(BlockAllocator(num_blocks, block_size), SchedulerConfig(mode))
        for spec in specs:
            self.scheduler.add(Request(*spec))
        self.plan = StepPlan(0)

    def apply(self, event: int) -> None:
        try:
            self.plan = self.scheduler.step()
        except ValueError as error:  # the Scheduler's own check: the learner's words first
            if "behind the scheduler's back" not in str(error):
                raise
            raise ValueError(
                "the policy admitted a group that is not the head of the waiting queue "
                "(admit(self.waiting[0], out): first come, first served), or changed a table "
                f"itself; the scheduler found: {error}"
            ) from None

    def observe(self) -> tuple[Any, ...]:
        s, out = self.scheduler, self.plan
        did = (out.admitted, out.decoded, out.preempted, out.swapped_out, out.swapped_in,
               out.finished)  # fmt: skip
        return (
            *(list(names) for names in did),
            *([g.name for g in queue] for queue in (s.waiting, s.running, s.swapped, s.finished)),
            [[list(t.blocks) for t in g.tables] for g in s.running],
            s.device.free_list(),
            s.host.free_list(),
        )


def replay_steps(cls: type[Scheduler], num_blocks: int, block_size: int, specs: list[Spec],
                 mode: str = "recompute") -> Log:  # fmt: skip
    """Step ``specs`` with ``cls`` until every request finished (a stall: MAX_STEPS)."""
    world = Steps(cls, num_blocks, block_size, specs, mode)
    log: Log = []
    while not world.scheduler.done and len(log) < MAX_STEPS:
        log += replay(world, [len(log)])
    return log


MAX_STEPS = 500


def adapt_scheduler(cls: Any) -> Callable[..., Any]:
    """A learner's Scheduler subclass with a ``policy`` of its own -> its replay."""
    if not issubclass(_needs_class(cls, "MyScheduler"), Scheduler):
        raise TypeError(f"{cls.__name__} must subclass Scheduler (class MyScheduler(Scheduler))")
    if getattr(cls, "policy", Scheduler.policy) is Scheduler.policy:
        raise TypeError(f"{cls.__name__} does not define policy(self, out): write it")

    def run(*args: Any) -> Log:
        with refused([getattr(Scheduler, name) for name in POLICY_ONLY], _calls_policy):
            return replay_steps(cls, *args)

    return _named(cls, run)


#: Scheduler's policy and the routines only it calls (the building blocks never do).
POLICY_ONLY = ("policy", "_admit_whole", "_decode", "_admit_chunks")


# What runs instead of pagedlab's code in a replay (:func:`refused`), with that code's globals.
def _calls_policy(self: Any, *args: Any, **kwargs: Any) -> None:
    raise TypeError(f"{type(self).__name__}.policy calls Scheduler's own policy: write it yourself")


def _builds_block_table(*args: Any, **kwargs: Any) -> None:
    raise TypeError("your code builds pagedlab's BlockTable: the exercise is to write it yourself")


def _builds_prefix_cache(*args: Any, **kwargs: Any) -> None:
    raise TypeError("your code builds pagedlab's PrefixCache: the exercise is to write it yourself")


@contextmanager
def refused(functions: Sequence[Callable[..., Any]], instead: Callable[..., Any]) -> Iterator[None]:
    """Inside: each of ``functions`` runs ``instead``'s code (the code, not the name: a
    subclass, ``super()``, a wrapper or a saved reference reach it too); then its own again."""
    codes = [function.__code__ for function in functions]
    try:
        for function in functions:
            function.__code__ = instead.__code__
        yield
    finally:
        while True:  # in-process, a budget's alarm may fire here too: restore until it holds
            try:  # one C-level call: no handler or trace event runs between two assignments
                list(map(setattr, functions, repeat("__code__"), codes))
                break
            except BaseException:  # the alarm again (it repeats): the restore wins
                continue


#: Driver name -> the pagedlab class a learner's class may subclass (instructor mode).
BASES: dict[str, type] = {"scheduler": Scheduler}

#: Driver name -> adapter; the kernel drivers join it (:mod:`pagedlab.grade.kernel_drivers`).
ADAPTERS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "unchanged": adapt_unchanged,
    "table": adapt_table,
    "cow": adapt_cow,
    "cache": adapt_cache,
    "scheduler": adapt_scheduler,
}
