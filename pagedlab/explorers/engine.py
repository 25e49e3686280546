"""EngineExplorer: step a real model's serving run and watch the pool and the text (notebook 10).

A :class:`pagedlab.engine.Engine` serves a few prompts (shown by ``label``; ``decode`` turns
tokens into text) on a small pool (6 blocks of 8: small enough to preempt). Each mode's run is
computed once, on first use, and every step keeps its picture, drawn right after it, and each
request's text, so moving ``step`` only picks a frame (past the end: the last). Controls:
``mode`` (recompute / swap), ``step``. The readout also says whether every request's tokens
equal :func:`pagedlab.model.generate_contiguous`'s (or ``expected``). :meth:`served` hands out
a mode's engine and run, so a cell can inspect the same run.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pagedlab.engine import Engine, EngineRun
from pagedlab.explorers.base import Explorer, View
from pagedlab.explorers.views.controls import Choice, Declaration, Play, Slider
from pagedlab.memory.scheduler import MODES
from pagedlab.model import TinyLlama, generate_contiguous
from pagedlab.model.paged import DecodeAttention
from pagedlab.pictures.drawing import Drawing
from pagedlab.pictures.scheduler import scheduler_drawing

MAX_STEP = 80


@dataclass(frozen=True)
class EngineFrame:
    """One step of one mode's run: its picture, the events and each request's text so far."""

    mode: str
    step: int
    total_steps: int
    drawing: Drawing
    events: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]  # (request name, label -> answer so far)
    preemptions: int
    identical: bool  # every request's final tokens equal generate_contiguous's


_Row = tuple[Drawing, tuple[str, ...], tuple[tuple[str, str], ...], int]  # a frame's state


class EngineExplorer(Explorer):
    """Mode toggle and step slider over a real engine run (see the module docstring)."""

    DECLARATION = Declaration(
        "EngineExplorer",
        (Choice("mode", MODES, "mode", "recompute"), Slider("step", 0, MAX_STEP, "step", 0)),
        frames={"mode": ["recompute", "swap"], "step": list(range(0, 61, 2))},
        play=Play("step"),
    )

    def __init__(
        self,
        model: TinyLlama,
        prompts: Sequence[Sequence[int]],
        decode: Callable[[list[int]], str],
        labels: Sequence[str] | None = None,
        max_new_tokens: int = 16,
        num_blocks: int = 6,
        block_size: int = 8,
        decode_attention: DecodeAttention | None = None,
        expected: Sequence[Sequence[int]] | None = None,
        **initial: object,
    ) -> None:
        if isinstance(prompts, (str, bytes)) or not prompts:
            raise TypeError(f"prompts must be a non-empty list of token-id lists, got {prompts!r}")
        if not callable(decode):
            raise TypeError(f"decode must turn a list of token ids into text, got {decode!r}")
        labels = [f"prompt {i}" for i in range(len(prompts))] if labels is None else list(labels)
        if len(labels) != len(prompts) or not all(isinstance(t, str) for t in labels):
            raise TypeError(f"labels must be one string per prompt, got {labels!r}")
        self._model, self._prompts = model, [list(p) for p in prompts]
        self._decode, self._labels = decode, labels
        self._new, self._pool = max_new_tokens, (num_blocks, block_size)  # the Engine checks
        self._attention = decode_attention
        self._expected = None if expected is None else [list(e) for e in expected]
        self._runs: dict[str, list[EngineFrame]] = {}
        self._served: dict[str, tuple[Engine, EngineRun]] = {}
        super().__init__(**initial)

    def frames(self, mode: str) -> list[EngineFrame]:
        """Every step of ``mode``'s run (computed on first use, then kept)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode not in self._runs:
            self._runs[mode] = self._compute(mode)
        return self._runs[mode]

    def served(self, mode: str) -> tuple[Engine, EngineRun]:
        """``mode``'s engine and its finished run (the one the frames show; computed on first
        use, then kept): ``run.steps`` holds every step's record, ``engine.tokens(run, name)``
        each request's tokens. Treat them as read-only: the frames were drawn from them."""
        self.frames(mode)
        return self._served[mode]

    def _compute(self, mode: str) -> list[EngineFrame]:
        prompts = self._prompts
        engine = Engine(
            self._model, *self._pool, preemption=mode, prefix_caching=False,
            decode_attention=self._attention,
        )  # fmt: skip
        run = engine.start(prompts, self._new)
        # after each step (step 0: nothing yet): picture, events, texts, preemptions so far
        rows: list[_Row] = [(scheduler_drawing(run.scheduler), (), self._texts_of(engine, run), 0)]
        while not run.scheduler.done:
            result = engine.step(run).result
            drawing, events = scheduler_drawing(run.scheduler, result), tuple(result.events())
            preempted = rows[-1][3] + len(result.preempted)
            rows.append((drawing, events, self._texts_of(engine, run), preempted))
        oracle = self._expected or [generate_contiguous(self._model, p, self._new) for p in prompts]
        identical = [engine.tokens(run, name) for name in run.names] == oracle
        self._served[mode] = (engine, run)
        return [EngineFrame(mode, n, len(rows) - 1, *row, identical) for n, row in enumerate(rows)]

    def _texts_of(self, engine: Engine, run: EngineRun) -> tuple[tuple[str, str], ...]:
        return tuple(
            (name, f"{label} → {self._decode(engine.tokens(run, name))}")
            for name, label in zip(run.names, self._labels, strict=True)
        )

    def render(self, mode: str, step: int) -> View:
        frames = self.frames(mode)
        frame = frames[min(step, len(frames) - 1)]
        return View(frame, frame.drawing, readout_html(frame))


def readout_html(frame: EngineFrame) -> str:
    """Step, events, each request's text, and the token-identity check, as HTML."""
    lines = [
        f"step {frame.step} of {frame.total_steps} · {frame.mode} · preemptions so far "
        f"{frame.preemptions}" + (f" · {'; '.join(frame.events)}" if frame.events else ""),
        *(f"{name}: {text}" for name, text in frame.texts),
        ("✓ every request's tokens equal generate_contiguous's (an ordinary contiguous cache)"
         if frame.identical else "✗ a request's tokens differ from generate_contiguous's"),
    ]  # fmt: skip
    return "<br>".join(html.escape(line) for line in lines)
