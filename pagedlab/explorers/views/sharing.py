"""What the sharing and prefix-cache explorers show for one setting: state, drawing, readout.

``sharing_state`` and ``prefix_state`` are pure: each builds a fresh allocator and runs the
real code; ``sharing_view`` and ``prefix_view`` are the explorers' whole render, for the
notebook and the live site. No widgets, no numpy: this runs in a browser (Pyodide) too. Beam
search's parents come from a seeded ``random.Random``: the same values give the same tree.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.explorers.views.shown import View
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import Admission, PrefixCache
from pagedlab.memory.sharing import beam_step, fork_samples
from pagedlab.pictures.control_scenes import prefix_tokens
from pagedlab.pictures.sharing import MAX_TABLES, sharing_scene

POOL_BLOCKS, BLOCK_SIZE = 32, 4
PREFIX_POOL_BLOCKS, MAX_PROMPT = 16, 16  # the smallest pool drawn: 16 blocks stay readable

MODES = ("parallel sampling", "beam search")

SHARING_EXPLORER = Declaration(
    "SharingExplorer",
    (
        Choice("mode", MODES, "mode", MODES[0]),
        Slider("width", 1, MAX_TABLES, "n / k", 2),
        Slider("prompt_len", 1, 24, "prompt", 7),
        Slider("steps", 0, 12, "generated", 1),
    ),
    frames={"mode": ["parallel sampling", "beam search"], "steps": list(range(13))},
    play=Play("steps"),
)
PREFIX_EXPLORER = Declaration(
    "PrefixCacheExplorer",
    (
        Slider("shared", 0, MAX_PROMPT, "shared", 8),
        Slider("prompt_len", 1, MAX_PROMPT, "prompt", 10),
        Slider("requests", 1, MAX_TABLES, "requests", 3),
        Choice("block_size", (2, 4, 8), "block size", 4),
    ),
    frames={"shared": [0, 2, 4, 6, 8], "requests": [1, 2, 3, 4, 5, 6]},
    play=Play("requests"),
)


@dataclass(frozen=True)
class SharingState:
    mode: str
    allocator: BlockAllocator
    tables: list[BlockTable]
    copies: int  # copy-on-writes performed
    blocks_with: int
    blocks_without: int


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
            draws = [(s + math.log(1 - rng.random()), p) for p, s in enumerate(scores)
                     for _ in range(width)]  # fmt: skip
            cands = sorted(draws, reverse=True)[:width]
            step = beam_step(tables, [p for _, p in cands])
            tables, scores, copies = step.beams, [s for s, _ in cands], copies + len(step.copies)
    without = sum(ceil_div(t.num_tokens, BLOCK_SIZE) for t in tables)
    return SharingState(mode, alloc, tables, copies, alloc.num_blocks - alloc.num_free, without)


def sharing_view(mode: str, width: int, prompt_len: int, steps: int) -> View:
    """The sharing explorer's state, picture and readout for one setting."""
    s = sharing_state(mode, width, prompt_len, steps)
    title = f"{s.mode}: {len(s.tables)} sequences of one prompt"  # few distinct strings
    shared = {b: c for b, c in enumerate(s.allocator.refcounts()) if c > 1}
    listed = ", ".join(f"{b}: ×{c}" for b, c in shared.items()) or "none"
    readout = (
        f"<b>{s.mode}</b>, {len(s.tables)} sequences: "
        f"blocks in use <b>{s.blocks_with}</b> (without sharing {s.blocks_without}, "
        f"saved {100 * (1 - s.blocks_with / s.blocks_without):.0f} %), "
        f"copy-on-writes {s.copies}<br>"
        f"shared blocks (ref counts): {listed}"
    )
    return View(s, sharing_scene(s.allocator, s.tables, title=title), readout)


# --- prefix caching --------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefixState:
    cache: PrefixCache
    admissions: list[Admission]


def prefix_state(
    shared: int, prompt_len: int, requests: int, block_size: int = BLOCK_SIZE
) -> PrefixState:
    """``requests`` prompts of ``prompt_len`` tokens whose first ``shared`` tokens agree,
    admitted one after another into a prefix cache (all still running)."""
    shared = check_int(shared, "shared", minimum=0)
    prompt_len = check_int(prompt_len, "prompt_len", minimum=1, maximum=MAX_PROMPT)
    requests = check_int(requests, "requests", minimum=1, maximum=MAX_TABLES)
    block_size = check_int(block_size, "block_size", minimum=1)
    # 16 blocks, or as many as the requests need with nothing shared (at most 6 x 16 tokens
    # in blocks of 2: 48), so every setting fits
    num_blocks = max(PREFIX_POOL_BLOCKS, requests * ceil_div(prompt_len, block_size))
    pool = BlockAllocator(num_blocks, block_size)
    cache = PrefixCache(pool)
    admissions = [cache.admit(prefix_tokens(shared, prompt_len, r)) for r in range(requests)]
    return PrefixState(cache, admissions)


def prefix_view(shared: int, prompt_len: int, requests: int, block_size: int) -> View:
    """The prefix-cache explorer's state, picture and readout for one setting."""
    st = prefix_state(shared, prompt_len, requests, block_size)
    tables = [a.table for a in st.admissions]
    title = f"{len(tables)} requests with a common prefix"  # few distinct strings
    tokens = [prefix_tokens(shared, prompt_len, r) for r in range(requests)]
    drawing = sharing_scene(
        st.cache.allocator,
        tables,
        tokens,  # token ids in the slots, not positions
        highlight=list(st.cache.cached_blocks()),
        title=title,
        caption="outlined: cached full blocks",
    )
    s = st.cache.stats
    rows = "".join(
        f"<tr><td>{i}</td><td>{len(a.hit_blocks)}</td><td>{a.miss_blocks}</td>"
        f"<td>{a.computed_tokens}</td><td>{a.partial_tokens}</td>"
        f"<td>{'yes' if a.recomputed_last_block else 'no'}</td></tr>"
        for i, a in enumerate(st.admissions)
    )
    readout = (
        "<table><tr><th>request</th><th>hit blocks</th><th>missed blocks</th>"
        "<th>computed tokens</th><th>partial-block tokens</th><th>last block recomputed</th></tr>"
        f"{rows}</table>hit rate <b>{100 * s.hit_rate:.0f} %</b> ({s.hit_tokens} of "
        f"{s.query_tokens} prompt tokens), hits {s.hit_blocks}, misses {s.miss_blocks}, "
        f"evictions {s.evictions}"
    )
    return View(st, drawing, readout)
