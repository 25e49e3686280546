"""Drivers: the code that runs a learner's object on one case's arguments, and nothing else.

A driver (``ADAPTERS[name](learner_object)``) turns a learner's class, step function or
``@triton.jit`` kernel into a function of a case's arguments: it replays the case's events on
the learner's tables (``replay``), forks (``replay_cow``), prefix cache (``replay_cache``) or
scheduler step (``replay_steps`` over a :class:`StepState`), or launches the kernel
(:mod:`pagedlab.exercises.kernel_drivers`). The same replays, given pagedlab's own classes,
produce the expected logs in the grader.

Invariant: this module holds no expected value, no case and no reference solution, and
imports nothing of :mod:`pagedlab.exercises` but itself, so ``python -m pagedlab.grade`` can
load it (alone) in the interpreter that runs a learner's submission. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.capacity import prefill_need, samples_need
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.requests import Group, Request
from pagedlab.memory.scheduler import Scheduler
from pagedlab.memory.swap_space import swap_in, swap_in_need, swap_out

Spec = tuple[str, int, int, int]  # (name, prompt_len, output_len, num_samples)


Event = tuple[str, int, int]  # ("append", table, n) or ("free", table, 0)


def replay(make: Callable[[BlockAllocator], Any], num_blocks: int, block_size: int,
           free_order: list[int], events: list[Event]) -> list[tuple[Any, ...]]:  # fmt: skip
    """After each event: (every table's blocks, every table's tokens, free list, ref counts),
    as plain lists (a freed table holds [] and 0)."""
    pool = BlockAllocator(num_blocks, block_size, free_order=list(free_order))
    tables: dict[int, Any] = {}
    log = []
    for kind, which, n in events:
        if which not in tables:
            tables[which] = make(pool)
        if kind == "append":
            tables[which].append_tokens(n)
        else:
            tables[which].free()
        names = sorted(tables)
        log.append(
            (
                [list(map(int, tables[t].blocks)) for t in names],
                [int(tables[t].num_tokens) for t in names],
                pool.free_list(),
                pool.refcounts(),
            )
        )
    return log


def adapt_table(cls: Any) -> Callable[..., Any]:
    def run(num_blocks: int, size: int, order: list[int], events: list[Event]) -> Any:
        if not isinstance(cls, type):
            raise TypeError(f"pass the class itself (MyBlockTable), got {type(cls).__name__}")
        return replay(cls, num_blocks, size, order, events)

    run.__name__ = str(getattr(cls, "__name__", type(cls).__name__))
    return run


ForkEvent = tuple[str, int]  # ("append", table) or ("fork", table): fork makes a new table


def replay_cow(append: Callable[..., Any] | None, num_blocks: int, block_size: int,
               prompt: int, events: list[ForkEvent]) -> list[tuple[Any, ...]]:  # fmt: skip
    """Table 0 holds ``prompt`` tokens; then forks and one-token appends. ``append`` None:
    pagedlab's BlockTable does them; else ``append(allocator, blocks, num_tokens)`` returns
    the new block list. After each event: (every table's blocks, free list, ref counts)."""
    pool = BlockAllocator(num_blocks, block_size)
    first = BlockTable(pool)
    first.append_tokens(prompt)
    real: list[BlockTable] = [first]
    mine: list[tuple[list[int], int]] = [(list(first.blocks), prompt)]
    log = []
    for kind, which in events:
        if kind == "fork":
            if append is None:
                real.append(real[which].fork())
            else:
                blocks, tokens = mine[which]
                for b in blocks:
                    pool.share(b)
                mine.append((list(blocks), tokens))
        elif append is None:
            real[which].append_tokens(1)
        else:
            blocks, tokens = mine[which]
            new = append(pool, list(blocks), tokens)
            if new is None:
                raise TypeError("your function returned None: did you forget `return`?")
            mine[which] = ([int(b) for b in new], tokens + 1)
        tables = [list(t.blocks) for t in real] if append is None else [b for b, _ in mine]
        log.append((tables, pool.free_list(), pool.refcounts()))
    return log


def adapt_cow(fn: Any) -> Callable[..., Any]:
    def run(num_blocks: int, size: int, prompt: int, events: list[ForkEvent]) -> Any:
        if not callable(fn):
            raise TypeError(f"pass your function, got {type(fn).__name__}")
        return replay_cow(fn, num_blocks, size, prompt, events)

    run.__name__ = str(getattr(fn, "__name__", type(fn).__name__))
    return run


Admit = tuple[list[int], bool]  # (prompt tokens, whether the request finishes right after)


def replay_cache(make: Callable[[int], Any] | None, block_size: int,
                 admits: list[Admit]) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """Admit prompts one after another into a large pool (no eviction); ``make`` None: the
    real PrefixCache does it. After each: (hit blocks, the new table's blocks)."""
    pool = BlockAllocator(sum(len(t) for t, _ in admits) + 4, block_size)
    real = PrefixCache(pool) if make is None else None
    mine: Any = make(block_size) if make is not None else None
    log = []
    for tokens, finishes in admits:
        if real is not None:
            admission = real.admit(tokens)
            hits, table = list(admission.hit_blocks), admission.table
        else:
            hits = [int(b) for b in mine.lookup(list(tokens))]
            table = BlockTable(pool)
            table.hold_prefix(hits)
            table.append_tokens(len(tokens) - len(hits) * block_size)
            mine.register(list(table.blocks), list(tokens))
        log.append((hits, list(table.blocks)))
        if finishes:
            table.free()
    return log


def adapt_cache(cls: Any) -> Callable[..., Any]:
    def run(size: int, admits: list[Admit]) -> Any:
        if not isinstance(cls, type):
            raise TypeError(f"pass the class itself (MyPrefixCache), got {type(cls).__name__}")
        return replay_cache(cls, size, admits)

    run.__name__ = str(getattr(cls, "__name__", type(cls).__name__))
    return run


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
    return {name: [] for name in ("admitted", "decoded", "preempted", "swapped_out",
                                  "swapped_in", "finished")}  # fmt: skip


Log = list[tuple[Any, ...]]


def snapshot(did: dict[str, list[str]], queues: tuple[list[Group], ...],
              pool: BlockAllocator, host: BlockAllocator) -> tuple[Any, ...]:  # fmt: skip
    waiting, running, swapped, finished = queues
    return (
        *(list(did[name]) for name in PARTS[:6]),
        *([g.name for g in queue] for queue in queues),
        [[list(t.blocks) for t in g.tables] for g in running],
        pool.free_list(),
        host.free_list(),
    )


PARTS = ("admitted", "decoded", "preempted", "swapped_out", "swapped_in", "finished",
         "waiting", "running", "swapped", "finished queue", "running groups' blocks",
         "free list", "host free list")  # fmt: skip


def replay_steps(step: Callable[[StepState], Any] | None, num_blocks: int, block_size: int,
                 specs: list[Spec], mode: str = "recompute") -> Log:  # fmt: skip
    """Step ``specs`` to the end; ``step`` None: pagedlab's Scheduler does the steps, else
    ``step(state)`` does as many. After each step: :data:`PARTS`, as plain lists."""
    if step is None:
        scheduler = Scheduler(BlockAllocator(num_blocks, block_size), mode=mode)
        for spec in specs:
            scheduler.add(Request(*spec))
        log: Log = []
        while not scheduler.done and len(log) < 1000:
            out = scheduler.step()
            did = {
                "admitted": out.admitted,
                "decoded": out.decoded,
                "preempted": out.preempted,
                "swapped_out": list(out.swapped_out),
                "swapped_in": list(out.swapped_in),
                "finished": out.finished,
            }
            s = scheduler
            queues = (s.waiting, s.running, s.swapped, s.finished)
            log.append(snapshot(did, queues, s.device, s.host))
        return log
    state = StepState(num_blocks, block_size, specs, mode)
    log = []
    for _ in range(len(replay_steps(None, num_blocks, block_size, specs, mode))):
        state.did = nothing_done()
        step(state)
        queues = (state.waiting, state.running, state.swapped, state.finished)
        log.append(snapshot(state.did, queues, state.pool, state.host))
    return log


def adapt_step(fn: Any) -> Callable[..., Any]:
    def run(num_blocks: int, size: int, specs: list[Spec], mode: str) -> Any:
        if not callable(fn):
            raise TypeError(f"pass your step function, got {type(fn).__name__}")
        return replay_steps(fn, num_blocks, size, specs, mode)

    run.__name__ = str(getattr(fn, "__name__", type(fn).__name__))
    return run


#: Driver name -> adapter (learner object -> a function of a case's arguments); the kernel
#: drivers join it when :mod:`pagedlab.exercises.kernel_drivers` is imported.
ADAPTERS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "table": adapt_table,
    "cow": adapt_cow,
    "cache": adapt_cache,
    "steps": adapt_step,
}


def driver_name(adapter: Callable[[Any], Callable[..., Any]] | None) -> str:
    """The name under which ``adapter`` is in :data:`ADAPTERS` ("" for None: a plain call)."""
    if adapter is None:
        return ""
    for name, known in ADAPTERS.items():
        if known is adapter:
            return name
    raise ValueError(f"adapter {adapter!r} is not in drivers.ADAPTERS")
