"""SchedulerExplorer: step a tiny serving engine through memory pressure (§4.5).

A 16-block device pool, a host pool as large (the swap space), and five requests (one with
two parallel samples) that do not all fit at once. ``explorer_state(...)`` is the model and
is pure: it builds a real :class:`~pagedlab.memory.scheduler.Scheduler` with real K/V
(:class:`~pagedlab.attention.swap.SwappingKV`), runs ``step`` steps and, after every step,
checks every running sequence's K/V read back through its block table. ``render(state)``
turns a state into PNG bytes; :class:`SchedulerExplorer` wraps both in widgets and updates
them by assigning values (never by displaying from a callback).

Controls (``set(**controls)`` takes the same names): ``mode`` (swap / recompute),
``block_size``, ``token_budget``, ``chunked_prefill`` and ``step``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache

import ipywidgets as widgets

from pagedlab.attention.kv_cache import PagedKVCache
from pagedlab.attention.swap import HostPool, SwappingKV
from pagedlab.checks import check_int
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.requests import Request, StepResult
from pagedlab.memory.scheduler import MODES, Scheduler
from pagedlab.pictures.blocks import Canvas
from pagedlab.pictures.scheduler import scheduler_drawing

POOL_BLOCKS = 16
SCENE = (
    Request("A", 10, 14),
    Request("B", 6, 8, num_samples=2),
    Request("C", 14, 8),
    Request("D", 5, 12),
    Request("E", 8, 9),
)
BLOCK_SIZES = (2, 8)  # smallest and largest; at 2 the two-sample request needs 14 of 16 blocks
BUDGETS = (4, 64)
MAX_STEP = 60


@dataclass(frozen=True)
class SchedulerState:
    """One setting of the explorer: the scheduler after ``step`` steps, and its checks."""

    mode: str
    block_size: int
    token_budget: int
    chunked_prefill: bool
    step: int
    scheduler: Scheduler
    result: StepResult | None  # the last step's result (None at step 0)
    sequences_checked: int  # running sequences whose K/V was read back, summed over steps
    total_steps: int  # steps this setting takes to finish every request


def check_controls(
    mode: object, block_size: object, token_budget: object, chunked_prefill: object, step: object
) -> tuple[str, int, int, bool, int]:
    """The controls' values, checked; raises TypeError/ValueError naming a bad one."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(chunked_prefill, bool):
        raise TypeError(f"chunked_prefill must be a bool, got {chunked_prefill!r}")
    size = check_int(block_size, "block_size", *BLOCK_SIZES)
    budget = check_int(token_budget, "token_budget", *BUDGETS)
    return mode, size, budget, chunked_prefill, check_int(step, "step", 0, MAX_STEP)


def scene_scheduler(
    mode: str = "swap",
    block_size: int = 4,
    token_budget: int | None = None,
    chunked_prefill: bool = False,
) -> tuple[Scheduler, SwappingKV]:
    """The explorer's scene, queued and not yet stepped: a scheduler over real K/V.

    The device pool has ``POOL_BLOCKS`` blocks, the host pool as many; K/V have one head of
    dimension 2, on the CPU.
    """
    device = PagedKVCache(POOL_BLOCKS, block_size, 1, 2, device="cpu")
    store = SwappingKV(device, HostPool.like(device))
    scheduler = Scheduler(
        BlockAllocator(POOL_BLOCKS, block_size),
        mode=mode,
        token_budget=token_budget,
        chunked_prefill=chunked_prefill,
        host=store.host.allocator,
        kv=store,
    )
    for request in SCENE:
        scheduler.add(request)
    return scheduler, store


_build = scene_scheduler


@lru_cache(maxsize=16)
def _total_steps(mode: str, block_size: int, budget: int, chunked: bool) -> int:
    scheduler, _ = _build(mode, block_size, budget, chunked)
    scheduler.kv = None  # counting steps needs no K/V
    return len(scheduler.run())


@lru_cache(maxsize=256)
def explorer_state(
    mode: str = "swap",
    block_size: int = 4,
    token_budget: int = 16,
    chunked_prefill: bool = True,
    step: int = 0,
) -> SchedulerState:
    """The scheduler after ``step`` steps (fewer if everything finished first); pure, cached.

    Raises AssertionError if a block leaked or a sequence's K/V is wrong after any step.
    """
    mode, size, budget, chunked, step = check_controls(
        mode, block_size, token_budget, chunked_prefill, step
    )
    scheduler, store = _build(mode, size, budget, chunked)
    result, checked = None, 0
    while scheduler.steps < step and not scheduler.done:
        result = scheduler.step()
        scheduler.check()
        checked += store.verify(scheduler.running)
    total = _total_steps(mode, size, budget, chunked)
    return SchedulerState(mode, size, budget, chunked, step, scheduler, result, checked, total)


_CANVAS = Canvas(dpi=80)


def render(state: SchedulerState) -> bytes:
    """The picture of ``state`` as PNG bytes (reads the state, changes nothing)."""
    return _CANVAS.render(scheduler_drawing(state.scheduler, state.result)).png()


