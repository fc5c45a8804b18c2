"""Pieces every kernel shares: the result of a run and the timing loop."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class KernelResult:
    """What one kernel run measured; ``metrics`` maps name -> {"value", "unit"}."""

    throughput: float
    throughput_unit: str
    step_times_s: list[float]
    warmup_steps: int
    metrics: dict[str, dict] = field(default_factory=dict)

    @property
    def measured_steps(self) -> int:
        """Timed repetitions of the kernel inside this run."""
        return len(self.step_times_s)


def metric(value: float, unit: str) -> dict:
    """One secondary value with its unit, as records store it."""
    return {"value": float(value), "unit": unit}


def timed(step: Callable[[], object], warmup: int, steps: int) -> list[float]:
    """Run ``step`` ``warmup`` times untimed, then ``steps`` times; return the step times (s).

    ``step`` must block until its work is done (kernels call ``.numpy()`` on a small
    result of the step function).
    """
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def rate(amount_per_step: float, times: list[float]) -> float:
    """Amount per second over a measured window: amount * steps / total time."""
    total = sum(times)
    if not times or total <= 0:
        raise ValueError("a rate needs at least one timed step with positive time")
    return amount_per_step * len(times) / total


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` items as ``parts`` contiguous (start, stop) ranges, sizes differing by at most one."""
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for p in range(parts):
        stop = start + base + (1 if p < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return n > 0 and n & (n - 1) == 0
