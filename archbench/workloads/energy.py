"""Energy of a measured window, read from the sensors a node has, never estimated.

Each training process opens a :class:`Meter` before the barrier that starts its measured
window and reads it again after the barrier that ends it (``Backend.window``), so the
interval a reading covers holds the window and the barrier waits at its edges (its
``interval_s`` is recorded). The sources, each a cumulative counter read twice:

* ``nvml``: NVIDIA's board energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ
  since the driver loaded; Volta and newer) of every GPU the process was given
  (``CUDA_VISIBLE_DEVICES``), through ``nvidia-ml-py``, imported only when a GPU run reads it.
  Sense check: more than 0 J and at most the board's enforced power limit x the interval.
* ``rapl``: Linux powercap RAPL zones (``/sys/class/powercap/intel-rapl:*``; AMD's newer
  kernels expose theirs there too): every ``package-N`` zone (CPU package) and every
  ``dram`` zone, read by one process per node. Their ``energy_uj`` is root-only since
  Linux 5.10 (CVE-2020-8694): unreadable zones are "not measured" with the reason.
* ``slurm``: the job step's ``ConsumedEnergyRaw`` from ``sstat`` (whole nodes, as the
  site's ``AcctGatherEnergyType`` plugin measures them), read by the first process; only
  inside a Slurm job whose accounting gathers energy.

Every source gives one record entry (:func:`entry`): ``source``, ``covers`` (gpu board,
cpu package, dram, node), ``joules`` (None unless measured), ``status`` (measured, not
measured, implausible), ``reason`` and ``limits`` (resolution, wrap, sampling). A
multi-process run sums each source over its processes (:func:`combine`); one process
that could not read a source makes the sum "not measured".
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from archbench.core import metrics

MEASURED, NOT_MEASURED, IMPLAUSIBLE = "measured", "not measured", "implausible"
STATUSES = (MEASURED, NOT_MEASURED, IMPLAUSIBLE)
COVERS = ("gpu board", "cpu package", "dram", "node")
POWERCAP = Path("/sys/class/powercap")
WIDTH = 4  # values each source adds to the gather: joules, power limit (W), devices, interval (s)
GATHERED = 4 * WIDTH  # the most values a meter adds to the window's gather (nvml, 2 rapl, slurm)

NVML_LIMITS = ("NVML total energy counter of the whole board (GPU and its memory), mJ "
               "resolution, 64-bit (no wrap); the driver refreshes it every few tens of ms, "
               "so a window of a few seconds carries that much error; any other process on "
               "the same GPU is included; a CUDA_VISIBLE_DEVICES index is taken as NVML's "
               "(the same GPU unless a node mixes GPU models or hides some from NVML)")
RAPL_LIMITS = ("Linux powercap RAPL energy_uj, uJ units (the hardware's energy unit is "
               "~15-61 uJ), refreshed about every 1 ms; wraps at max_energy_range_uj "
               "(corrected once: at most one wrap per interval, i.e. windows of minutes at "
               "full power); a model of the hardware on some CPUs, not a meter; covers "
               "everything on the node's packages, not only this run")
SLURM_LIMITS = ("Slurm ConsumedEnergyRaw of the job step from sstat, as the site's "
                "acct_gather_energy plugin samples it (every AcctGatherNodeFreq seconds, often "
                "30 s): the whole nodes of the step, with a window shorter than the sampling "
                "period shown as a step of the counter or not at all")


@dataclass
class Source:
    """One source's counter as a process opened it: ``read()`` -> joules so far (None:
    ``reason`` says why nothing is read), what it covers and its limits."""

    source: str
    covers: str
    limits: str
    read: Callable[[], float] | None = None
    reason: str = ""
    duty: bool = True  # this process reads it (RAPL: one per node; Slurm: the first)
    power_limit_w: float = 0.0  # sum over the devices (NVML's enforced power limit)
    devices: list[str] = field(default_factory=list)
    start_j: float | None = None
    end_j: float | None = None

    def begin(self) -> None:
        """Read the counter at the interval's start (a failure becomes the reason)."""
        self.start_j = self._read()

    def end(self) -> None:
        """Read the counter at the interval's end."""
        self.end_j = self._read() if self.start_j is not None else None

    def _read(self) -> float | None:
        if self.read is None or not self.duty:
            return None
        try:
            return float(self.read())
        except Exception as exc:  # noqa: BLE001 - a sensor that fails is "not measured", why
            self.reason = self.reason or f"reading failed: {type(exc).__name__}: {exc}"[:300]
            return None

    def joules(self) -> float | None:
        """Energy between the two reads, None when not read."""
        if self.start_j is None or self.end_j is None:
            return None
        return self.end_j - self.start_j

    def values(self, interval_s: float) -> list[float]:
        """What this process adds to the run's sum: joules (NaN: could not read; 0: not
        this process's to read), power limit, devices, interval."""
        if not self.duty:
            return [0.0, 0.0, 0.0, 0.0]
        joules = self.joules()
        return [math.nan if joules is None else joules, self.power_limit_w,
                float(len(self.devices)), interval_s]


