"""What happened inside a block allocator, one event at a time (pictures replay these instead of
re-implementing the allocator). Kinds, in the order a learner meets them:

- ``allocate``: ``block`` left the free list; its ref count is now 1.
- ``write``: ``table`` wrote logical ``position`` into (``block``, ``offset``).
- ``share``: another table now holds ``block`` too (``refcount`` after the change).
- ``copy``: copy-on-write; ``table`` copied the contents of ``src`` into ``block``.
- ``release``: a table dropped ``block`` but others still hold it (``refcount`` left).
- ``free``: the last holder dropped ``block``; it is back on the free list.
- ``reuse``: a free block was taken back with its contents (prefix caching).

An event is built only when somebody listens to its kind. A listener is called as soon as the
change is made, in the middle of the operation: it must only read (one that raises or changes
the allocator can leave the operation half done).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

from pagedlab.ground.checks import check_choice

EventKind = Literal["allocate", "write", "share", "copy", "release", "free", "reuse"]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)


@dataclass(frozen=True, slots=True)
class Event:
    """One step of allocation history; fields that do not apply to a kind are ``None``."""

    kind: EventKind
    block: int
    refcount: int
    table: int | None = None
    position: int | None = None
    offset: int | None = None
    src: int | None = None

    def __str__(self) -> str:
        if self.kind == "write":
            return (
                f"table {self.table}: position {self.position} -> block {self.block}[{self.offset}]"
            )
        if self.kind == "copy":
            return f"table {self.table}: copy block {self.src} -> block {self.block}"
        who = "" if self.table is None else f"table {self.table}: "
        return f"{who}{self.kind} block {self.block} (ref count {self.refcount})"


Listener = Callable[[Event], None]


class EventSource:
    """The listeners of each event kind."""

    __slots__ = ("_listeners", "listening")

    def __init__(self) -> None:
        self._listeners: dict[str, list[Listener]] = {kind: [] for kind in EVENT_KINDS}
        # the kinds somebody listens to, kept by subscribe / unsubscribe: a source tests
        # ``kind in source.listening`` before it builds an event (no event nobody reads)
        self.listening: frozenset[str] = frozenset()

    def subscribe(
        self, listener: Listener, kinds: Iterable[EventKind] = EVENT_KINDS
    ) -> Callable[[], None]:
        """Call ``listener`` with every future event of ``kinds``; returns an unsubscribe
        (harmless twice). TypeError if ``listener`` is not callable; an unknown kind: ValueError."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        wanted = list(kinds)
        for kind in wanted:
            check_choice(kind, "event kind", EVENT_KINDS)
        for kind in wanted:
            self._listeners[kind].append(listener)
        self._update_listening()

        def unsubscribe() -> None:
            while wanted:  # emptied on the first call
                held = self._listeners[wanted.pop()]
                # by identity: the same callable may be subscribed twice
                del held[next(i for i, other in enumerate(held) if other is listener)]
            self._update_listening()

        return unsubscribe

    def _update_listening(self) -> None:
        self.listening = frozenset(kind for kind, held in self._listeners.items() if held)

    def _emit(self, event: Event) -> None:
        for listener in list(self._listeners[event.kind]):
            listener(event)

    @contextmanager
    def record(self) -> Iterator[list[Event]]:
        """``with allocator.record() as events:`` collects every event of the block."""
        events: list[Event] = []
        unsubscribe = self.subscribe(events.append)
        try:
            yield events
        finally:
            unsubscribe()
