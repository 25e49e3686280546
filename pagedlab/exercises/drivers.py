"""Drivers: the code that runs a learner's object on one case's arguments, and nothing else.

A driver (``ADAPTERS[name](learner_object)``) turns a learner's class, step function or
``@triton.jit`` kernel into a function of a case's arguments. The replays are ONE loop,
:func:`replay`, over a :class:`World` (``apply(event)``, ``observe()``) that holds either
pagedlab's real objects or the learner's: block tables (:class:`Tables`), forks
(:class:`Forks`), a prefix cache (:class:`Admissions`), scheduler steps (:class:`Steps`, over
a :class:`StepState`). The kernels are launched by :mod:`pagedlab.exercises.kernel_drivers`.
The same replays, given pagedlab's own classes, produce the expected logs in the grader.

Invariant: this module holds no expected value, no case and no reference solution, and
imports nothing of :mod:`pagedlab.exercises` but itself, so ``python -m pagedlab.grade`` can
load it (alone) in the interpreter that runs a learner's submission. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import prefill_need, samples_need
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, Request
from pagedlab.memory.scheduler import Scheduler
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

Spec = tuple[str, int, int, int]  # (name, prompt_len, output_len, num_samples)
Log = list[tuple[Any, ...]]


class World(Protocol):
    """What a replay runs: pagedlab's real objects, or the learner's, behind one interface."""

    def apply(self, event: Any) -> None: ...

    def observe(self) -> tuple[Any, ...]: ...


def replay(world: World, events: Iterable[Any]) -> Log:
    """THE replay: apply each event to ``world`` and observe it after each, as plain values.
    The grader runs it on pagedlab's real objects (the expected log), the learner's child on
    the learner's (the answer); :class:`~pagedlab.exercises.core.Replay` names the first step
    whose entries differ."""
    log = []
    for event in events:
        world.apply(event)
        log.append(world.observe())
    return log


def _named(obj: Any, run: Callable[..., Any]) -> Callable[..., Any]:
    run.__name__ = str(getattr(obj, "__name__", type(obj).__name__))
    return run


def _needs_class(obj: Any, example: str) -> Any:
    if not isinstance(obj, type):
        raise TypeError(f"pass the class itself ({example}), got {type(obj).__name__}")
    return obj


def _needs_function(obj: Any, what: str) -> Any:
    if not callable(obj):
        raise TypeError(f"pass your {what}, got {type(obj).__name__}")
    return obj


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
    return _named(cls, lambda *args: table_log(_needs_class(cls, "MyBlockTable"), *args))


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
    return _named(fn, lambda *args: cow_log(_needs_function(fn, "function"), *args))


# --- a prefix cache: prompts admitted in turn ------------------------------------------------
Admit = tuple[list[int], bool]  # (prompt tokens, whether the request finishes right after)


class Admissions:
    """Prompts admitted one after another into a large pool (no eviction), by pagedlab's
    PrefixCache (``make`` None) or the learner's ``make(block_size)`` with ``lookup`` and
    ``register``. Observed: (hit blocks, the new table's blocks)."""

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
            table = BlockTable(self.pool)
            table.hold_prefix(hits)
            table.append_tokens(len(tokens) - len(hits) * self.pool.block_size)
            self.mine.register(list(table.blocks), list(tokens))
        self.seen = (hits, list(table.blocks))
        if finishes:
            table.free()

    def observe(self) -> tuple[Any, ...]:
        return self.seen


def cache_log(make: Any, block_size: int, admits: list[Admit]) -> Log:
    return replay(Admissions(make, block_size, admits), admits)


def adapt_cache(cls: Any) -> Callable[..., Any]:
    return _named(cls, lambda *args: cache_log(_needs_class(cls, "MyPrefixCache"), *args))


class StepState:
    """The scheduler's state, for one step written by hand (whole prefills).

    Queues (plain lists of :class:`~pagedlab.memory.requests.Group`, yours to change):
    ``waiting`` (FCFS, front first), ``running`` and ``swapped`` (arrival order, oldest
    first), ``finished``.
    A group has ``name``, ``generated`` (tokens each sample generated) and ``request``
    (``prompt_len``, ``output_len``, ``num_samples``). The mechanics, on real block tables:

    - ``prefill_fits(group)`` / ``prefill(group)``: whether its whole (re)prefill (prompt,
      plus every sample's generated tokens after a preemption) fits the free blocks now;
      do it (the group gets its tables; put it in ``running`` yourself).
    - ``decode_fits(group)`` / ``decode(group)``: whether one more token for every sample
      fits now (copy-on-write included); append it (``generated`` grows by one).
    - ``drop(group)``: preempt by recompute: free all its blocks (queue it yourself).
    - ``swap_out_fits(group)`` / ``swap_out(group)``: preempt by swapping its blocks to the
      host pool (:func:`~pagedlab.memory.swap_space.swap_out`); ``swap_in_fits(group)`` /
      ``swap_in(group)``: bring them back, with room for the next token.
    - ``release(group)``: free a finished group's blocks (move it to ``finished`` yourself).

    Each mechanic is recorded (admitted, decoded, preempted, finished), which the grader
    compares with pagedlab's Scheduler.
    """

    def __init__(
        self, num_blocks: int, block_size: int, specs: list[Spec], mode: str = "recompute"
    ) -> None:
        self.mode = mode  # "recompute" or "swap"
        self.pool = BlockAllocator(num_blocks, block_size)
        self.host = BlockAllocator(num_blocks, block_size)  # the swap space (Scheduler's default)
        self.waiting: list[Group] = [
            Group(Request(*spec), order=i, work=spec[1]) for i, spec in enumerate(specs)
        ]
        self.running: list[Group] = []
        self.swapped: list[Group] = []
        self.finished: list[Group] = []
        self.did: dict[str, list[str]] = nothing_done()

    @property
    def num_free(self) -> int:
        return self.pool.num_free

    def prefill_fits(self, group: Group) -> bool:
        r = group.request
        return prefill_need(r.prompt_len, group.generated, r.num_samples, self.pool.block_size) <= (
            self.pool.num_free
        )

    def prefill(self, group: Group) -> None:
        """The prompt into one table, a fork per other sample, then each sample's tokens."""
        if group.tables:
            raise ValueError(f"{group.name} already holds blocks: drop or release it first")
        if not self.prefill_fits(group):
            raise ValueError(f"{group.name}'s prefill does not fit {self.pool.num_free} blocks")
        first = BlockTable(self.pool)
        first.append_tokens(group.request.prompt_len)
        group.tables = [first] + [first.fork() for _ in range(group.request.num_samples - 1)]
        if group.generated:
            for table in group.tables:
                table.append_tokens(group.generated)
        group.status, group.prefilled = "running", group.work
        self.did["admitted"].append(group.name)

    def decode_fits(self, group: Group) -> bool:
        lasts = [(t.num_tokens, t.blocks[-1]) for t in group.tables]
        if not lasts:
            raise ValueError(f"{group.name} holds no blocks: it is not running")
        need = samples_need(lasts, 1, self.pool.block_size, self.pool.refcount)
        return need <= self.pool.num_free

    def decode(self, group: Group) -> None:
        if not group.tables:
            raise ValueError(f"{group.name} holds no blocks: it is not running")
        if group.generated == group.request.output_len:
            raise ValueError(f"{group.name} already generated all {group.generated} tokens")
        for table in group.tables:
            table.append_tokens(1)
        group.generated += 1
        self.did["decoded"].append(group.name)

    def drop(self, group: Group) -> None:
        for table in group.tables:
            table.free()
        r = group.request
        group.tables, group.status, group.prefilled = [], "waiting", 0
        group.work = r.prompt_len + r.num_samples * group.generated
        self.did["preempted"].append(group.name)

    def swap_out_fits(self, group: Group) -> bool:
        return len(group.device_blocks()) <= self.host.num_free

    def swap_out(self, group: Group) -> None:
        """Preempt by swapping: copy its blocks to the host pool, free them on the device."""
        if not group.tables or not self.swap_out_fits(group):
            raise ValueError(f"{group.name} holds no blocks or does not fit the host pool")
        swap_out(group, self.host)
        group.status = "swapped"
        self.did["preempted"].append(group.name)
        self.did["swapped_out"].append(group.name)

    def swap_in_fits(self, group: Group) -> bool:
        return bool(group.host) and swap_in_need(group, self.host) <= self.pool.num_free

    def swap_in(self, group: Group) -> None:
        if not self.swap_in_fits(group):
            raise ValueError(f"{group.name} is not swapped out or does not fit the free blocks")
        swap_in(group, self.pool, self.host)
        group.status = "running"
        self.did["swapped_in"].append(group.name)

    def release(self, group: Group) -> None:
        for table in group.tables:
            table.free()
        group.tables, group.status = [], "finished"
        self.did["finished"].append(group.name)


def nothing_done() -> dict[str, list[str]]:
    return {name: [] for name in PARTS[:6]}


PARTS = ("admitted", "decoded", "preempted", "swapped_out", "swapped_in", "finished",
         "waiting", "running", "swapped", "finished queue", "running groups' blocks",
         "free list", "host free list")  # fmt: skip


class Steps:
    """Requests stepped by pagedlab's Scheduler (``step`` None) or by the learner's
    ``step(state)`` on a :class:`StepState`. Observed after each step: :data:`PARTS`."""

    def __init__(self, step: Callable[[StepState], Any] | None, num_blocks: int,
                 block_size: int, specs: list[Spec], mode: str) -> None:  # fmt: skip
        self.step = step
        if step is None:
            self.scheduler = Scheduler(BlockAllocator(num_blocks, block_size), mode=mode)
            for spec in specs:
                self.scheduler.add(Request(*spec))
        else:
            self.state = StepState(num_blocks, block_size, specs, mode)

    def apply(self, event: int) -> None:
        if self.step is not None:
            self.state.did = nothing_done()
            self.step(self.state)
            return
        out = self.scheduler.step()
        self.did = {"admitted": out.admitted, "decoded": out.decoded,
                    "preempted": out.preempted, "swapped_out": list(out.swapped_out),
                    "swapped_in": list(out.swapped_in), "finished": out.finished}  # fmt: skip

    def observe(self) -> tuple[Any, ...]:
        s: Any = self.state if self.step is not None else self.scheduler
        did = s.did if self.step is not None else self.did
        pool, host = (s.pool, s.host) if self.step is not None else (s.device, s.host)
        queues = (s.waiting, s.running, s.swapped, s.finished)
        return (
            *(list(did[name]) for name in PARTS[:6]),
            *([g.name for g in queue] for queue in queues),
            [[list(t.blocks) for t in g.tables] for g in s.running],
            pool.free_list(),
            host.free_list(),
        )


def replay_steps(step: Callable[[StepState], Any] | None, num_blocks: int, block_size: int,
                 specs: list[Spec], mode: str = "recompute") -> Log:  # fmt: skip
    """Step ``specs`` to the end; ``step`` None: pagedlab's Scheduler does the steps, else
    ``step(state)`` does as many (the Scheduler's count)."""
    if step is None:
        world = Steps(None, num_blocks, block_size, specs, mode)
        log: Log = []
        while not world.scheduler.done and len(log) < 1000:
            log += replay(world, [len(log)])
        return log
    count = len(replay_steps(None, num_blocks, block_size, specs, mode))
    return replay(Steps(step, num_blocks, block_size, specs, mode), range(count))


def adapt_step(fn: Any) -> Callable[..., Any]:
    return _named(fn, lambda *args: replay_steps(_needs_function(fn, "step function"), *args))


#: Driver name -> adapter (learner object -> a function of a case's arguments); the kernel
#: drivers join it when :mod:`pagedlab.exercises.kernel_drivers` is imported.
ADAPTERS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "table": adapt_table,
    "cow": adapt_cow,
    "cache": adapt_cache,
    "steps": adapt_step,
}
