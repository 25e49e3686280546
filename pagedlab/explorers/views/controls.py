"""Controls (:class:`Slider`, :class:`Choice`, :class:`Toggle`) and an explorer
(:class:`Declaration`: its controls, static frames and :class:`Play`), each declared once.

The notebook's ``Explorer`` base builds its ipywidgets from a declaration and the live site
writes its page inputs from the very same one, so a range, an option or a description is typed
once. No widgets here: the live core imports this module in a browser. Each declaration is
checked when made, and ``accept(value)`` checks one value against a control: a wrong kind is
an ``ArgumentTypeError``, a value outside the range or the options a ``ValueError``, both
naming the control and the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pagedlab.ground.checks import ArgumentTypeError, check_int


def _named(name: str, description: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a control's name must be an identifier, got {name!r}")
    if not isinstance(description, str) or not description:
        raise ValueError(f"control {name!r} needs a description, got {description!r}")


@dataclass(frozen=True)
class Slider:
    """An integer from ``min`` to ``max`` in steps of ``step`` (an ``IntSlider``).

    Invariants: ``min <= default <= max``, ``step >= 1`` and ``default`` is ``min`` plus a
    whole number of steps. ``unbounded``: ``max`` is only where the notebook's slider stops;
    the live page's input has no maximum (its view refuses, and says why, what it cannot do).
    """

    name: str
    min: int
    max: int
    description: str
    default: int
    step: int = 1
    unbounded: bool = False

    def __post_init__(self) -> None:
        _named(self.name, self.description)
        check_int(self.max, f"{self.name}'s max", minimum=check_int(self.min, f"{self.name}'s min"))
        check_int(self.default, f"{self.name}'s default", minimum=self.min, maximum=self.max)
        if (self.default - self.min) % check_int(self.step, f"{self.name}'s step", minimum=1):
            raise ValueError(f"{self.name}'s default {self.default} is not on a step from min")

    def accept(self, value: object) -> int:
        """``value`` as an int inside the declared range."""
        return check_int(value, self.name, minimum=self.min, maximum=self.max)


@dataclass(frozen=True)
class Choice:
    """One of ``options`` (``ToggleButtons``; a ``SelectionSlider`` where ``slider`` is set).

    Invariants: ``options`` is a non-empty tuple of distinct values, all ``str`` or all ``int``
    (any sequence given is kept as a tuple), and ``default`` is one of them.
    """

    name: str
    options: tuple[str | int, ...]
    description: str
    default: str | int
    slider: bool = False

    def __post_init__(self) -> None:
        _named(self.name, self.description)
        options = tuple(self.options)
        object.__setattr__(self, "options", options)
        kinds = {type(o) for o in options}
        if len(set(options)) < len(options) or kinds not in ({int}, {str}):
            raise ValueError(f"{self.name}'s options must be distinct ints or strs: {options!r}")
        self.accept(self.default)

    def accept(self, value: object) -> str | int:
        """``value`` if it is one of the options."""
        refused = f"{self.name} must be one of {list(self.options)}, got {value!r}"
        if isinstance(self.options[0], int):
            value = check_int(value, self.name)
        elif not isinstance(value, str):
            raise ArgumentTypeError(refused)
        if value not in self.options:
            raise ValueError(refused)
        return value


@dataclass(frozen=True)
class Toggle:
    """On or off (a ``Checkbox``). Invariant: ``default`` is a bool."""

    name: str
    description: str
    default: bool

    def __post_init__(self) -> None:
        _named(self.name, self.description)
        self.accept(self.default)

    def accept(self, value: object) -> bool:
        """``value`` if it is True or False."""
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"{self.name} must be True or False, got {value!r}")
        return value


Control = Slider | Choice | Toggle


def axis_values(control: Control, shown: object = None) -> list[object]:
    """Every value ``control`` takes, in order: a slider's range (reaching ``shown`` where an
    unbounded slider shows more than its max), a choice's options, a toggle's off and on."""
    if isinstance(control, Slider):
        top = (
            max(control.max, shown) if isinstance(shown, int) and control.unbounded else control.max
        )
        return list(range(control.min, top + 1, control.step))
    if isinstance(control, Choice):
        return list(control.options)
    return [False, True]


PLAY_MODES = ("step", "replay")


@dataclass(frozen=True)
class Play:
    """What an explorer's Play does, declared once: the widget, the static frames and the live
    page each run it over the axis's values (the control's, or the frames' in a static page).
    Checked when made (a ``ValueError`` naming the value)."""

    axis: str  # the control it moves (a frame axis of the declaration): an identifier
    # "step": from the value shown on to the last (a press at the end starts from the first);
    # "replay": from the first value up to the one shown, then stops (the growth watched again)
    mode: str = "step"
    interval_ms: int = 700  # between two values, >= 50

    def __post_init__(self) -> None:
        if not isinstance(self.axis, str) or not self.axis.isidentifier():
            raise ValueError(f"a Play's axis must be a control's name, got {self.axis!r}")
        if self.mode not in PLAY_MODES:
            raise ValueError(f"Play mode must be one of {PLAY_MODES}, got {self.mode!r}")
        check_int(self.interval_ms, "interval_ms", minimum=50)

    def span(self, count: int, shown: int) -> tuple[int, int]:
        """The first and last position (of ``count`` values) one press runs through, from
        position ``shown``: ``(0, shown)`` to replay, ``(shown, count - 1)`` to step on."""
        return (0, shown) if self.mode == "replay" else (shown, count - 1)

    def run(self, values: Sequence[object], shown: object) -> list[object]:
        """The values one press shows, in order (``shown`` must be one of ``values``)."""
        if shown not in values:
            raise ValueError(f"Play on {self.axis!r}: {shown!r} is not one of {list(values)}")
        first, last = self.span(len(values), list(values).index(shown))
        return list(values[first : last + 1])


@dataclass(frozen=True)
class Declaration:
    """One explorer, declared once; the notebook's widget, the static site's frames and the
    live page all read it. Checked when made (a ``ValueError`` naming the value)."""

    name: str  # the explorer's class name (the live page's ``data-explorer``)
    controls: tuple[Control, ...]  # in order, distinct names
    # control name -> the non-empty list of values the static site draws ahead of time (frame
    # order: their product, the last control fastest); empty: no static view
    frames: Mapping[str, Sequence[object]] = field(default_factory=dict)
    play: Play | None = None  # a Play on a key of ``frames``

    def __post_init__(self) -> None:
        names = [control.name for control in self.controls]
        if not self.name.isidentifier() or len(set(names)) != len(names):
            raise ValueError(f"explorer {self.name!r}: bad name or repeated controls {names}")
        for axis, values in self.frames.items():
            if axis not in names:
                raise ValueError(f"{self.name}: frame axis {axis!r} is not a control ({names})")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ValueError(f"{self.name}: frame axis {axis!r} needs values, got {values!r}")
        if self.play is not None and not isinstance(self.play, Play):
            raise ValueError(f"{self.name}: play must be a Play(axis, mode), got {self.play!r}")
        if self.play is not None and self.play.axis not in self.frames:
            raise ValueError(f"{self.name}: play axis {self.play.axis!r} is not a frame axis")

    def control(self, name: str) -> Control:
        """The declared control called ``name`` (a ``ValueError`` naming it if none is)."""
        for control in self.controls:
            if control.name == name:
                return control
        raise ValueError(f"{self.name} has no control {name!r} ({[c.name for c in self.controls]})")