def readout_html(state: SchedulerState) -> str:
    """Counters and checks, as HTML."""
    s = state.scheduler
    moved = s.blocks_swapped_out + s.blocks_swapped_in
    lines = [
        f"step {s.steps} of {state.total_steps} · preemptions {s.preemptions} · "
        f"blocks moved {moved} · tokens recomputed {s.tokens_recomputed}",
        f"✓ no block leaked; ✓ K/V of every running sequence read back exactly after every "
        f"step ({state.sequences_checked} reads)",
    ]
    if s.done:
        order = ", ".join(g.name for g in s.finished)
        lines.append(f"all finished, in the order {order}")
    return "<br>".join(html.escape(line) for line in lines)


class SchedulerExplorer:
    """Mode toggle, block-size and token-budget sliders, chunked prefill, step / Play."""

    def __init__(
        self,
        mode: str = "swap",
        block_size: int = 4,
        token_budget: int = 16,
        chunked_prefill: bool = True,
        step: int = 0,
    ) -> None:
        check_controls(mode, block_size, token_budget, chunked_prefill, step)
        self.mode = widgets.ToggleButtons(options=list(MODES), value=mode, description="mode")
        self.block_size = widgets.IntSlider(
            value=block_size, min=BLOCK_SIZES[0], max=BLOCK_SIZES[1], description="block size"
        )
        self.token_budget = widgets.IntSlider(
            value=token_budget, min=BUDGETS[0], max=BUDGETS[1], description="token budget"
        )
        self.chunked_prefill = widgets.Checkbox(value=chunked_prefill, description="chunked")
        self.step_slider = widgets.IntSlider(value=step, min=0, max=MAX_STEP, description="step")
        self.play = widgets.Play(value=step, min=0, max=MAX_STEP, interval=700, description="play")
        self.step_button = widgets.Button(description="step", tooltip="one scheduler step")
        self.picture = widgets.Image(format="png")
        self.picture.add_class("pagedlab-picture")
        self.readout = widgets.HTML()
        self.readout.add_class("pagedlab-readout")
        self._link = widgets.jslink((self.play, "value"), (self.step_slider, "value"))
        self._holding = False
        self.state = explorer_state(mode, block_size, token_budget, chunked_prefill, step)
        row1 = widgets.HBox([self.play, self.step_button, self.step_slider])
        row2 = widgets.HBox([self.mode, self.chunked_prefill])
        row3 = widgets.HBox([self.block_size, self.token_budget])
        self.widget = widgets.VBox([row1, row2, row3, self.picture, self.readout])
        self.play.observe(self._on_play, names="value")
        self.step_button.on_click(lambda _button: self.step())
        for control in (
            self.mode,
            self.block_size,
            self.token_budget,
            self.chunked_prefill,
            self.step_slider,
        ):
            control.observe(self._on_change, names="value")
        self._show()

    def _on_play(self, change: dict) -> None:
        self.step_slider.value = change["new"]

    def _on_change(self, _change: dict) -> None:
        if not self._holding:
            self._show()

    def controls(self) -> dict[str, object]:
        return {
            "mode": self.mode.value,
            "block_size": self.block_size.value,
            "token_budget": self.token_budget.value,
            "chunked_prefill": self.chunked_prefill.value,
            "step": self.step_slider.value,
        }

    def set(self, **controls: object) -> SchedulerState:
        """Move controls by name (``mode``, ``block_size``, ``token_budget``,
        ``chunked_prefill``, ``step``); atomic: a bad value raises and changes nothing."""
        unknown = set(controls) - set(self.controls())
        if unknown:
            raise TypeError(f"unknown control(s) {sorted(unknown)}; use {list(self.controls())}")
        values = {**self.controls(), **controls}
        check_controls(**values)
        self._holding = True  # one redraw for the whole move
        try:
            self.mode.value = values["mode"]
            self.block_size.value = values["block_size"]
            self.token_budget.value = values["token_budget"]
            self.chunked_prefill.value = values["chunked_prefill"]
            self.step_slider.value = values["step"]
            self.play.value = values["step"]
        finally:
            self._holding = False
        self._show()
        return self.state

    def step(self) -> SchedulerState:
        """One scheduler step (what Play does each tick); stays put once everything finished."""
        if self.step_slider.value < min(MAX_STEP, self.state.total_steps):
            self.step_slider.value += 1
        return self.state

    def _show(self) -> None:
        self.state = explorer_state(**self.controls())
        self.picture.value = render(self.state)
        self.readout.value = readout_html(self.state)

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        """Show the widget; its plain text is short and deterministic (nbval reads it)."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        c = self.controls()
        bundle["text/plain"] = (
            f"SchedulerExplorer(mode {c['mode']!r}, block size {c['block_size']}, "
            f"token budget {c['token_budget']}, chunked {c['chunked_prefill']}, step {c['step']})"
        )
        return bundle
