"""Derived tables of the training experiments (DESIGN.md experiments 1-6).

Each function takes the tidy measurements table (or its :func:`summarise` result) and
returns a table with fixed columns, sorted; no data gives an empty table with headers.
A value that cannot be computed because a run failed stays empty and the row's
``status`` names the failure ("oom", "baseline timeout", "real failed", ...).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from archbench import metrics
from archbench.tables.common import (
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
    "experiment", "system", "arch", "model", "data", "vendor_library", "vendor_library_enabled",
    "batch_per_process", "inter_threads", "threads", "n", "img_s", "img_s_min", "img_s_max",
    "error", "img_s_1thread",
    "efficiency", "status",
)
VENDOR_COLUMNS = (
    "experiment", "system", "vendor_library", "model", "data", "strategy", "nodes",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process", "img_s_on",
    "img_s_off", "speedup", "status",
)
HYBRID_COLUMNS = (
    "experiment", "system", "model", "data", "vendor_library_enabled", "configuration",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process", "global_batch",
    "n", "img_s", "std", "min", "max", "error", "spread_flag", "n_failed", "status",
)
INTER_INTRA_COLUMNS = (
    "experiment", "system", "model", "data", "vendor_library_enabled", "batch_per_process",
    "variant", "inter_threads", "best_intra_threads", "img_s", "error", "n_configurations",
    "status",
)
SCALING_COLUMNS = (
    "experiment", "system", "model", "data", "strategy", "vendor_library_enabled",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process",
    "scaling_unit", "count", "nodes", "workers", "global_batch", "n", "img_s", "error",
    "baseline_count", "img_s_baseline", "speedup", "efficiency", "status",
)
HEATMAP_INDEX = (
    "experiment", "system", "model", "data", "strategy", "vendor_library_enabled",
    "processes_per_node", "intra_threads", "inter_threads", "batch_per_process", "scaling_unit",
)
IO_COLUMNS = (
    "experiment", "system", "model", "strategy", "vendor_library_enabled", "processes_per_node",
    "intra_threads", "inter_threads", "batch_per_process", "nodes", "workers",
    "img_s_synthetic", "img_s_real", "io_overhead_percent", "status",
)

HOROVOD_TUNING_COLUMNS = (
    "experiment", "system", "model", "data", "vendor_library_enabled", "nodes",
    "processes_per_node", "intra_threads", "batch_per_process", "global_batch",
    "cycle_time_ms", "fusion_threshold_mb", "allreduces_per_step", "n", "img_s", "error",
    "relative_to_best", "status",
)

LAYOUT = ("processes_per_node", "intra_threads")  # vary with the workers of a one-node series


def _train(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["kind"].eq("train").fillna(False).astype(bool)]


def thread_efficiency(df: pd.DataFrame) -> pd.DataFrame:
    """Thread scaling of one process: img/s per thread count and e_t = p_t / (t * p_1)
    (:func:`metrics.thread_efficiency`), per experiment, system, model, data, vendor
    library on/off, batch size and inter-op threads. ``threads`` 0 (TensorFlow decides)
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
    return sort_rows(s[list(THREAD_EFFICIENCY_COLUMNS)], THREAD_EFFICIENCY_COLUMNS[:10])


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
    p["speedup"] = metrics.vendor_speedup(p["img_s_on"], p["img_s_off"])
    p["status"] = pair_status(p["status_1"], p["status_2"], labels=("on", "off"))
    return sort_rows(p[list(VENDOR_COLUMNS)], VENDOR_COLUMNS[:11])


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
    s["img_s"] = s["value"]
    order = ("experiment", "system", "model", "data", "vendor_library_enabled",
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


def best_inter_intra(df: pd.DataFrame) -> pd.DataFrame:
    """Inter/intra-op sweep (experiment 3): per inter-op thread count, the intra-op thread
    count with the highest mean img/s (per system, model, data, vendor flag, batch and
    variant -- the variant hash separates e.g. MKL settings on/off)."""
    s = of_type(_train(summary_of(df)), "inter_intra_best")
    if s.empty:
        return empty(INTER_INTRA_COLUMNS)
    s = sort_rows(s, KEYS)
    s["best_intra_threads"] = s["intra_threads"]
    s["img_s"] = s["value"]
    keys = [k for k in KEYS if k != "intra_threads"]
    out = best_per_group(s, keys=keys, value="img_s", blank=("best_intra_threads", "error"))[list(INTER_INTRA_COLUMNS)]
    return sort_rows(out, INTER_INTRA_COLUMNS[:8])


def node_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Multi-node scaling (experiments 4, 5): S_n = P_n / P_1 and E_n = P_n / (n * P_1)
    (:func:`metrics.speedup`, :func:`metrics.parallel_efficiency`).

    The unit ``n`` counts nodes, or workers for parameter-server runs and for series whose
    node count does not change (e.g. imported worker scaling). The baseline is the
    smallest count of the series (normally 1); with baseline b, S = P_n / P_b and
    E = P_n / ((n / b) * P_b). Imported series without an experiment type are kept when
    they have at least two counts."""
    s = _train(summary_of(df))
    s = of_type(s, "node_scaling", fallback=pd.Series(True, index=s.index))
    if s.empty:
        return empty(SCALING_COLUMNS)
    keys = [k for k in KEYS if k not in ("nodes", "workers", "global_batch")]
    # on one node, a series over processes (ppn sweep: threads change with them) is one
    # series over workers, its layout columns left out of the series' identity
    fixed = [k for k in keys if k not in LAYOUT]
    one_node = s.groupby(group_ids(s, fixed))["nodes"].transform("nunique").eq(1)
    over_processes = one_node & s["processes_per_node"].eq(s["workers"]).fillna(False)
    for column in LAYOUT:
        s[f"_{column}"] = s[column].mask(over_processes.astype(bool))
    keys = fixed + [f"_{column}" for column in LAYOUT]
    s["_gid"] = group_ids(s, keys)
    varies_nodes = s.groupby("_gid")["nodes"].transform("nunique") > 1
    by_workers = s["strategy"].eq("parameter_server").fillna(False) | ~varies_nodes
    s["scaling_unit"] = np.where(by_workers, "workers", "nodes")
    s["count"] = s["workers"].where(by_workers, s["nodes"]).astype("Int64")
    typed = s["experiment_type"].notna()
    s = s[typed | (s.groupby("_gid")["count"].transform("nunique") > 1)]
    if s.empty:
        return empty(SCALING_COLUMNS)
    s = with_baseline(s.drop(columns="_gid"), "count", keys + ["scaling_unit"])
    s["img_s"] = s["value"]
    s["img_s_baseline"] = s["baseline_value"]
    relative = s["count"].astype(float) / s["baseline_count"].astype(float)
    s["speedup"] = metrics.speedup(s["value"], s["baseline_value"])
    s["efficiency"] = metrics.parallel_efficiency(s["value"], relative, s["baseline_value"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "baseline")
    order = SCALING_COLUMNS[:11] + ("count",)
    return sort_rows(s[list(SCALING_COLUMNS)], order)


def efficiency_heatmap(df: pd.DataFrame) -> pd.DataFrame:
    """Parallel efficiency as a heat-map table: one row per scaling series (system, data,
    ...), one column per node (or worker) count; a failed cell holds its status."""
    table = node_scaling(df)
    if table.empty:
        return empty(HEATMAP_INDEX)
    table = table.copy()
    table["cell"] = table["efficiency"].astype(object).where(
        table["efficiency"].notna(), table["status"])
    counts = sorted(int(c) for c in table["count"].dropna().unique())
    index = list(HEATMAP_INDEX)
    over_processes = (table["scaling_unit"].eq("workers") & table["nodes"].eq(1)
                      & table["processes_per_node"].eq(table["workers"])).fillna(False)
    series = table[index].copy()
    for column in LAYOUT:  # one row per series over processes (see node_scaling)
        series[column] = series[column].mask(over_processes.astype(bool))
    table["_gid"] = group_ids(series, index)
    rows = series.assign(_gid=table["_gid"]).drop_duplicates("_gid").set_index("_gid")[index]
    for count in counts:
        part = table[table["count"] == count].drop_duplicates("_gid").set_index("_gid")
        rows[str(count)] = part["cell"].reindex(rows.index)
    return sort_rows(rows.reset_index(drop=True), index)


def io_overhead(df: pd.DataFrame) -> pd.DataFrame:
    """I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic * 100
    (:func:`metrics.io_overhead_percent`) for every configuration run with both inputs."""
    s = _train(summary_of(df))
    s = s[s["data"].notna()]
    if s.empty:
        return empty(IO_COLUMNS)
    p = pair(s, "data", first="synthetic", second="real", keys=KEYS)
    p = p[p["status_1"].notna() & p["status_2"].notna()]  # both inputs were run
    if p.empty:
        return empty(IO_COLUMNS)
    p["img_s_synthetic"], p["img_s_real"] = p.pop("value_1"), p.pop("value_2")
    p["io_overhead_percent"] = metrics.io_overhead_percent(p["img_s_synthetic"], p["img_s_real"])
    p["status"] = pair_status(p["status_1"], p["status_2"], labels=("synthetic", "real"))
    return sort_rows(p[list(IO_COLUMNS)], IO_COLUMNS[:11])


def horovod_tuning(df: pd.DataFrame) -> pd.DataFrame:
    """Horovod tuning (experiment 6): img/s per HOROVOD_CYCLE_TIME x fusion threshold with
    the allreduce operations a step needed (counted in Horovod's timeline, so fused
    batches count once) and img/s relative to the best setting of the same configuration."""
    s = of_type(_train(summary_of(df)), "horovod_tuning")
    if s.empty:
        return empty(HOROVOD_TUNING_COLUMNS)
    s["cycle_time_ms"] = s["horovod_cycle_time_ms"]
    s["fusion_threshold_mb"] = s["horovod_fusion_threshold_bytes"] / 2**20
    s["img_s"] = s["value"]
    layout = ["experiment", "system", "model", "data", "vendor_library_enabled", "nodes",
              "processes_per_node", "intra_threads", "inter_threads", "batch_per_process"]
    best = s.groupby(group_ids(s, layout))["img_s"].transform("max")
    s["relative_to_best"] = s["img_s"] / best
    return sort_rows(s[list(HOROVOD_TUNING_COLUMNS)], HOROVOD_TUNING_COLUMNS[:12])
