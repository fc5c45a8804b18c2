"""The machine's other load over a measurement: how much of the cores a run was given
went to processes that are not its own (docs/reliability.md, "A busy machine").

The supervisor samples before its worker starts and after the worker tree is gone, so
the figures cover the worker's start, its warm-up and its window:

- ``own_cpu_s``: CPU seconds (user + system) of the benchmark's process tree, every
  descendant the supervisor's lifeline reaped (``getrusage(RUSAGE_CHILDREN)``);
- ``cores_busy_s``: CPU seconds the run's cores (the supervisor's CPU affinity, a Slurm
  job's cpuset) were busy in all, from ``/proc/stat`` (user, system, irq, softirq, steal,
  and nice when the run itself is niced), ``steal_s`` of them taken by a hypervisor for
  other guests;
- ``niced_s``: CPU seconds the cores gave niced work (``/proc/stat``'s nice: processes of a
  lower priority than the run's, such as a background build at nice 19), not counted as
  busy: the scheduler gives such a process about 1.5 % of a core against one of the run's
  threads, so it fills the run's idle time rather than taking its cores (None when the run
  is niced itself, and its own time is in that column);
- ``other_cores`` = (cores_busy_s - own_cpu_s) / window_s: the mean number of the run's
  cores other work held; ``load_1m`` the load average before and after; ``slurm_oversubscribe``
  what Slurm says of the job's node sharing (``OverSubscribe``; None outside Slurm).

``host_busy`` is True when ``other_cores`` exceeds the cores the run did not ask for
(``cores - cores_asked``) by more than :data:`BUSY_LIMIT`; None where ``/proc/stat`` is
missing (no figures then).
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# Other work beyond the run's spare cores that flags it, in cores: a planted busy loop on
# one of two cores moves a two-thread run far beyond its run-to-run spread, the
# machine's own background stays well under a tenth of a core
# (scripts/bench_host_load.py; the measurement is in docs/reliability.md).
BUSY_LIMIT = 0.25
# How far CPU seconds may exceed cores x window: the clocks tick in 1/100 s per process
# and per core, and the samples are taken microseconds apart from the window's ends
CLOCK_SLACK = 0.05
CLOCK_SLACK_S = 0.5
DECIMALS = 3  # the figures are rounded to milliseconds (and other_cores to 1/1000 core)
PROC_STAT = Path("/proc/stat")
# /proc/stat's per-cpu columns: user nice system idle iowait irq softirq steal (guest
# time is counted in user already)
_BUSY_COLUMNS = (0, 2, 5, 6, 7)
_NICE_COLUMN = 1
_STEAL_COLUMN = 7


@dataclass(frozen=True)
class Sample:
    """What the clocks read at one moment (seconds)."""
    wall: float
    own: float
    busy: float | None
    steal: float | None
    niced: float | None
    load_1m: float | None


def run_cores() -> list[int]:
    """The cores this process (and the worker it starts) may run on."""
    return sorted(os.sched_getaffinity(0))


def _cpu_times(cores: list[int]) -> tuple[float, float, float | None] | None:
    """Busy, steal and niced seconds of ``cores`` since boot (niced None, and counted as
    busy, when this process is niced itself), or None without /proc/stat."""
    try:
        lines = PROC_STAT.read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cores}
    tick = os.sysconf("SC_CLK_TCK")
    niced_run = os.getpriority(os.PRIO_PROCESS, 0) > 0
    busy = steal = niced = 0.0
    seen = 0
    for line in lines:
        name, *values = line.split()
        if name in wanted:
            ticks = [int(v) for v in values]
            busy += sum(ticks[i] for i in _BUSY_COLUMNS if i < len(ticks))
            steal += ticks[_STEAL_COLUMN] if len(ticks) > _STEAL_COLUMN else 0
            niced += ticks[_NICE_COLUMN] if len(ticks) > _NICE_COLUMN else 0
            seen += 1
    if seen != len(wanted):
        return None
    if niced_run:
        return (busy + niced) / tick, steal / tick, None
    return busy / tick, steal / tick, niced / tick


def sample(cores: list[int]) -> Sample:
    """Read the clocks now: wall, the reaped process tree's CPU, the cores' busy and
    steal time, the 1-minute load average."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    times = _cpu_times(cores)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return Sample(wall=time.monotonic(), own=usage.ru_utime + usage.ru_stime,
                  busy=times[0] if times else None, steal=times[1] if times else None,
                  niced=times[2] if times else None, load_1m=load)