def entry(source: str, covers: str, *, joules: float | None, status: str, reason: str = "",
          limits: str = "", interval_s: float | None = None, devices: Sequence[str] = ()) -> dict:
    """One record entry of the ``energy`` list."""
    out = {"source": source, "covers": covers, "joules": joules, "status": status,
           "reason": reason, "limits": limits}
    if interval_s is not None:
        out["interval_s"] = interval_s
    if devices:
        out["devices"] = list(devices)
    return out


# --- NVML -------------------------------------------------------------------------------

def _nvml_module():
    import pynvml  # nvidia-ml-py
    return pynvml


def nvml_sources(visible: str | None, *, nvml: Callable[[], object] = _nvml_module) -> list[Source]:
    """The NVML source of a GPU process that was given the GPUs ``visible``
    (``CUDA_VISIBLE_DEVICES``: indexes or GPU- UUIDs; unset: every GPU of the node)."""
    src = Source("nvml", "gpu board", NVML_LIMITS)
    try:
        pynvml = nvml()
    except ImportError:
        src.reason = "nvidia-ml-py (pynvml) is not installed"
        return [src]
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver, no library
        src.reason = f"NVML did not start (no NVIDIA driver on this node?): {exc}"[:300]
        return [src]
    try:
        handles = _nvml_handles(pynvml, visible)
        if not handles:
            src.reason = "no GPU visible to this process"
            return [src]
        names, limit = [], 0.0
        for handle in handles:
            name = _text(pynvml.nvmlDeviceGetName(handle))
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            names.append(f"{name} ({uuid})")
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # NotSupported before Volta
            limit += pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported and friends
        src.reason = f"NVML energy counter not available: {type(exc).__name__}: {exc}"[:300]
        return [src]
    src.devices, src.power_limit_w = names, limit
    src.read = lambda: sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles) / 1000.0
    return [src]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_handles(pynvml, visible: str | None) -> list:
    """NVML handles of the GPUs ``visible`` names (an index is NVML's: both count in PCI
    bus order on a node of one GPU model); MIG instances have no energy counter."""
    if visible is None:
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    handles = []
    for item in (v.strip() for v in visible.split(",")):
        if not item or item == "NoDevFiles":
            continue
        if item.startswith("MIG-"):
            raise RuntimeError(f"{item} is a MIG instance: NVML reads no energy per instance")
        if item.startswith("GPU-"):
            handles.append(pynvml.nvmlDeviceGetHandleByUUID(item))
        else:
            handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(item)))
    return handles


# --- RAPL -------------------------------------------------------------------------------

