"""Derived tables of the HPC kernels (experiment 7) and fraction of peak.

Kernel records carry their rate as ``throughput`` + ``throughput_unit`` (a flop rate for
matmul, CG and FFT, computed by the kernel with the flop counts of :mod:`archbench.core.metrics`;
a bandwidth for STREAM). Units are converted to GFLOP/s and GB/s here.
"""

from __future__ import annotations

import pandas as pd

from archbench.core import metrics
from archbench.workloads.kernels import KERNELS
from archbench.workloads.kernels.spec import BANDWIDTH
from archbench.results.tables.common import (
    of_kind,
    KEYS,
    derived_status,
    empty,
    sort_rows,
    summary_of,
    with_baseline,
)

FLOP_UNITS = {"flop/s": 1e-9, "kflop/s": 1e-6, "mflop/s": 1e-3, "gflop/s": 1.0,
              "tflop/s": 1e3, "pflop/s": 1e6}
BANDWIDTH_UNITS = {"b/s": 1e-9, "kb/s": 1e-6, "mb/s": 1e-3, "gb/s": 1.0, "tb/s": 1e3,
                   "kib/s": 2**10 / 1e9, "mib/s": 2**20 / 1e9, "gib/s": 2**30 / 1e9}

GFLOPS_COLUMNS = (
    "experiment", "system", "framework", "kernel", "device", "problem_size", "tile_size", "nodes", "workers",
    "gpus_per_node", "statistic", "n",
    "gflops", "gflops_min", "gflops_max", "error", "baseline_workers", "gflops_baseline",
    "speedup", "host_busy", "status",
)
STREAM_COLUMNS = (
    "experiment", "system", "framework", "kernel", "device", "problem_size", "tile_size", "nodes", "workers",
    "statistic", "n",
    "bandwidth_gb_s", "bandwidth_min", "bandwidth_max", "error", "unit", "host_busy", "status",
)
PEAK_COLUMNS = (
    "experiment", "system", "kind", "framework", "model", "kernel", "problem_size", "batch_per_process",
    "nodes", "workers", "intra_threads", "achieved_gflops", "peak_gflops",
    "fraction_of_peak", "status",
)


def _factor(units: pd.Series, table: dict[str, float]) -> pd.Series:
    """Conversion factor of every unit (NaN for units not in ``table``)."""
    key = units.astype("string").str.strip().str.lower().str.replace(" ", "", regex=False)
    return key.map(table).astype(float)


def measures_bandwidth(kernel: object) -> bool:
    """Whether registered kernel ``kernel`` measures a bandwidth (its spec's ``measures``)."""
    spec = KERNELS.get(kernel) if isinstance(kernel, str) else None
    return spec is not None and spec.measures == BANDWIDTH


