"""Rules for hypothesis state machines that a plain seeded driver can replay as well.

Hypothesis draws each rule argument through its engine, which costs about a millisecond a
step: fine for a few hundred shrinkable sequences, minutes for 10,000. So each argument is a
*spec*, a strategy together with the same draw from a ``random.Random``; ``@step`` makes the
hypothesis rule and remembers the specs, and :func:`run_random` replays the rules (and
``@check`` invariants) on seeded random sequences without hypothesis. A failure names the
sequence's seed and the steps it took.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

Spec = tuple[st.SearchStrategy[Any], Callable[[random.Random], Any]]


def integer(lo: int, hi: int) -> Spec:
    return st.integers(lo, hi), lambda r: r.randint(lo, hi)


def integers(lo: int, hi: int, min_size: int, max_size: int) -> Spec:
    return (
        st.lists(st.integers(lo, hi), min_size=min_size, max_size=max_size),
        lambda r: [r.randint(lo, hi) for _ in range(r.randint(min_size, max_size))],
    )


def one_of(values: list[Any]) -> Spec:
    return st.sampled_from(values), lambda r: r.choice(values)


PICK = integer(0, 2**16)
"""An index into whatever list a rule picks from, taken modulo its length (see ``choose``)."""


def choose(items: list[Any], index: int) -> Any:
    return items[index % len(items)]


def step(pre: Callable[[Any], object] | None = None, **specs: Spec):  # type: ignore[no-untyped-def]
    """``@rule`` (and ``@precondition`` if ``pre``) from specs, remembered for the driver."""

    def decorate(fn):  # type: ignore[no-untyped-def]
        fn.specs, fn.pre = {k: v[1] for k, v in specs.items()}, pre
        wrapped = rule(**{k: v[0] for k, v in specs.items()})(fn)
        return precondition(pre)(wrapped) if pre else wrapped

    return decorate


def setup(**specs: Spec):  # type: ignore[no-untyped-def]
    """``@initialize`` from specs, remembered for the driver."""

    def decorate(fn):  # type: ignore[no-untyped-def]
        fn.setup_specs = {k: v[1] for k, v in specs.items()}
        return initialize(**{k: v[0] for k, v in specs.items()})(fn)

    return decorate


def check(fn):  # type: ignore[no-untyped-def]
    """``@invariant()``, remembered for the driver."""
    fn.is_check = True
    return invariant()(fn)


def run_random(machine_class: type, sequences: int, steps: int, seed: int = 0) -> int:
    """Replay ``machine_class``'s rules on ``sequences`` seeded random sequences of up to
    ``steps`` steps (a rule whose precondition fails is skipped), checking every invariant
    after each step; returns the number of steps run."""
    members = [getattr(machine_class, name) for name in dir(machine_class)]
    rules = [fn for fn in members if hasattr(fn, "specs")]
    setups = [fn for fn in members if hasattr(fn, "setup_specs")]
    checks = [fn for fn in members if getattr(fn, "is_check", False)]
    done = 0
    for i in range(sequences):
        rng = random.Random(seed * 1_000_003 + i)
        history: list[str] = []
        try:
            machine = machine_class()
            for fn in setups:
                args = {name: draw(rng) for name, draw in fn.setup_specs.items()}
                history.append(f"{fn.__name__}({args})")
                fn(machine, **args)
            for _ in range(steps):
                for fn in checks:
                    fn(machine)
                fn = rng.choice(rules)
                if fn.pre is not None and not fn.pre(machine):
                    continue
                args = {name: draw(rng) for name, draw in fn.specs.items()}
                history.append(f"{fn.__name__}({args})")
                fn(machine, **args)
                done += 1
            for fn in checks:
                fn(machine)
            machine.teardown()
        except Exception as error:
            raise AssertionError(f"sequence {i} (seed {seed}) failed after {history}") from error
    return done
