"""Who holds a block: the :class:`Owner` a block table shows its allocator, and the checks of
the values an allocator is given (each returns the checked value or raises TypeError /
ValueError naming it; none changes anything).
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedlab.ground.checks import ArgumentTypeError, check_int

MAX_NUM_BLOCKS = 2**20  # the largest pool: 1,048,576 blocks
MAX_SLOTS = 2**31 - 1  # num_blocks * block_size bound: flat slot ids are int32


class Owner:
    """A holder of block references: a ``BlockTable`` makes one with ``new_owner()``.

    ``id`` names it in events and messages. ``lost`` lists the blocks whose reference it held
    and an anonymous ``free`` dropped (see ``BlockAllocator._release``).
    """

    __slots__ = ("id", "lost")

    def __init__(self, owner_id: int) -> None:
        self.id = owner_id
        self.lost: list[int] = []

    def __repr__(self) -> str:
        return f"Owner({self.id})"


def check_pool(num_blocks: object, block_size: object) -> tuple[int, int]:
    """``(num_blocks, block_size)`` if both are >= 1 and every flat slot id fits int32."""
    num_blocks = check_int(num_blocks, "num_blocks", minimum=1, maximum=MAX_NUM_BLOCKS)
    block_size = check_int(block_size, "block_size", minimum=1)
    if num_blocks * block_size > MAX_SLOTS:
        raise ValueError(
            f"num_blocks * block_size = {num_blocks} * {block_size} slots exceeds "
            f"2**31 - 1 (flat slot ids are int32)"
        )
    return num_blocks, block_size


def check_owner(owner: object) -> Owner | None:
    """``owner`` if it is an :class:`Owner` or None (an anonymous holder)."""
    if owner is None or isinstance(owner, Owner):
        return owner
    raise ArgumentTypeError(
        f"owner must be an Owner from BlockAllocator.new_owner() or None, got {owner!r}"
    )


def check_named_owner(owner: object) -> Owner:
    """``owner`` if it is an :class:`Owner` (None is refused)."""
    if not isinstance(owner, Owner):
        raise ArgumentTypeError(
            f"owner must be an Owner from BlockAllocator.new_owner(), got {owner!r}"
        )
    return owner


def check_block(block: object, num_blocks: int, name: str = "block") -> int:
    """``block`` as an int in ``[0, num_blocks)``."""
    if type(block) is int and 0 <= block < num_blocks:  # the common case, decided at once
        return block
    number = check_int(block, name)
    if not 0 <= number < num_blocks:
        raise ValueError(f"{name} {number} is out of range [0, {num_blocks})")
    return number


def check_blocks(blocks: object, num_blocks: int, name: str = "blocks") -> list[int]:
    """``blocks`` as a list of distinct block ids in ``[0, num_blocks)``."""
    checked = [check_block(b, num_blocks) for b in items_of(blocks, name, "block ids")]
    if len(set(checked)) != len(checked):
        raise ValueError(f"{name} {checked} repeat a block")
    return checked


def items_of(values: object, name: str, what: str) -> list[object]:
    """``values`` as a list; TypeError naming ``name`` for a string, a 0-d array or tensor,
    or anything else that is not a sequence."""
    if isinstance(values, (str, bytes, dict)):
        raise ArgumentTypeError(f"{name} must be a sequence of {what}, got {values!r}")
    try:
        return list(values)  # type: ignore[call-overload]
    except TypeError:  # not iterable, or a 0-d array or tensor
        raise ArgumentTypeError(f"{name} must be a sequence of {what}, got {values!r}") from None


def permutation(free_order: object, num_blocks: int) -> list[int]:
    """``free_order`` as a list of ints if it is a permutation of ``range(num_blocks)``."""
    order = items_of(free_order, "free_order", "block ids")
    wanted = f"free_order must be a permutation of range({num_blocks})"
    if len(order) != num_blocks:
        raise ValueError(f"{wanted}, got {len(order)} entries: {short(order)}")
    try:
        ints = [check_int(b, "free_order entry") for b in order]
    except ValueError:  # ArgumentTypeError is a ValueError too
        raise ValueError(f"{wanted}, got {short(order)}") from None
    if sorted(ints) != list(range(num_blocks)):
        raise ValueError(f"{wanted}, got {short(ints)}")
    return ints


def short(values: Sequence[object], limit: int = 12) -> str:
    """``values`` for a message, elided after ``limit`` entries."""
    if len(values) <= limit:
        return repr(values)
    return "[" + ", ".join(map(repr, values[:limit])) + f", ... ({len(values)} entries)]"
