"""Derived tables of the training experiments (docs/experiments.md, experiments 1-6).

Each function takes the tidy measurements table (or its :func:`summarise` result) and
returns a table with fixed columns, sorted; no data gives an empty table with headers.
A value that cannot be computed because a run failed stays empty and the row's
``status`` names the failure ("oom", "baseline timeout", "real failed", ...).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from archbench.core.fields import EVERY_TABLE
from archbench.core import metrics
from archbench.results.tables.common import (
    of_kind,
    HAS_MEAN,
    KEYS,
    derived_status,
    empty,
    group_ids,
    of_type,
    pair,
    pair_status,
    sort_rows,
    summary_of,
    with_baseline,
)

THREAD_EFFICIENCY_COLUMNS = (
    "experiment", "system", "arch", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library", "vendor_library_enabled",
    "batch_per_process", "inter_threads", "threads", "statistic", "n", "img_s", "img_s_min",
    "img_s_max",
    "error", "img_s_1thread",
    "efficiency", "host_busy", "status",
)
VENDOR_COLUMNS = (
    "experiment", "system", "vendor_library", "framework", *EVERY_TABLE,
    "model", "data", "strategy", "nodes",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process",
    "parameter_servers", "variant", "statistic", "img_s_on", "img_s_off", "speedup", "host_busy",
    "status",
)
HYBRID_COLUMNS = (
    "experiment", "system", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library_enabled", "configuration",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process", "global_batch",
    "statistic", "n", "img_s", "img_s_min", "img_s_max", "std", "error", "spread_flag", "host_busy",
    "short_window_flag", "n_failed",
    "status",
)

HOROVOD_TUNING_COLUMNS = (
    "experiment", "system", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library_enabled", "nodes",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process", "global_batch",
    "cycle_time_ms", "fusion_threshold_mb", "allreduces_per_step", "statistic", "n", "img_s",
    "img_s_min", "img_s_max", "error", "relative_to_best", "host_busy", "status",
)


def _train(summary: pd.DataFrame) -> pd.DataFrame:
    return of_kind(summary, "train")


def thread_efficiency(df: pd.DataFrame) -> pd.DataFrame:
    """Thread scaling of one process: img/s per thread count and e_t = p_t / (t * p_1)
    (:func:`metrics.thread_efficiency`), per experiment, system, framework, model, data,
    vendor library on/off, batch size and inter-op threads. ``threads`` 0 (TensorFlow decides)
    is left out; without a run at 1 thread the efficiency is empty ("no baseline")."""
    s = _train(summary_of(df))
    single = s["nodes"].eq(1) & s["processes_per_node"].eq(1)
    s = of_type(s, "thread_efficiency", fallback=single)
    s = s[s["intra_threads"].fillna(0) > 0]
    if s.empty:
        return empty(THREAD_EFFICIENCY_COLUMNS)
    keys = [k for k in KEYS if k != "intra_threads"]
    s = with_baseline(s, "intra_threads", keys, value=1)
    s["threads"] = s["intra_threads"]
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    s["img_s_1thread"] = s["baseline_value"]
    s["efficiency"] = metrics.thread_efficiency(
        s["value"], s["threads"].astype(float), s["baseline_value"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "baseline")
    return sort_rows(s[list(THREAD_EFFICIENCY_COLUMNS)], THREAD_EFFICIENCY_COLUMNS[:14])


def vendor_speedup(df: pd.DataFrame) -> pd.DataFrame:
    """Vendor-library speedup = img/s with / img/s without (:func:`metrics.vendor_speedup`)
    for every pair of configurations that differ only in the vendor library flag."""
    s = _train(summary_of(df))
    s = s[s["vendor_library_enabled"].notna()]
    if s.empty:
        return empty(VENDOR_COLUMNS)
    p = pair(s, "vendor_library_enabled", first=True, second=False, keys=KEYS)
    p = p[p["status_1"].notna() & p["status_2"].notna()]  # run both with and without
    if p.empty:
        return empty(VENDOR_COLUMNS)
    p["img_s_on"], p["img_s_off"] = p.pop("value_1"), p.pop("value_2")
    p["statistic"] = s["statistic"].iloc[0]
    p["speedup"] = metrics.vendor_speedup(p["img_s_on"], p["img_s_off"])
    p["status"] = pair_status(p["status_1"], p["status_2"], labels=("on", "off"))
    return sort_rows(p[list(VENDOR_COLUMNS)], VENDOR_COLUMNS[:15])


def hybrid_configurations(df: pd.DataFrame) -> pd.DataFrame:
    """Processes x threads filling a node (experiment 2): one row per configuration
    ``<processes>x<threads>`` with its repetition statistics."""
    s = _train(summary_of(df))
    fallback = s["nodes"].eq(1) & s["processes_per_node"].gt(1)
    s = of_type(s, "hybrid_configurations", fallback=fallback)
    if s.empty:
        return empty(HYBRID_COLUMNS)
    s["configuration"] = (s["processes_per_node"].astype(str) + "x"
                          + s["intra_threads"].astype(str))
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    order = ("experiment", "system", "framework", *EVERY_TABLE,
             "model", "data", "vendor_library_enabled",
             "processes_per_node", "intra_threads", "inter_threads", "batch_per_process")
    return sort_rows(s[list(HYBRID_COLUMNS)], order)


def best_per_group(frame: pd.DataFrame, *, keys: Sequence[str], value: str,
                   blank: Sequence[str]) -> pd.DataFrame:
    """Per group of ``keys``, the row with the highest ``value`` (ties: the first in table
    order), with ``n_configurations`` and ``n_failed_configurations``; a group without any
    value keeps its first row with ``blank`` columns emptied and status "all failed"."""
    frame = frame.reset_index(drop=True).assign(_gid=group_ids(frame, keys))
    frame["_order"] = np.arange(len(frame))
    ranked = frame.sort_values(["_gid", value, "_order"], ascending=[True, False, True],
                               na_position="last", kind="mergesort")
    best = ranked.drop_duplicates("_gid").set_index("_gid")
    sizes = frame.groupby("_gid").size()
    failed = (~frame["status"].isin(HAS_MEAN)).groupby(frame["_gid"]).sum()
    best["n_configurations"] = sizes.reindex(best.index)
    best["n_failed_configurations"] = failed.reindex(best.index).astype(int)
    none = best[value].isna()
    best["status"] = np.where(none, "all failed", "ok")
    for name in blank:
        best[name] = best[name].mask(none)  # keeps the column's dtype (Int64 stays numeric)
    return best.reset_index(drop=True)


def horovod_tuning(df: pd.DataFrame) -> pd.DataFrame:
    """Horovod tuning (experiment 6): img/s per HOROVOD_CYCLE_TIME x fusion threshold with
    the allreduce operations a step needed (counted in Horovod's timeline, so fused
    batches count once) and img/s relative to the best setting of the same configuration."""
    s = of_type(_train(summary_of(df)), "horovod_tuning")
    if s.empty:
        return empty(HOROVOD_TUNING_COLUMNS)
    s["cycle_time_ms"] = s["horovod_cycle_time_ms"]
    s["fusion_threshold_mb"] = s["horovod_fusion_threshold_bytes"] / 2**20
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    layout = ["experiment", "system", "framework", *EVERY_TABLE,
              "model", "data", "vendor_library_enabled",
              "nodes", "processes_per_node", "intra_threads", "inter_threads", "batch_per_process"]
    best = s.groupby(group_ids(s, layout))["img_s"].transform("max")
    s["relative_to_best"] = s["img_s"] / best
    return sort_rows(s[list(HOROVOD_TUNING_COLUMNS)], HOROVOD_TUNING_COLUMNS[:16])
