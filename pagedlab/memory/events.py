"""What happened inside a block allocator, one event at a time.

Pictures and animations replay allocation step by step from these events instead of
re-implementing the allocator. An allocator only builds an event when somebody listens,
so recording costs nothing when nobody does.

Event kinds, in the order a learner meets them:

- ``allocate``: ``block`` left the free list; its ref count is now 1.
- ``write``: ``table`` wrote logical ``position`` into (``block``, ``offset``).
- ``share``: another table now holds ``block`` too (``refcount`` after the change).
- ``copy``: copy-on-write; ``table`` copied the contents of ``src`` into ``block``.
- ``release``: a table dropped ``block`` but others still hold it (``refcount`` left).
- ``free``: the last holder dropped ``block``; it is back on the free list.
- ``reuse``: a free block was taken back with its contents (prefix caching).

A listener is called as soon as the change its event describes is made, in the middle of the
operation (pictures snapshot every step this way). So a listener must only read: one that
raises, or changes the allocator, can leave the calling operation half done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

EventKind = Literal["allocate", "write", "share", "copy", "release", "free", "reuse"]


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
    """A list of listeners. Subclasses build an event only while ``_listeners`` is non-empty."""

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every future event; returns a function that unsubscribes.

        Unsubscribing twice is harmless. TypeError if ``listener`` is not callable.
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        self._listeners.append(listener)
        self._listeners_changed()
        entry = [listener]  # emptied on the first unsubscribe

        def unsubscribe() -> None:
            if entry:
                # remove this subscription (by identity: the same callable may be subscribed twice)
                for i, held in enumerate(self._listeners):
                    if held is entry[0]:
                        del self._listeners[i]
                        break
                entry.clear()
                self._listeners_changed()

        return unsubscribe

    def _listeners_changed(self) -> None:
        """Hook for subclasses: a listener came or went."""

    def _emit(self, event: Event) -> None:
        for listener in list(self._listeners):
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
