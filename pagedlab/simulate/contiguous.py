"""Contiguous address spaces for the Orca baselines: a buddy allocator and first-fit.

§6.1: "We assume Orca uses the buddy allocation algorithm". ``BuddyAllocator`` hands out
power-of-two extents (``buddy_extent(n)``) aligned to their size, splitting the smallest
large-enough free block (lowest address first); a freed extent merges with its *buddy* (at
``start XOR size``) while that is free and whole. A pool not a power of two (the paper's 15,728
slots) starts as its binary decomposition, largest first, so no merge crosses between them.
``FirstFit`` places exactly ``n`` slots at the lowest hole large enough (no rounding).
Invariants (both): live extents never overlap and lie inside ``[0, size)``; ``used + free ==
size``; a failed ``alloc`` returns None and changes nothing.
"""

from __future__ import annotations

from bisect import bisect_left

from pagedlab.ground.checks import check_int


def buddy_extent(slots: int) -> int:
    """The power-of-two extent a buddy allocator hands out for ``slots`` slots (132 -> 256)."""
    n = check_int(slots, "slots", minimum=1)
    return 1 << (n - 1).bit_length()


class BuddyAllocator:
    """A buddy allocator over ``size`` slots (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = check_int(size, "size", minimum=1)
        self._free: dict[int, set[int]] = {}  # extent size -> starts of free blocks
        self._live: dict[int, int] = {}  # start -> extent size of each live extent
        start = 0
        for bit in reversed(range(self.size.bit_length())):
            if self.size >> bit & 1:
                self._free.setdefault(1 << bit, set()).add(start)
                start += 1 << bit
        self._roots = {z: next(iter(s)) for z, s in self._free.items()}  # for invariants

    @staticmethod
    def extent(slots: int) -> int:
        return buddy_extent(slots)

    @property
    def used(self) -> int:
        return sum(self._live.values())

    @property
    def largest_free(self) -> int:
        """The largest extent ``alloc`` could serve now (0 if nothing is free)."""
        return max((z for z, s in self._free.items() if s), default=0)

    def alloc(self, slots: int) -> int | None:
        """Start of a ``buddy_extent(slots)`` extent, or None (no change) if none is free."""
        want = self.extent(slots)
        sizes = [z for z, s in self._free.items() if s and z >= want]
        if not sizes:
            return None
        size = min(sizes)
        start = min(self._free[size])
        self._free[size].remove(start)
        while size > want:  # split, keeping the lower half
            size //= 2
            self._free.setdefault(size, set()).add(start + size)
        self._live[start] = want
        return start

    def free(self, start: int) -> None:
        """Free the extent at ``start`` and merge it with its free buddies."""
        start = check_int(start, "start", minimum=0)
        if start not in self._live:
            raise ValueError(f"no live extent starts at {start}")
        size = self._live.pop(start)
        while (buddy := start ^ size) in self._free.get(size, ()):
            self._free[size].remove(buddy)
            start, size = min(start, buddy), 2 * size
        self._free.setdefault(size, set()).add(start)

    def live_extents(self) -> list[tuple[int, int]]:
        """``(start, size)`` of every live extent, in address order."""
        return sorted(self._live.items())

    def free_blocks(self) -> list[tuple[int, int]]:
        """``(start, size)`` of every free block, in address order."""
        return sorted((s, z) for z, starts in self._free.items() for s in starts)

    def initial_blocks(self) -> list[tuple[int, int]]:
        """The blocks the pool starts as (its binary decomposition), in address order."""
        return sorted((s, z) for z, s in self._roots.items())


class FirstFit:
    """A contiguous address space of ``size`` slots with first-fit placement, no rounding."""

    def __init__(self, size: int) -> None:
        self.size = check_int(size, "size", minimum=1)
        self._starts: list[int] = []
        self._sizes: list[int] = []

    @staticmethod
    def extent(slots: int) -> int:
        return check_int(slots, "slots", minimum=1)

    @property
    def used(self) -> int:
        return sum(self._sizes)

    def _gaps(self) -> list[tuple[int, int]]:
        """``(end, next start)`` around each place a hole may be: before extent i, then the tail."""
        ends = [0] + [s + z for s, z in zip(self._starts, self._sizes, strict=True)]
        return list(zip(ends, [*self._starts, self.size], strict=True))

    def alloc(self, slots: int) -> int | None:
        """Place ``slots`` slots at the lowest fitting address; None (no change) if no hole fits."""
        n = check_int(slots, "slots", minimum=1)
        for i, (end, start) in enumerate(self._gaps()):
            if start - end >= n:
                self._starts.insert(i, end)
                self._sizes.insert(i, n)
                return end
        return None

    def free(self, start: int) -> None:
        start = check_int(start, "start", minimum=0)
        i = bisect_left(self._starts, start)
        if i == len(self._starts) or self._starts[i] != start:
            raise ValueError(f"no extent starts at {start}")
        del self._starts[i], self._sizes[i]

    def holes(self) -> list[int]:
        """Sizes of the free holes, in address order."""
        return [start - end for end, start in self._gaps() if start > end]


ALLOCATORS: dict[str, type[BuddyAllocator] | type[FirstFit]] = {
    "buddy": BuddyAllocator,
    "first_fit": FirstFit,
}