def rapl_sources(root: Path = POWERCAP, *, duty: bool = True) -> list[Source]:
    """The CPU package and DRAM sources of the node's powercap RAPL zones under ``root``
    (``duty``: this process is the one of its node that reads them)."""
    # intel-rapl:N (packages, psys) and intel-rapl:N:M (their dram, core, uncore); not
    # intel-rapl-mmio:N, the same package counter again through MMIO on some Intel CPUs
    zones = sorted(p for p in root.glob("intel-rapl:*") if (p / "energy_uj").exists()) \
        if root.is_dir() else []
    out = []
    for covers, wanted in (("cpu package", lambda n: n.startswith("package")),
                           ("dram", lambda n: n == "dram")):
        src = Source("rapl", covers, RAPL_LIMITS, duty=duty)
        mine = [z for z in zones if wanted(_zone_name(z))]
        if not zones:
            src.reason = f"no powercap RAPL zones under {root} (no RAPL driver, or not exposed)"
        elif not mine:
            src.reason = f"the node's RAPL exposes no {covers} zone"
        else:
            unreadable = [z.name for z in mine if not os.access(z / "energy_uj", os.R_OK)]
            if unreadable:
                src.reason = (f"{', '.join(unreadable)}/energy_uj readable only by root "
                              "(Linux 5.10 and later, CVE-2020-8694)")
            else:
                src.devices = [f"{z.name} ({_zone_name(z)})" for z in mine]
                try:
                    src.read = _zones_reader(mine)
                except (OSError, ValueError) as exc:
                    src.reason = f"max_energy_range_uj unreadable: {exc}"[:300]
        out.append(src)
    return out


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return ""


def _uj(path: Path) -> int:
    return int(path.read_text().strip())


def _zones_reader(zones: list[Path]) -> Callable[[], float]:
    """A reader of the zones' energy in J since its first read, each zone unwrapped
    apart (at most one wrap between two reads)."""
    last: dict[Path, int] = {}
    total = [0.0]
    ranges = {z: _uj(z / "max_energy_range_uj") for z in zones}

    def read() -> float:
        for z in zones:
            now = _uj(z / "energy_uj")
            if z in last:
                step = now - last[z]
                total[0] += (step + ranges[z] if step < 0 else step) / 1e6
            last[z] = now
        return total[0]
    return read


# --- Slurm ------------------------------------------------------------------------------

def slurm_sources(env: dict | None = None, *, duty: bool = True) -> list[Source]:
    """The Slurm job step's consumed energy (sstat), inside a Slurm job."""
    env = os.environ if env is None else env
    src = Source("slurm", "node", SLURM_LIMITS, duty=duty)
    job = env.get("SLURM_JOB_ID")
    if not job:
        src.reason = "not a Slurm job"
    elif not shutil.which("sstat"):
        src.reason = "Slurm's sstat is not on this node's PATH"
    else:
        step = env.get("SLURM_STEP_ID")
        src.read = lambda: _sstat_joules(f"{job}.{step}" if step else f"{job}.batch")
    return [src]


def _sstat_joules(step: str) -> float:
    out = subprocess.run(["sstat", "--noheader", "--parsable2", "--format=ConsumedEnergyRaw",
                          "-j", step], capture_output=True, text=True, timeout=20, check=True).stdout
    values = [int(v) for v in out.split() if v.strip().isdigit()]
    if not values:
        raise RuntimeError(f"sstat shows no ConsumedEnergyRaw for step {step}: the site's "
                           "Slurm gathers no energy (AcctGatherEnergyType none)")
    return float(sum(values))


# --- a meter over the window --------------------------------------------------------------

class Meter:
    """The sources of one process, read at :meth:`start` and :meth:`stop`."""

    def __init__(self, sources: Sequence[Source]):
        self.sources = list(sources)
        self.t0 = self.t1 = 0.0

    @classmethod
    def open(cls, device: str, *, rank: int = 0, local_rank: int = 0,
             root: Path = POWERCAP, env: dict | None = None) -> Meter:
        """The meter of a process of a ``device`` (gpu|cpu) run: NVML for a GPU run, RAPL
        read by local rank 0 of each node, Slurm read by rank 0."""
        env = os.environ if env is None else env
        sources = nvml_sources(env.get("CUDA_VISIBLE_DEVICES")) if device == "gpu" else []
        sources += rapl_sources(root, duty=local_rank == 0)
        sources += slurm_sources(env, duty=rank == 0)
        return cls(sources)

    def start(self) -> Meter:
        """Read every counter; the interval starts."""
        for src in self.sources:
            src.begin()
        self.t0 = time.perf_counter()
        return self

    def stop(self) -> list[float]:
        """Read every counter again; this process's values for :func:`combine`."""
        self.t1 = time.perf_counter()
        for src in self.sources:
            src.end()
        return self.values()

    @property
    def interval_s(self) -> float:
        """Seconds between the two reads."""
        return self.t1 - self.t0

    def values(self) -> list[float]:
        """:data:`WIDTH` values per source (:meth:`Source.values`), in source order."""
        return [v for src in self.sources for v in src.values(self.interval_s)]


