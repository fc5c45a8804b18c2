"""A tuning plan: the space a tuner searches and its rounds of successive halving, fixed
before any job runs (the search itself, on Optuna, is :mod:`archbench.plan.tuner`).
Planning needs no Optuna: a campaign is planned, and its images run, without it."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Mapping

FIRST_SHARE = 0.6  # of the budget for the first bracket, when a second one fits


@dataclass(frozen=True)
class Space:
    """The configurations a tuner chooses from: each axis's values; ``feasible(point)``
    False for a combination that cannot run (e.g. more threads than cores)."""

    axes: Mapping[str, tuple]
    feasible: Callable[[dict], bool] | None = None

    def points(self) -> list[dict]:
        """Every feasible point: the exhaustive sweep of the space, in axis order."""
        names = list(self.axes)
        every = (dict(zip(names, values)) for values in itertools.product(*self.axes.values()))
        return [p for p in every if self.feasible is None or self.feasible(p)]

    def tuned(self) -> dict[str, tuple]:
        """The axes with more than one value (the others are constants of every point)."""
        return {k: tuple(v) for k, v in self.axes.items() if len(v) > 1}


@dataclass(frozen=True)
class Round:
    """One round of a plan: ``trials`` trials of ``bracket`` at ``rung`` (0: new trials),
    each measured ``repetitions`` times over ``steps`` measured steps."""

    bracket: int
    rung: int
    trials: int
    steps: int
    repetitions: int

    @property
    def measurements(self) -> int:
        return self.trials * self.repetitions


@dataclass(frozen=True)
class Slot:
    """One measurement of a round: trial number, its point, steps and repetition."""

    trial: int
    point: dict
    steps: int
    repetition: int


def rung_steps(steps: int, min_steps: int, reduction_factor: int) -> list[int]:
    """Measured steps of each rung: ``steps`` divided by the reduction factor per rung
    below the top, while at least ``min_steps`` (at most 4 rungs)."""
    out = [steps]
    while len(out) < 4 and out[0] // reduction_factor >= max(1, min_steps):
        out.insert(0, out[0] // reduction_factor)
    return out


def unit_cost(steps: int, *, full_steps: int, warmup_steps: int) -> float:
    """A measurement of ``steps`` measured steps in full-measurement units (its warm-up
    costs as much as at full steps)."""
    return (warmup_steps + steps) / (warmup_steps + full_steps)


def bracket(n0: int, *, bracket_index: int, rungs: list[int], reduction_factor: int,
            repetitions: int) -> list[Round]:
    """The rounds of one bracket starting ``n0`` trials: each rung keeps the best
    1/reduction_factor (rounded up); the top rung is repeated."""
    out, n = [], n0
    for k, steps in enumerate(rungs):
        top = k == len(rungs) - 1
        out.append(Round(bracket_index, k, n, steps, repetitions if top else 1))
        n = math.ceil(n / reduction_factor)
    return out


def rounds_cost(rounds: list[Round], *, steps: int, warmup_steps: int) -> float:
    """The plan's cost in full-measurement units."""
    return sum(r.measurements * unit_cost(r.steps, full_steps=steps, warmup_steps=warmup_steps)
               for r in rounds)


def plan_rounds(points: int, budget: float, *, steps: int, warmup_steps: int, min_steps: int,
                reduction_factor: int = 3, repetitions: int = 1) -> list[Round]:
    """Brackets of successive halving within ``budget`` (full-measurement units) over a
    space of ``points`` configurations: the first bracket spends about FIRST_SHARE of it
    (or all, when a second bracket would not fit), later brackets what is left, while
    untried points remain. [] when not even one trial at every rung fits."""
    rungs = rung_steps(steps, min_steps, reduction_factor)

    def cost(n0: int) -> float:
        return rounds_cost(bracket(n0, bracket_index=0, rungs=rungs, reduction_factor=reduction_factor,
                                   repetitions=repetitions), steps=steps, warmup_steps=warmup_steps)

    smallest = reduction_factor ** (len(rungs) - 1)
    out: list[Round] = []
    left, untried = float(budget), points
    while untried > 0:
        share = FIRST_SHARE * left if not out and cost(smallest) * 2 <= left * 0.999 else left
        n0 = max((n for n in range(1, untried + 1) if cost(n) <= share + 1e-9), default=0)
        if n0 == 0:
            break
        out += bracket(n0, bracket_index=len({r.bracket for r in out}), rungs=rungs,
                       reduction_factor=reduction_factor, repetitions=repetitions)
        left -= cost(n0)
        untried -= n0
    return out