def _kernels(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kernel configurations split into (flop-rate, bandwidth) ones. A configuration whose
    runs all failed has no unit; it goes by what its kernel's spec measures (kernels not
    registered count as flop kernels)."""
    s = of_kind(summary, "kernel")
    flop = _factor(s["unit"], FLOP_UNITS)
    band = _factor(s["unit"], BANDWIDTH_UNITS)
    by_name = s["kernel"].map(measures_bandwidth).astype(bool)
    unknown = flop.isna() & band.isna()
    is_band = band.notna() | (unknown & by_name)
    is_flop = flop.notna() | (unknown & ~by_name)
    s["_factor"] = flop.where(flop.notna(), band)
    return s[is_flop.to_numpy()].copy(), s[is_band.to_numpy()].copy()


def _scaled(s: pd.DataFrame, prefix: str) -> pd.DataFrame:
    factor = s["_factor"].fillna(1.0)
    s[prefix] = s["value"] * factor
    s[f"{prefix}_min"] = s["min"] * factor
    s[f"{prefix}_max"] = s["max"] * factor
    s["error"] = s["error"] * factor
    return s


def kernel_gflops(df: pd.DataFrame) -> pd.DataFrame:
    """GFLOP/s of the flop kernels per worker count and problem size, with the speedup
    from the smallest worker count of the series (:func:`metrics.speedup`); CPU and GPU
    runs (``device``) are series of their own."""
    s, _ = _kernels(summary_of(df))
    if s.empty:
        return empty(GFLOPS_COLUMNS)
    s = _scaled(s, "gflops")
    # a series varies the workers (and with them nodes, processes per node and threads; on
    # GPUs, one worker per GPU, the GPUs per node and in all)
    keys = [k for k in KEYS if k not in ("workers", "nodes", "processes_per_node", "intra_threads",
                                         "gpus", "gpus_per_node")]
    # the baseline in GFLOP/s: rows of one series may report different units
    s = with_baseline(s.assign(value=s["gflops"]), "workers", keys)
    s["gflops_baseline"] = s["baseline_value"]
    s["speedup"] = metrics.speedup(s["gflops"], s["gflops_baseline"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "baseline")
    order = ("experiment", "system", "framework", "kernel", "problem_size", "tile_size", "workers",
             "nodes")
    return sort_rows(s[list(GFLOPS_COLUMNS)], order)


def stream_bandwidth(df: pd.DataFrame) -> pd.DataFrame:
    """STREAM bandwidth in GB/s per array or message size (``problem_size``)."""
    _, s = _kernels(summary_of(df))
    if s.empty:
        return empty(STREAM_COLUMNS)
    s = _scaled(s, "bandwidth_gb_s")
    s = s.rename(columns={"bandwidth_gb_s_min": "bandwidth_min",
                          "bandwidth_gb_s_max": "bandwidth_max"})
    s["unit"] = "GB/s"
    order = ("experiment", "system", "framework", "kernel", "workers", "nodes", "problem_size",
             "tile_size")
    return sort_rows(s[list(STREAM_COLUMNS)], order)


def peak_gflops(peak: dict, system: str) -> float:
    """Measured peak GFLOP/s of one node of ``system`` from the config ``peak:`` mapping
    ({system: {gflops: x, unit: GFLOP/s}}); NaN when not given."""
    entry = (peak or {}).get(system)
    if entry is None:
        return float("nan")
    if not isinstance(entry, dict) or "gflops" not in entry:
        raise ValueError(f"peak.{system}: expected a mapping with 'gflops'")
    value = entry["gflops"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"peak.{system}.gflops: expected a positive number, got {value!r}")
    unit = str(entry.get("unit", "GFLOP/s")).strip().lower().replace(" ", "")
    if unit not in FLOP_UNITS:
        raise ValueError(f"peak.{system}.unit: unknown flop-rate unit {entry.get('unit')!r}")
    return float(value) * FLOP_UNITS[unit]


def fraction_of_peak(df: pd.DataFrame, peak: dict | None = None) -> pd.DataFrame:
    """Fraction of peak = achieved GFLOP/s / measured peak (:func:`metrics.fraction_of_peak`).

    Achieved: a flop kernel's rate, or for training img/s * ``flops_per_image`` / 1e9 (the
    record metric ``flops_per_image``, when present). The peak is the per-node value from
    ``peak`` times the run's nodes; systems without a peak keep the achieved rate only.
    """
    s = summary_of(df)
    flop, _ = _kernels(s)
    flop["achieved_gflops"] = flop["value"] * flop["_factor"].fillna(1.0)
    train = of_kind(s, "train")
    train = train[train["flops_per_image"].notna()].copy()
    train["achieved_gflops"] = metrics.gflops(train["value"] * train["flops_per_image"], 1.0)
    rows = pd.concat([flop, train], ignore_index=True) if len(flop) or len(train) else flop
    if rows.empty:
        return empty(PEAK_COLUMNS)
    per_node = rows["system"].map(lambda name: peak_gflops(peak or {}, name)).astype(float)
    rows["peak_gflops"] = per_node * rows["nodes"].astype(float)
    rows["fraction_of_peak"] = metrics.fraction_of_peak(rows["achieved_gflops"], rows["peak_gflops"])
    rows["status"] = rows["status"].astype(object)
    rows["achieved_gflops"] = rows["achieved_gflops"].astype(float)
    rows.loc[rows["peak_gflops"].isna() & rows["status"].isin(["ok", "partial"]), "status"] = "no peak"
    return sort_rows(rows[list(PEAK_COLUMNS)], PEAK_COLUMNS[:11])
