"""One request's reservation and its paged blocks, without numpy (paper §6.1, Fig. 3).

``reserved_slots`` is what each Orca baseline reserves for one request (>= prompt + output, <=
the maximum length); ``OneRequest`` splits one request's memory into KV, slots reserved for
tokens to come and slots never used, beside paging's blocks. Pure Python, so graders and the
live site run it in a browser; :mod:`pagedlab.simulate.policies` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedlab.ground import paper
from pagedlab.ground.checks import ceil_div, check_choice, check_int
from pagedlab.simulate.contiguous import buddy_extent

MAX_LEN = paper.MAX_SEQ_LEN  # OPT's longest sequence (§3, §6.1); workload.MAX_LEN is this
MAX_TOKENS = 2**31 - 1
"""The longest length (and ``max_len``) the simulator takes: slot ids are int32 in pagedlab
(``memory.owner.MAX_SLOTS``), and every sum of lengths then fits the int64 arrays."""

RESERVATIONS = ("max", "pow2", "oracle")


def reserved_slots(policy: str, prompt_len: int, output_len: int, max_len: int = MAX_LEN) -> int:
    """Slots an Orca baseline reserves for one request (§6.1), before the allocator rounds:
    ``max_len``, ``prompt + next_pow2(output)`` (at most ``max_len``) or ``prompt + output``."""
    check_choice(policy, "policy", RESERVATIONS)
    max_len = check_int(max_len, "max_len", minimum=2, maximum=MAX_TOKENS)
    p = check_int(prompt_len, "prompt_len", minimum=1, maximum=max_len - 1)
    o = check_int(output_len, "output_len", minimum=1, maximum=max_len - p)
    if policy == "max":
        return max_len
    if policy == "pow2":
        return min(p + buddy_extent(o), max_len)  # the next power of two
    return p + o


@dataclass(frozen=True)
class OneRequest:
    """One request's memory under contiguous reservation and under paging (paper Fig. 3): the
    reservation is ``tokens + future + never_used``; paging's empty tail ``paged_waste`` < B."""

    prompt: int
    response: int
    generated: int
    reserved_slots: int
    block_size: int

    def __post_init__(self) -> None:
        for name in ("prompt", "response", "reserved_slots", "block_size"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.generated, "generated", minimum=0)
        if not 0 <= self.generated <= self.response:
            raise ValueError(f"generated must be in [0, {self.response}], got {self.generated!r}")
        if self.prompt + self.response > self.reserved_slots:
            raise ValueError(
                f"prompt + response = {self.prompt + self.response} exceeds the reservation "
                f"of {self.reserved_slots} slots"
            )

    @property
    def tokens(self) -> int:
        return self.prompt + self.generated

    @property
    def future(self) -> int:  # reserved for tokens still to come
        return self.prompt + self.response - self.tokens

    @property
    def never_used(self) -> int:  # internal fragmentation of the reservation
        return self.reserved_slots - self.prompt - self.response

    @property
    def paged_blocks(self) -> int:
        return ceil_div(self.tokens, self.block_size)

    @property
    def paged_waste(self) -> int:
        return self.paged_blocks * self.block_size - self.tokens