def combine(meter: Meter, rows: Sequence[Sequence[float]]) -> list[dict]:
    """The record's ``energy`` entries: each source of the writing process's ``meter``
    summed over every process's gathered :meth:`Meter.values` (``rows``), with the GPU
    sense check (more than 0 J, at most the boards' power limit x the interval)."""
    out = []
    for i, src in enumerate(meter.sources):
        cols = [row[i * WIDTH:(i + 1) * WIDTH] for row in rows]
        joules = sum(c[0] for c in cols)
        limit = sum(c[1] for c in cols)
        devices = int(sum(c[2] for c in cols))
        interval = max((c[3] for c in cols), default=meter.interval_s) or meter.interval_s
        base = dict(limits=src.limits, interval_s=interval, devices=src.devices)
        if not math.isfinite(joules):
            mine = src.joules()
            reason = src.reason or ("read here, but not by every process of the run"
                                    if mine is not None else "not read")
            out.append(entry(src.source, src.covers, joules=None, status=NOT_MEASURED,
                             reason=reason, **base))
            continue
        status, reason = MEASURED, ""
        if src.source == "nvml":
            if len(rows) > 1:
                base["devices"] = [*src.devices, f"{devices - len(src.devices)} GPU(s) of other processes"] \
                    if devices > len(src.devices) else src.devices
            reason = sense(joules, limit, interval)
            status = IMPLAUSIBLE if reason else MEASURED
        elif joules < 0 or (src.source == "slurm" and joules == 0):
            status = NOT_MEASURED if src.source == "slurm" else IMPLAUSIBLE
            reason = ("no Slurm energy sample fell in the window" if src.source == "slurm"
                      else f"the counter went back by {-joules:.3g} J (more than one wrap?)")
        out.append(entry(src.source, src.covers, joules=joules if status != NOT_MEASURED else None,
                         status=status, reason=reason, **base))
    return out


def sense(joules: float, power_limit_w: float, interval_s: float) -> str:
    """Why ``joules`` of GPU boards whose enforced power limits sum to ``power_limit_w``
    cannot be their energy over ``interval_s`` ("" when they can): not above 0, or above
    the power limit x the interval."""
    if joules <= 0:
        return f"{joules:.6g} J over {interval_s:.3g} s: a busy GPU's energy is above 0"
    ceiling = power_limit_w * interval_s
    if power_limit_w and joules > ceiling:
        return (f"{joules:.6g} J over {interval_s:.3g} s is more than the power limit "
                f"{power_limit_w:.0f} W x the interval = {ceiling:.6g} J")
    return ""


# What a sensor can report at most, per second of its interval: a GPU board's power
# (above every shipping board: B200 1,000 W, GB200's GPU 1,200 W) and a node's (above an
# 8-socket server's packages and memory and a DGX B200's 14.3 kW): a reading above is no
# measurement, whatever its status says.
MAX_BOARD_W = 2_000.0
MAX_NODE_W = 20_000.0
# relative: the interval and the window are timed by different processes' clocks (the
# window is the longest worker's, the interval the writer's reads around the barriers)
COVER_SLACK = 0.01


