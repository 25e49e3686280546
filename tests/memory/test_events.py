"""Listeners subscribe to the event kinds they need; one append path serves every listener."""

from __future__ import annotations

import pytest

from pagedlab import BlockAllocator, BlockTable, PrefixCache
from pagedlab.memory.events import EVENT_KINDS, Event


def test_a_listener_hears_only_the_kinds_it_subscribed_to() -> None:
    alloc = BlockAllocator(4, 2)
    heard: list[Event] = []
    unsubscribe = alloc.subscribe(heard.append, ("allocate", "free"))
    assert "allocate" in alloc.listening and "write" not in alloc.listening
    table = BlockTable(alloc)
    table.append_tokens(3)  # two allocates, three writes (unheard)
    table.free()
    assert [(e.kind, e.block) for e in heard] == [
        ("allocate", 0), ("allocate", 1), ("free", 1), ("free", 0),
    ]  # fmt: skip
    unsubscribe()
    unsubscribe()  # twice is harmless
    assert not any(kind in alloc.listening for kind in EVENT_KINDS)


def test_a_prefix_cache_listens_to_allocations_only() -> None:
    alloc = BlockAllocator(8, 4)
    cache = PrefixCache(alloc)
    assert [kind for kind in EVENT_KINDS if kind in alloc.listening] == ["allocate"]
    table = cache.admit(list(range(9))).table
    with alloc.record() as events:  # a recorder hears every kind, the cache still only its own
        table.append_tokens(1)
    assert [e.kind for e in events] == ["write"]
    cache.close()
    assert "allocate" not in alloc.listening


def test_the_same_listener_twice_is_two_subscriptions() -> None:
    alloc = BlockAllocator(2, 1)
    heard: list[str] = []

    def listener(event: Event) -> None:
        heard.append(event.kind)

    first = alloc.subscribe(listener, ("allocate",))
    alloc.subscribe(listener, ("allocate",))
    first()
    alloc.allocate()
    assert heard == ["allocate"]


def test_an_unknown_kind_is_refused_and_subscribes_nothing() -> None:
    alloc = BlockAllocator(2, 1)
    with pytest.raises(ValueError, match="event kind must be one of .* got 'evict'"):
        alloc.subscribe(print, ("allocate", "evict"))  # type: ignore[arg-type]
    assert "allocate" not in alloc.listening
