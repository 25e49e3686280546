"""The allocation explorer: sliders -> real allocator and block table -> kernel -> picture.

``explorer_state(block_size, length, layout)`` is the whole model and is pure: it builds a
fresh ``BlockAllocator`` (32 blocks) in the chosen layout, appends the sequence token by
token with a real ``BlockTable``, writes the seed's scalar head (keys 0, query 1, values
1..L) into a ``PagedKVCache`` through its slot mapping, and runs ``paged_attention`` (the
Triton kernel; its interpreter on a CPU). ``AllocationExplorer`` wraps it in ipywidgets and
redraws by assigning widget state (``Image.value``, ``HTML.value``), never by displaying.

Layouts (the order of the free list when the sequence starts):

- ``ascending``: a fresh pool hands out 0, 1, 2, ...
- ``seed [4, 1, …]``: the pool after a short history (``seed_history``): requests A (blocks
  0, 1), B (2, 3), C (4) and D (the rest) ran; C finished, then A (a table frees its last
  block first), then B and D. The free list is a queue, so it now starts 4, 1, 0, ...
- ``shuffled``: a fixed random permutation (seed ``SHUFFLE_SEED``).

A length that needs more blocks than the pool has (block size 1, length > 32) is not an
error: the state holds the tokens that fit and ``problem`` explains the OutOfBlocksError.

Speed: the kernel output is memoised per (block size, layout, length), and each (block
size, layout) keeps one KV cache into which only not-yet-written positions are written
(appending never moves a position, so a position's slot is the same for every length).
Slots past the current length may therefore hold values of a longer visit; the kernel never
reads past ``seq_len``, as in a real server.
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass, replace
from functools import lru_cache

import ipywidgets as widgets
import torch

from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable
from pagedlab.pictures.blocks import Canvas, scene

POOL_BLOCKS = 32
MAX_BLOCK_SIZE = 16
MAX_LENGTH = 64
LAYOUTS = ("ascending", "seed [4, 1, …]", "shuffled")
SHUFFLE_SEED = 0
KV_BYTES_PER_SLOT = 8  # the seed's head: K and V, one kv head of dim 1, fp32
TABLE_ENTRY_BYTES = 4  # int32


def seed_history(
    num_blocks: int = POOL_BLOCKS, block_size: int = 4, finished: bool = True
) -> tuple[BlockAllocator, list[BlockTable]]:
    """A pool whose free list starts 4, 1, 0 because of what other requests did.

    A fresh pool hands out 0, 1, 2, ...: A takes blocks 0, 1; B takes 2, 3; C takes 4; D
    takes the rest. C finishes (4 is freed), then A (its last block first: 1, then 0).
    With ``finished`` B and D finish too (free list 4, 1, 0, 3, 2, then D's blocks from the
    last); otherwise they are returned still running. Needs ``num_blocks >= 6``.
    """
    if num_blocks < 6:
        raise ValueError(f"seed_history needs num_blocks >= 6, got {num_blocks}")
    allocator = BlockAllocator(num_blocks, block_size)
    a, b, c, d = (BlockTable(allocator) for _ in range(4))
    for table, blocks in ((a, 2), (b, 2), (c, 1), (d, num_blocks - 5)):
        table.append_tokens(blocks * block_size)
    c.free()
    a.free()
    if not finished:
        return allocator, [b, d]
    b.free()
    d.free()
    return allocator, []


def make_allocator(layout: str, block_size: int, num_blocks: int = POOL_BLOCKS) -> BlockAllocator:
    """A pool of ``num_blocks`` free blocks whose free list is in ``layout`` order."""
    if layout == LAYOUTS[0]:
        return BlockAllocator(num_blocks, block_size)
    if layout == LAYOUTS[1]:
        return seed_history(num_blocks, block_size)[0]
    if layout == LAYOUTS[2]:
        order = list(range(num_blocks))
        random.Random(SHUFFLE_SEED).shuffle(order)
        return BlockAllocator(num_blocks, block_size, free_order=order)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


@dataclass(frozen=True)
class ExplorerState:
    """Everything one setting of the explorer shows; built by ``explorer_state``."""

    block_size: int
    length: int  # asked for
    layout: str
    allocator: BlockAllocator
    table: BlockTable  # holds min(length, what fits) tokens
    new_block: int | None  # physical block the last token opened, if it opened one
    problem: str | None  # why the table holds fewer than ``length`` tokens
    output: float | None  # the kernel's output on the seed's head
    expected: float | None  # (L + 1) / 2

    @property
    def blocks(self) -> list[int]:
        return self.table.blocks

    @property
    def empty_slots(self) -> int:
        return self.table.num_slots - self.table.num_tokens

    @property
    def table_bytes(self) -> int:
        return len(self.table.blocks) * TABLE_ENTRY_BYTES

    @property
    def empty_bytes(self) -> int:
        return self.empty_slots * KV_BYTES_PER_SLOT

    @property
    def ok(self) -> bool:
        return (
            self.problem is None
            and self.output is not None
            and self.expected is not None
            and abs(self.output - self.expected) <= 1e-4 * max(1.0, self.expected)
        )


def _check_settings(block_size: object, length: object, layout: object) -> tuple[int, int, str]:
    for name, value, top in (
        ("block_size", block_size, MAX_BLOCK_SIZE),
        ("length", length, MAX_LENGTH),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"{name} must be an int in [1, {top}], got {value!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return block_size, length, layout  # type: ignore[return-value]


def explorer_state(
    block_size: int, length: int, layout: str = LAYOUTS[1], run_kernel: bool = True
) -> ExplorerState:
    """Build the allocator and table for one setting and run the kernel on it (pure).

    With ``run_kernel=False`` the output is left None; ``with_kernel_output`` fills it in.
    """
    block_size, length, layout = _check_settings(block_size, length, layout)
    allocator = make_allocator(layout, block_size)
    table = BlockTable(allocator)
    problem = None
    for token in range(length):
        try:
            table.append_tokens(1)
        except OutOfBlocksError as error:
            needed = -(-length // block_size)
            problem = (
                f"length {length} needs {needed} blocks of {block_size}, but the pool has "
                f"{allocator.num_blocks}: appending token {token + 1} raised OutOfBlocksError "
                f"({error}). A server would queue or preempt this request; the picture shows "
                f"the {token} tokens that fit."
            )
            break
    n = table.num_tokens
    new_block = table.blocks[-1] if n % block_size == 1 % block_size and problem is None else None
    expected = (n + 1) / 2 if problem is None else None
    state = ExplorerState(
        block_size, length, layout, allocator, table, new_block, problem, None, expected
    )
    return with_kernel_output(state) if run_kernel else state


def with_kernel_output(state: ExplorerState) -> ExplorerState:
    """``state`` with the Triton kernel's output on the seed's head (none if impossible)."""
    if state.problem is not None or state.output is not None:
        return state
    table = state.table
    slots = tuple(table.slot_mapping())
    return replace(
        state, output=seed_head_output(state.block_size, state.layout, slots, table.blocks)
    )


class _SeedCache:
    """One KV cache per (block size, layout) holding the seed's values, written as needed."""

    def __init__(self, block_size: int) -> None:
        from pagedlab.attention.kv_cache import PagedKVCache

        self.cache = PagedKVCache(POOL_BLOCKS, block_size, 1, 1)  # on pagedlab's backend device
        self.written: dict[int, int] = {}  # position -> slot already written

    def ensure(self, slots: tuple[int, ...]) -> None:
        todo = [p for p, s in enumerate(slots) if self.written.get(p) != s]
        if not todo:
            return
        device = self.cache.device
        k = torch.zeros(len(todo), 1, 1, device=device)
        v = torch.tensor([p + 1.0 for p in todo], device=device).reshape(-1, 1, 1)  # value p + 1
        self.cache.write([slots[p] for p in todo], k, v)
        self.written.update((p, slots[p]) for p in todo)


