"""Explorers for sharing: sliders -> real allocator, block tables, prefix cache -> picture.

``sharing_state(mode, width, prompt_len, steps)`` and ``prefix_state(shared, prompt_len,
requests, block_size)`` are the models and are pure: each builds a fresh allocator and
runs the real code (``fork_samples`` / ``beam_step`` / ``PrefixCache.admit``).
``SharingExplorer`` and ``PrefixCacheExplorer`` wrap them in ipywidgets and update by
assigning widget state (``Image.value``, ``HTML.value``) on one reused canvas, never by
displaying from a callback.

Beam search picks its parents with a seeded ``random.Random`` (synthetic scores), so the
same slider values always give the same tree.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import ipywidgets as widgets

from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import Admission, PrefixCache
from pagedlab.memory.sharing import beam_step, fork_samples
from pagedlab.pictures.blocks import Canvas
from pagedlab.pictures.sharing import MAX_TABLES, sharing_scene

POOL_BLOCKS, BLOCK_SIZE = 32, 4
PREFIX_POOL_BLOCKS, MAX_PROMPT = 48, 16
MODES = ("parallel sampling", "beam search")


@dataclass(frozen=True)
class SharingState:
    mode: str
    allocator: BlockAllocator
    tables: list[BlockTable]
    copies: int  # copy-on-writes performed
    blocks_with: int
    blocks_without: int

    @property
    def saved(self) -> float:
        return 1 - self.blocks_with / self.blocks_without


def sharing_state(
    mode: str, width: int, prompt_len: int, steps: int, seed: int = 0
) -> SharingState:
    """``width`` samples or beams of a ``prompt_len``-token prompt after ``steps`` tokens."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    width = check_int(width, "width", minimum=1, maximum=MAX_TABLES)
    prompt_len = check_int(prompt_len, "prompt_len", minimum=1)
    steps = check_int(steps, "steps", minimum=0)
    alloc = BlockAllocator(POOL_BLOCKS, BLOCK_SIZE)
    prompt = BlockTable(alloc)
    prompt.append_tokens(prompt_len)
    copies = 0
    if mode == MODES[0]:
        tables = fork_samples(prompt, width)
        for _ in range(steps):
            copies += sum(t.append_tokens(1) is not None for t in tables)
    else:
        rng = random.Random(seed)
        tables, scores = [prompt], [0.0]
        for _ in range(steps):
            cands = sorted(
                (
                    (s + math.log(1 - rng.random()), p)
                    for p, s in enumerate(scores)
                    for _ in range(width)
                ),
                reverse=True,
            )[:width]
            step = beam_step(tables, [p for _, p in cands])
            tables, scores, copies = step.beams, [s for s, _ in cands], copies + len(step.copies)
    without = sum(-(-t.num_tokens // BLOCK_SIZE) for t in tables)
    return SharingState(mode, alloc, tables, copies, alloc.num_blocks - alloc.num_free, without)


def sharing_html(state: SharingState) -> str:
    counts = state.allocator.refcounts()
    shared = {b: c for b, c in enumerate(counts) if c > 1}
    listed = ", ".join(f"{b}: ×{c}" for b, c in shared.items()) or "none"
    return (
        f"<b>{state.mode}</b>, {len(state.tables)} sequences: "
        f"blocks in use <b>{state.blocks_with}</b> (without sharing {state.blocks_without}, "
        f"saved {100 * state.saved:.0f} %), copy-on-writes {state.copies}<br>"
        f"shared blocks (ref counts): {listed}"
    )


class SharingExplorer:
    """Mode, width (n samples / beam width), prompt length and generated tokens."""

    def __init__(self, mode: str = MODES[0], width: int = 2, prompt_len: int = 7, steps: int = 1):
        self.state = sharing_state(mode, width, prompt_len, steps)
        self.canvas = Canvas(dpi=80)
        self.mode = widgets.ToggleButtons(options=list(MODES), value=mode, description="mode")
        self.width = widgets.IntSlider(value=width, min=1, max=MAX_TABLES, description="n / k")
        self.prompt_len = widgets.IntSlider(value=prompt_len, min=1, max=24, description="prompt")
        self.steps = widgets.IntSlider(value=steps, min=0, max=12, description="generated")
        self.picture = widgets.Image(format="png")
        self.readout = widgets.HTML()
        controls = widgets.HBox([self.width, self.prompt_len, self.steps])
        self.widget = widgets.VBox([self.mode, controls, self.picture, self.readout])
        for control in (self.mode, self.width, self.prompt_len, self.steps):
            control.observe(lambda _change: self._show(), names="value")
        self._show()

    def set(self, **values: object) -> SharingState:
        """Move controls by name (mode, width, prompt_len, steps); returns the new state."""
        for name, value in values.items():
            getattr(self, name).value = value
        return self.state

    def _show(self) -> None:
        s = sharing_state(
            self.mode.value, self.width.value, self.prompt_len.value, self.steps.value
        )
        self.state = s
        title = f"{s.mode}: {len(s.tables)} sequences of one prompt"  # few distinct strings
        self.picture.value = self.canvas.render(
            sharing_scene(s.allocator, s.tables, title=title)
        ).png()
        self.readout.value = sharing_html(s)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


# --- prefix caching --------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefixState:
    cache: PrefixCache
    admissions: list[Admission]


def prefix_tokens(shared: int, prompt_len: int, request: int) -> list[int]:
    """Request ``request``'s prompt: ``shared`` common tokens (a system prompt), then its own."""
    return [1000 + i for i in range(min(shared, prompt_len))] + [
        request * 100 + i for i in range(prompt_len - min(shared, prompt_len))
    ]


def prefix_state(
    shared: int, prompt_len: int, requests: int, block_size: int = BLOCK_SIZE
) -> PrefixState:
    """``requests`` prompts of ``prompt_len`` tokens whose first ``shared`` tokens agree,
    admitted one after another into a prefix cache (all still running)."""
    shared = check_int(shared, "shared", minimum=0)
    prompt_len = check_int(prompt_len, "prompt_len", minimum=1, maximum=MAX_PROMPT)
    requests = check_int(requests, "requests", minimum=1, maximum=MAX_TABLES)
    cache = PrefixCache(BlockAllocator(PREFIX_POOL_BLOCKS, block_size))
    admissions = [cache.admit(prefix_tokens(shared, prompt_len, r)) for r in range(requests)]
    return PrefixState(cache, admissions)


def prefix_html(state: PrefixState) -> str:
    s = state.cache.stats
    rows = "".join(
        f"<tr><td>{i}</td><td>{len(a.hit_blocks)}</td><td>{a.miss_blocks}</td>"
        f"<td>{a.computed_tokens}</td><td>{a.partial_tokens}</td>"
        f"<td>{'yes' if a.recomputed_last_block else 'no'}</td></tr>"
        for i, a in enumerate(state.admissions)
    )
    return (
        "<table><tr><th>request</th><th>hit blocks</th><th>missed blocks</th>"
        "<th>computed tokens</th><th>partial-block tokens</th><th>last block recomputed</th></tr>"
        f"{rows}</table>hit rate <b>{100 * s.hit_rate:.0f} %</b> ({s.hit_tokens} of "
        f"{s.query_tokens} prompt tokens), hits {s.hit_blocks}, misses {s.miss_blocks}, "
        f"evictions {s.evictions}"
    )


class PrefixCacheExplorer:
    """Shared-prefix length, prompt length, number of requests and block size."""

    def __init__(
        self, shared: int = 8, prompt_len: int = 10, requests: int = 3, block_size: int = 4
    ):
        self.state = prefix_state(shared, prompt_len, requests, block_size)
        self.canvas = Canvas(dpi=80)
        self.shared = widgets.IntSlider(value=shared, min=0, max=MAX_PROMPT, description="shared")
        self.prompt_len = widgets.IntSlider(
            value=prompt_len, min=1, max=MAX_PROMPT, description="prompt"
        )
        self.requests = widgets.IntSlider(
            value=requests, min=1, max=MAX_TABLES, description="requests"
        )
        self.block_size = widgets.ToggleButtons(
            options=[2, 4, 8], value=block_size, description="block size"
        )
        self.picture = widgets.Image(format="png")
        self.readout = widgets.HTML()
        controls = widgets.HBox([self.shared, self.prompt_len, self.requests])
        self.widget = widgets.VBox([controls, self.block_size, self.picture, self.readout])
        for control in (self.shared, self.prompt_len, self.requests, self.block_size):
            control.observe(lambda _change: self._show(), names="value")
        self._show()

    def set(self, **values: object) -> PrefixState:
        """Move controls by name (shared, prompt_len, requests, block_size)."""
        for name, value in values.items():
            getattr(self, name).value = value
        return self.state

    def _show(self) -> None:
        st = prefix_state(
            self.shared.value, self.prompt_len.value, self.requests.value, self.block_size.value
        )
        self.state = st
        tables = [a.table for a in st.admissions]
        cached = list(st.cache.cached_blocks())
        title = f"{len(tables)} requests with a common prefix"  # few distinct strings
        drawing = sharing_scene(
            st.cache.allocator,
            tables,
            highlight=cached,
            title=title,
            caption="outlined: cached full blocks",
        )
        self.picture.value = self.canvas.render(drawing).png()
        self.readout.value = prefix_html(st)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
