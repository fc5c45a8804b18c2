"""Pieces every kernel shares: what a run asks for, what it measured, and the timing loop."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from archbench.core.marks import mark


@dataclass(frozen=True, kw_only=True)
class KernelRun:
    """One kernel run as its command line asks for it (built once by ``cli.parse_args``).

    ``options`` holds the kernel's own options (its spec's settings and extra options,
    e.g. cg ``iterations``, matmul ``reducers``) by their argparse names. ``experiment``,
    ``system``, ``config_id`` and ``repetition`` identify the record.
    """

    kernel: str
    size: int
    workers: int = 1
    tile_size: int | None = None
    threads: int = 0  # intra-op threads per worker, 0 = the node's CPUs shared by its workers
    warmup_steps: int = 0
    steps: int = 1
    seed: int = 0
    cluster_mode: str = "auto"  # auto | local | slurm
    device: str = "cpu"  # cpu | gpu: each worker on the GPU of its local rank (archbench.workloads.gpu)
    output: str | None = None
    experiment: str = "adhoc"
    system: str = "local"
    config_id: str | None = None
    repetition: int = 0
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def option(self, name: str) -> Any:
        """The kernel's own option ``name`` (KeyError when the kernel has none)."""
        return self.options[name]


@dataclass
class KernelResult:
    """What one kernel run measured; ``metrics`` maps name -> {"value", "unit"};
    ``tile_size`` is the tile the run used (tiled kernels); ``devices`` the devices
    TensorFlow placed the measured step on (``archbench.workloads.gpu.placed_devices`` of tensors the
    step produced on each worker)."""

    throughput: float
    throughput_unit: str
    step_times_s: list[float]
    warmup_steps: int
    metrics: dict[str, dict] = field(default_factory=dict)
    tile_size: int | None = None
    devices: list[str] = field(default_factory=list)

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
    mark("model-built")
    for done in range(warmup):
        step()
        if done == 0:
            mark("first-step")
    mark("warmup")
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    mark("window")
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