@lru_cache(maxsize=64)
def _seed_cache(block_size: int, layout: str) -> _SeedCache:
    return _SeedCache(block_size)


@lru_cache(maxsize=4096)
def _seed_output(
    block_size: int, layout: str, slots: tuple[int, ...], blocks: tuple[int, ...]
) -> float:
    from pagedlab.attention.ops import block_tables_tensor, paged_attention

    store = _seed_cache(block_size, layout)
    store.ensure(slots)
    query = torch.ones(1, 1, 1, device=store.cache.device)
    out = paged_attention(
        query,
        store.cache.key,
        store.cache.value,
        block_tables_tensor([list(blocks)], device=store.cache.device),
        torch.tensor([len(slots)], dtype=torch.int32, device=store.cache.device),
    )
    return float(out.item())


def seed_head_output(
    block_size: int, layout: str, slots: tuple[int, ...], blocks: list[int]
) -> float:
    """The kernel's output for the seed's head (keys 0, query 1, values 1..L) at ``slots``."""
    return _seed_output(block_size, layout, tuple(slots), tuple(blocks))


def readout_html(state: ExplorerState) -> str:
    """The live readout: sizes, bytes and the kernel's check, as HTML."""
    t = state.table
    lines = [
        f"blocks {len(t.blocks)} · physical {t.blocks} · slots {t.num_slots} · "
        f"tokens {t.num_tokens} · empty slots {state.empty_slots}",
        f"table entries {len(t.blocks)} = {state.table_bytes} bytes (int32) · "
        f"empty slots hold {state.empty_bytes} bytes of KV ({KV_BYTES_PER_SLOT} per slot: "
        f"K and V, one head of dim 1, fp32)",
    ]
    if state.problem is not None:
        lines.append(f"<b>✗ not possible:</b> {html.escape(state.problem)}")
    elif state.output is not None and state.expected is not None:
        mark = "✓" if state.ok else "✗ the kernel disagrees with the mean of the values"
        lines.append(
            f"output {state.output:.3f} = (L+1)/2 = {state.expected:.3f} {mark} "
            f"(keys 0, query 1, values 1..{t.num_tokens}: equal weights, so the mean)"
        )
    return "<br>".join(lines)


