"""SchedulerExplorer: step a tiny serving engine through memory pressure (§4.5).

``explorer_state(...)`` is the pure model: a real :class:`~pagedlab.memory.scheduler.Scheduler`
over real K/V on a 16-block pool (and a host pool as large), stepped ``step`` times, every
running sequence's K/V checked after each step; each setting's run is kept, so moving the
step slider costs one step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from functools import lru_cache

import ipywidgets as widgets

from pagedlab.attention.swap import SwappingKV
from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.scheduler import MAX_STEP, SCHEDULER_EXPLORER, check_controls, readout
from pagedlab.memory.requests import StepPlan
from pagedlab.memory.scheduler import Scheduler
from pagedlab.pictures.scenes import scheduler_scene
from pagedlab.pictures.scheduler import scheduler_drawing


@dataclass(frozen=True)
class SchedulerState:
    """One setting of the explorer: the scheduler after ``step`` steps, and its checks."""

    mode: str
    block_size: int
    token_budget: int
    chunked_prefill: bool
    step: int
    scheduler: Scheduler
    result: StepPlan | None  # the last step's result (None at step 0)
    sequences_checked: int  # running sequences whose K/V was read back, summed over steps
    total_steps: int  # steps this setting takes to finish every request


@dataclass
class _Run:
    """One setting's states so far: ``states[n]`` is the scheduler after ``n`` steps, never
    stepped again (the next state steps a deep copy), so step ``n + 1`` costs one step."""

    states: list[SchedulerState]

    def extend_to(self, step: int) -> None:
        """Append states until ``step`` is reached or every request has finished."""
        while len(self.states) <= step and not self.states[-1].scheduler.done:
            last = self.states[-1]
            scheduler = copy.deepcopy(last.scheduler)  # its kv (the K/V store) comes along
            store = scheduler.kv
            assert isinstance(store, SwappingKV)
            result = scheduler.step()
            scheduler.check_invariants()
            checked = last.sequences_checked + store.verify(scheduler.running)
            self.states.append(
                replace(last, step=len(self.states), scheduler=scheduler, result=result,
                        sequences_checked=checked)
            )  # fmt: skip


@lru_cache(maxsize=16)
def _run(mode: str, block_size: int, budget: int, chunked: bool) -> _Run:
    scheduler, _store = scheduler_scene(mode, block_size, budget, chunked)  # store: .kv
    counter, _ = scheduler_scene(mode, block_size, budget, chunked)
    counter.kv = None  # counting steps needs no K/V
    total = len(counter.run())
    return _Run([SchedulerState(mode, block_size, budget, chunked, 0, scheduler, None, 0, total)])


def explorer_state(
    mode: str = "swap",
    block_size: int = 4,
    token_budget: int = 16,
    chunked_prefill: bool = True,
    step: int = 0,
) -> SchedulerState:
    """The scheduler after ``step`` steps (fewer if everything finished first); pure: the
    caller's own deep copy of the kept run's state. AssertionError if a block leaked or a
    sequence's K/V is wrong after any step."""
    mode, size, budget, chunked, step = check_controls(
        mode, block_size, token_budget, chunked_prefill, step
    )
    run = _run(mode, size, budget, chunked)
    run.extend_to(step)
    last = run.states[min(step, len(run.states) - 1)]  # the last: finished before ``step``
    return copy.deepcopy(replace(last, step=step))


def readout_html(state: SchedulerState) -> str:
    """Counters and checks, as HTML."""
    check = (
        f"✓ no block leaked; ✓ K/V of every running sequence read back exactly after every "
        f"step ({state.sequences_checked} reads)"
    )
    return readout(state.scheduler, check, state.total_steps)


class SchedulerExplorer(Explorer):
    """Mode toggle, block-size and token-budget sliders, chunked prefill, step / Play;
    ``advance()`` is one scheduler step (what Play does each tick)."""

    DECLARATION = SCHEDULER_EXPLORER
    ROWS = (("play", "step_button", "step"), ("mode", "chunked_prefill"),
            ("block_size", "token_budget"))  # fmt: skip

    def __init__(self, **initial: object) -> None:
        self.step_button = widgets.Button(description="step", tooltip="one scheduler step")
        super().__init__(**initial)
        self.step_slider = self.controls["step"]
        self.step_button.on_click(lambda _button: self.advance())

    def render(
        self, mode: str, block_size: int, token_budget: int, chunked_prefill: bool, step: int
    ) -> View:
        state = explorer_state(mode, block_size, token_budget, chunked_prefill, step)
        return View(state, scheduler_drawing(state.scheduler, state.result), readout_html(state))

    def advance(self) -> SchedulerState:
        """One scheduler step (what Play does each tick); stays put once everything finished."""
        if self.step_slider.value < min(MAX_STEP, self.state.total_steps):
            self.step_slider.value += 1
        return self.state