def record_problem(record: dict, window_s: float | None) -> str:
    """"" when the ``energy`` entries of an ok record make sense, else one line naming the
    entry: each (source, covers) one of :data:`KEYS` and given once, an NVML board only on a
    GPU run, and a measured reading above 0 J, over an interval that covers the measured
    window (``window_s``), and at most :data:`MAX_BOARD_W` per GPU (or :data:`MAX_NODE_W`
    per node) x the interval."""
    seen: dict[tuple, int] = {}
    for i, e in enumerate(record.get("energy") or ()):
        where, pair = f"energy.{i}", (e.get("source"), e.get("covers"))
        if pair not in KEYS:
            return f"{where}: {pair[0]} does not measure a {pair[1]}"
        if pair in seen:
            return (f"{where}: a second {pair[0]} {pair[1]} reading (entry {seen[pair]} is the "
                    "first): one reading per source and scope")
        seen[pair] = i
        if pair[0] == "nvml" and record.get("device") != "gpu":
            return f"{where}: an NVML GPU board reading in a {record.get('device') or 'cpu'} run"
        if e.get("status") != MEASURED:
            continue
        joules, interval = e.get("joules"), e.get("interval_s")
        if not (isinstance(joules, (int, float)) and 0 < joules < math.inf):
            return f"{where}.joules: {joules!r} J measured: a measured energy is above 0 J"
        if interval is not None and window_s is not None and interval < window_s * (1 - COVER_SLACK):
            return (f"{where}.interval_s: {interval:g} s does not cover the measured window "
                    f"of {window_s:g} s")
        seconds = interval if interval is not None else window_s
        if seconds is None or seconds <= 0:
            continue
        units, each, what = _units(record, pair[1])
        if joules > units * each * seconds:
            return (f"{where}.joules: {joules:.6g} J over {seconds:.3g} s is {joules / seconds:.3g} W, "
                    f"above {units} {what}{'s' * (units > 1)} x {each:,.0f} W")
    return ""


def _units(record: dict, covers: str) -> tuple[int, float, str]:
    """(how many, the most watts each, what) a ``covers`` reading of ``record`` sums over:
    its GPUs for a board (``gpus``, else ``workers``), else its nodes."""
    if covers == "gpu board":
        return max(int(record.get("gpus") or record.get("workers") or 1), 1), MAX_BOARD_W, "GPU board"
    return max(int(record.get("nodes") or 1), 1), MAX_NODE_W, "node"


def joules_of(entries: Sequence[dict] | None, source: str, covers: str) -> float | None:
    """The measured joules of ``source``/``covers`` in a record's ``energy`` entries."""
    for e in entries or ():
        if e.get("source") == source and e.get("covers") == covers and e.get("status") == MEASURED:
            return e.get("joules")
    return None


# --- the tidy table's columns --------------------------------------------------------------

# (source, covers) -> the short key of its tidy-table columns (energy_<key>_j, ..._j_per_img)
KEYS = {("nvml", "gpu board"): "nvml_gpu", ("rapl", "cpu package"): "rapl_package",
        ("rapl", "dram"): "rapl_dram", ("slurm", "node"): "slurm_node"}


def columns(record: dict) -> dict:
    """A record's energy as tidy-table columns: per source (:data:`KEYS`) the measured
    joules ``energy_<key>_j`` and joules per image of the window ``energy_<key>_j_per_img``
    (joules / the window's images; missing unless measured), and ``energy_status``: each
    source's status with the reason where not measured, the parts of one source that share
    them named once ("nvml gpu board: measured; rapl cpu package, dram: not measured
    (...)"); empty for a record without entries."""
    entries = record.get("energy") or []
    images = ((record.get("metrics") or {}).get("images") or {}).get("value")
    out: dict = {}
    for key in KEYS.values():
        out[f"energy_{key}_j"] = None
        out[f"energy_{key}_j_per_img"] = None
    states: dict[tuple, list[str]] = {}  # (source, status, reason) -> what it covers
    for e in entries:
        key = KEYS.get((e.get("source"), e.get("covers")))
        state = e.get("status", "")
        states.setdefault((e.get("source"), state, e.get("reason") or ""), []).append(str(e.get("covers")))
        if key is None or state != MEASURED or e.get("joules") is None:
            continue
        out[f"energy_{key}_j"] = e["joules"]
        out[f"energy_{key}_j_per_img"] = metrics.joules_per_image(e["joules"], images) if images else None
    out["energy_status"] = "; ".join(
        f"{src} {', '.join(covers)}: {state}" + (f" ({reason})" if reason else "")
        for (src, state, reason), covers in states.items()) or None
    return out