def caption(state: ExplorerState) -> str:
    """One line under the picture about the last token."""
    t = state.table
    if state.problem is not None:
        return f"out of blocks after token {t.num_tokens}"
    block, offset = t.slot(t.num_tokens - 1)
    if state.new_block is not None:
        return f"token {t.num_tokens} opened a new block: physical {block}; nothing moved"
    return f"token {t.num_tokens} went to block {block}, offset {offset}"


class AllocationExplorer:
    """Sliders for block size and length, a layout choice, Play/step, picture and readout.

    ``.widget`` is the VBox to display. ``set(block_size=..., length=..., layout=...)`` and
    ``step()`` drive it without a browser; ``.state`` is what the picture was drawn from.
    """

    def __init__(self, block_size: int = 4, length: int = 5, layout: str = LAYOUTS[1]) -> None:
        _check_settings(block_size, length, layout)
        self.canvas = Canvas(dpi=80)
        self.block_size = widgets.IntSlider(
            value=block_size, min=1, max=MAX_BLOCK_SIZE, description="block size"
        )
        self.length = widgets.IntSlider(value=length, min=1, max=MAX_LENGTH, description="length")
        self.layout = widgets.ToggleButtons(
            options=list(LAYOUTS), value=layout, description="layout"
        )
        self.play = widgets.Play(
            value=length, min=1, max=MAX_LENGTH, interval=700, description="play"
        )
        self.step_button = widgets.Button(description="step", tooltip="append one token")
        self.picture = widgets.Image(format="png")
        self.picture.add_class("pagedlab-picture")
        self.readout = widgets.HTML()
        self.readout.add_class("pagedlab-readout")
        self.state: ExplorerState = explorer_state(block_size, length, layout)
        self._holding = False
        controls = widgets.HBox([self.play, self.step_button, self.block_size, self.length])
        self.widget = widgets.VBox([controls, self.layout, self.picture, self.readout])
        # Linked in the browser too, so pressing Play right after moving the slider starts
        # from the slider's value even before the kernel has caught up.
        self._link = widgets.jslink((self.play, "value"), (self.length, "value"))
        self.play.observe(self._on_play, names="value")
        self.step_button.on_click(lambda _button: self.step())
        for control in (self.block_size, self.length, self.layout):
            control.observe(self._on_change, names="value")
        self._show()

    def _on_play(self, change: dict) -> None:
        self.length.value = change["new"]

    def _on_change(self, _change: dict) -> None:
        if self._holding:
            return
        self.play.value = self.length.value
        self._show()

    def set(
        self, block_size: int | None = None, length: int | None = None, layout: str | None = None
    ) -> ExplorerState:
        """Move the controls as a learner would; returns the new state."""
        _check_settings(
            self.block_size.value if block_size is None else block_size,
            self.length.value if length is None else length,
            self.layout.value if layout is None else layout,
        )
        self._holding = True  # one redraw for the whole move, not one per control
        try:
            if layout is not None:
                self.layout.value = layout
            if block_size is not None:
                self.block_size.value = block_size
            if length is not None:
                self.length.value = length
                self.play.value = length
        finally:
            self._holding = False
        self._show()
        return self.state

    def step(self) -> ExplorerState:
        """One more token (what Play does each tick); stays at the maximum length."""
        if self.length.value < MAX_LENGTH:
            self.length.value += 1
        return self.state

    def _show(self) -> None:
        """Picture first (it needs no kernel), then the kernel's check in the readout."""
        values = (self.block_size.value, self.length.value, self.layout.value)
        state = explorer_state(*values, run_kernel=False)
        highlight = () if state.new_block is None else (state.new_block,)
        drawing = scene(state.allocator, [state.table], highlight=highlight, caption=caption(state))
        self.picture.value = self.canvas.render(drawing).png()
        self.state = state = with_kernel_output(state)
        self.readout.value = readout_html(state)

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        """Show the widget; its plain-text form is short and deterministic (nbval reads it)."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = (
            f"AllocationExplorer(block size {self.block_size.value}, "
            f"length {self.length.value}, layout {self.layout.value!r})"
        )
        return bundle