def slurm_oversubscribe(env: dict | None = None) -> str | None:
    """Slurm's ``OverSubscribe`` of the job this runs in (e.g. ``NO`` for an exclusive
    node, ``OK``, ``YES``), or None outside Slurm or when ``scontrol`` cannot tell."""
    job = (env if env is not None else os.environ).get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        text = subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in text.split():
        if word.startswith("OverSubscribe="):
            return word.split("=", 1)[1] or None
    return None


def figures(before: Sample, after: Sample, *, cores: int, cores_asked: int,
            oversubscribe: str | None = None) -> dict:
    """The record's ``host_load`` between two samples (see the module docstring);
    ``cores_asked`` is how many of the ``cores`` the run's processes and threads use."""
    window = max(after.wall - before.wall, 1e-9)
    own = max(after.own - before.own, 0.0)
    known = before.busy is not None and after.busy is not None
    busy = after.busy - before.busy if known else None
    other = max(busy - own, 0.0) / window if known else None
    return {
        "window_s": round(window, DECIMALS), "cores": cores, "cores_asked": min(cores_asked, cores),
        "own_cpu_s": round(own, DECIMALS),
        "cores_busy_s": None if busy is None else round(busy, DECIMALS),
        "steal_s": round(after.steal - before.steal, DECIMALS) if known else None,
        "niced_s": round(after.niced - before.niced, DECIMALS)
        if known and before.niced is not None and after.niced is not None else None,
        "other_cores": None if other is None else round(other, DECIMALS),
        "load_1m": [before.load_1m, after.load_1m],
        "slurm_oversubscribe": oversubscribe,
    }


def other_cores_bounds(load: dict) -> tuple[float, float]:
    """The least and most ``other_cores`` the rounded figures of ``load`` allow: each of
    cores_busy_s, own_cpu_s and window_s is within half a step of :data:`DECIMALS` of what
    was measured, and other_cores itself was rounded too. A short window makes the interval
    wide (0.57 s busy, 0.237 s own in 0.293 s: 1.131 to 1.142 cores)."""
    half = 0.5 * 10 ** -DECIMALS
    spare = load["cores_busy_s"] - load["own_cpu_s"]
    window = load["window_s"]
    low = max(spare - 2 * half, 0.0) / (window + half)
    high = max(spare + 2 * half, 0.0) / max(window - half, 1e-9)
    return max(low - half, 0.0), high + half


def is_busy(load: dict | None) -> bool | None:
    """Whether the figures ``load`` (a record's ``host_load``) show a window that shared
    its cores: other work beyond the spare cores by more than :data:`BUSY_LIMIT`; None
    when they do not say."""
    if not isinstance(load, dict) or not isinstance(load.get("other_cores"), (int, float)):
        return None
    spare = max(int(load.get("cores", 0)) - int(load.get("cores_asked", 0)), 0)
    return bool(load["other_cores"] > spare + BUSY_LIMIT)


def cores_asked(measurement: dict, cores: int) -> int:
    """The cores a measurement's processes use on one node: processes per node x the
    threads of each (0 threads: the framework takes every core)."""
    processes = max(int(measurement.get("processes_per_node") or 1), 1)
    threads = int(measurement.get("intra_threads") or measurement.get("threads") or 0)
    return cores if threads <= 0 else min(processes * threads, cores)
