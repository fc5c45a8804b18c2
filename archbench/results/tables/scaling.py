"""Scaling series (docs/experiments.md, experiments 4 and 5; CSCS 2017 Tables 1-3, CESGA
2018 Table 3).

A scaling series is data, not a guess. Every row carries its ``scaling_unit`` (nodes,
workers or GPUs); its series is every configuration key except

- the counts that grow with the unit (:data:`GROWS_WITH`): with nodes, the node, worker
  and GPU totals and the global batch (the per-node layout -- processes or GPUs per node,
  threads per process -- stays part of the series); with workers or GPUs, also how they
  are packed on nodes (processes and GPUs per node), since the unit counts them all;
- the settings tried at each size (:data:`CHOICES`: parameter-server count, variable
  update), of which the best one per size is kept, as CSCS 2017 reports them.

The baseline is the smallest count present in the series (b): S = P_n / P_b and
E = P_n / ((n / b) P_b) (:func:`metrics.speedup`, :func:`metrics.parallel_efficiency`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archbench.core import metrics
from archbench.workloads.training import frameworks
from archbench.core.fields import DEFAULT_FRAMEWORK, EVERY_TABLE
from archbench.results.tables.common import (
    of_kind,
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

UNITS = ("nodes", "workers", "gpus")  # a unit's count is the column of the same name
_PACKING = ("nodes", "workers", "gpus", "global_batch", "processes_per_node", "gpus_per_node")
GROWS_WITH = {"nodes": ("nodes", "workers", "gpus", "global_batch"),
              "workers": _PACKING, "gpus": _PACKING}
CHOICES = ("parameter_servers", "variable_update")
# records written before the unit was a field: the unit their experiment type scales
LEGACY_UNITS = {"node_scaling": "nodes", "ppn_sweep": "workers"}

# the series label: what tells series of one experiment, system and model apart
FACETS = ("experiment", "system", "model")
_LABELS = {
    "data": "{} data", "strategy": "{}", "processes_per_node": "{} ppn",
    "gpus_per_node": "{} GPUs/node", "intra_threads": "{} threads",
    "inter_threads": "{} inter-op", "batch_per_process": "batch {}", "variant": "settings {}",
    "scaling_unit": "over {}", "precision": "{}", "math_mode": "math mode {}", "graph": "{}",
}

SERIES_COLUMNS = (
    "experiment", "system", "device", "framework", *EVERY_TABLE,
    "model", "data", "strategy", "vendor_library_enabled",
    "processes_per_node", "gpus_per_node", "intra_threads", "inter_threads",
    "batch_per_process", "variant", "series", "scaling_unit", "count", "nodes", "workers",
    "gpus", "global_batch", "parameter_servers", "variable_update", "n_choices",
)
RESULT_COLUMNS = ("statistic", "n", "img_s", "img_s_min", "img_s_max", "error")
BEST_PER_SIZE_COLUMNS = SERIES_COLUMNS + RESULT_COLUMNS + ("status",)
SCALING_COLUMNS = SERIES_COLUMNS + RESULT_COLUMNS + (
    "baseline_count", "img_s_baseline", "speedup", "efficiency", "host_busy", "status")
HEATMAP_INDEX = (
    "experiment", "system", "device", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library_enabled",
    "series", "scaling_unit")
IO_COLUMNS = (
    "experiment", "system", "device", "framework", *EVERY_TABLE,
    "model", "strategy", "vendor_library_enabled",
    "processes_per_node", "gpus_per_node", "intra_threads", "inter_threads",
    "batch_per_process", "variant", "series", "scaling_unit", "count", "nodes", "workers",
    "gpus", "statistic", "img_s_synthetic", "img_s_real", "io_overhead_percent", "host_busy",
    "status",
)


def _train(summary: pd.DataFrame) -> pd.DataFrame:
    return of_kind(summary, "train")


def with_units(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with ``scaling_unit`` filled for records older than the field (from the
    experiment type) and ``count``, the row's value on its unit's axis."""
    s = summary.copy()
    legacy = s["experiment_type"].map(LEGACY_UNITS).astype("string")
    s["scaling_unit"] = s["scaling_unit"].fillna(legacy)
    s["count"] = pd.Series(pd.NA, index=s.index, dtype="Int64")
    for unit in UNITS:
        at = s["scaling_unit"].eq(unit).fillna(False).astype(bool)
        s.loc[at, "count"] = s.loc[at, unit]
    return s


def series_identity(s: pd.DataFrame, *, without: tuple[str, ...] = ()) -> pd.DataFrame:
    """The columns that identify each row's series: KEYS with what grows with its unit and
    the per-size choices emptied (and ``without`` left out). Where two packings of one
    worker or GPU count would meet in a series (e.g. 4 ppn on 2 nodes and 8 ppn on 1), the
    packing stays part of the identity: two configurations never share a point."""
    columns = [k for k in KEYS if k not in CHOICES and k not in without]
    s = s.reset_index(drop=True)
    ident = s[columns].copy()
    for unit, grows in GROWS_WITH.items():
        at = s["scaling_unit"].eq(unit).fillna(False).astype(bool).to_numpy()
        ident.loc[at, [c for c in grows if c in ident]] = pd.NA
    if "count" in s and not ident.empty:
        series = group_ids(ident, columns)
        clash = pd.DataFrame({"series": series, "count": s["count"]}).duplicated(keep=False)
        packed = np.isin(series, series[clash.to_numpy()])
        packing = [c for c in _PACKING if c in ident and c not in GROWS_WITH["nodes"]]
        ident.loc[packed, packing] = s.loc[packed, packing]
    return ident


def series_labels(ident: pd.DataFrame) -> pd.Series:
    """A readable label per row, unique per series within its experiment, system and model:
    data input and batch always, then every identity column whose value differs between
    the rows of that experiment, system and model."""
    ident = ident.reset_index(drop=True)
    facet = group_ids(ident, [c for c in FACETS if c in ident])
    labels = pd.Series("", index=ident.index, dtype=object)
    for gid in np.unique(facet):
        part = ident[facet == gid]
        labels[part.index] = _labels(part)
    return labels


def _labels(ident: pd.DataFrame) -> list[str]:
    # device and framework: a GPU or PyTorch series always says so, the others where mixed
    always = ("device", "framework", "data", "batch_per_process")
    varying = [c for c in ident if c not in FACETS and c not in always
               and ident[c].astype(object).where(ident[c].notna(), None).nunique(dropna=False) > 1]
    parts = [c for c in (*always, *varying) if c in ident]
    mixed = {c: c in ident and ident[c].nunique() > 1 for c in ("device", "framework")}
    labels = []
    for _, row in ident.iterrows():
        text = []
        for column in parts:
            value = row[column]
            if value is pd.NA or value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            if column == "device":
                if value == "gpu" or mixed["device"]:
                    text.append("GPUs" if value == "gpu" else "CPUs")
            elif column == "framework":
                if value != DEFAULT_FRAMEWORK or mixed["framework"]:
                    text.append(frameworks.label(value))
            elif column == "vendor_library_enabled":
                text.append(f"{row.get('vendor_library') or 'vendor library'} {'on' if value else 'off'}")
            else:
                text.append(_LABELS.get(column, column + " {}").format(value))
        labels.append(", ".join(text) or "all")
    return labels


def best_choice(summary: pd.DataFrame) -> pd.DataFrame:
    """Per configuration without its :data:`CHOICES`, the row whose choice reached the
    highest img/s (ties: the first in table order; a group where every choice failed keeps
    its first row and status), with ``n_choices`` tried."""
    if summary.empty:
        return summary.assign(n_choices=pd.Series(dtype="Int64"))
    frame = sort_rows(summary, KEYS).assign(_order=lambda f: np.arange(len(f)))
    frame["_size"] = group_ids(frame, [k for k in KEYS if k not in CHOICES])
    ranked = frame.sort_values(["_size", "value", "_order"], ascending=[True, False, True],
                               na_position="last", kind="mergesort")
    best = ranked.drop_duplicates("_size").set_index("_size")
    best["n_choices"] = frame.groupby("_size").size().reindex(best.index).astype("Int64")
    return best.reset_index(drop=True).drop(columns="_order")


def _results(s: pd.DataFrame) -> pd.DataFrame:
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    return s


def scaling_series(df: pd.DataFrame) -> pd.DataFrame:
    """Training rows with a scaling unit, reduced to the best choice per size, with
    ``_series`` (an id), ``series`` (its label) and ``count``. A series measured at one
    count only keeps its row (its own baseline: S = E = 1)."""
    s = _train(summary_of(df))
    s = with_units(s)
    has_unit = s["scaling_unit"].notna()
    s = of_type(s, "node_scaling", fallback=has_unit)
    s = s[s["scaling_unit"].notna() & s["count"].notna()]
    if s.empty:
        return s
    s = best_choice(s)
    ident = series_identity(s)
    s["_series"] = group_ids(ident, list(ident.columns))
    s["series"] = series_labels(series_identity(s)).to_numpy()
    return s


def best_per_size(df: pd.DataFrame) -> pd.DataFrame:
    """Best configuration per size (CSCS 2017 Tables 1-3): per scaling series and count,
    the parameter-server count and variable update that reached the highest img/s, of
    ``n_choices`` tried."""
    s = scaling_series(df)
    if s.empty:
        return empty(BEST_PER_SIZE_COLUMNS)
    return sort_rows(_results(s)[list(BEST_PER_SIZE_COLUMNS)], ("experiment", "system", "model", "series", "count"))


def node_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Scaling (experiments 4 and 5): speedup S = P_n / P_b and parallel efficiency
    E = P_n / ((n / b) * P_b) over each series' count n of nodes, workers or GPUs
    (``scaling_unit``); b is the smallest count of the series (normally 1) and P its img/s
    at the best parameter-server count and variable update per size; ``host_busy``: either
    side shared its cores with other work (empty when neither says)."""
    s = scaling_series(df)
    if s.empty:
        return empty(SCALING_COLUMNS)
    s = with_baseline(s, "count", ["_series"])
    s = _results(s)
    s["img_s_baseline"] = s["baseline_value"]
    relative = s["count"].astype(float) / s["baseline_count"].astype(float)
    s["speedup"] = metrics.speedup(s["value"], s["baseline_value"])
    s["efficiency"] = metrics.parallel_efficiency(s["value"], relative, s["baseline_value"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "baseline")
    return sort_rows(s[list(SCALING_COLUMNS)], ("experiment", "system", "model", "series", "count"))


def efficiency_heatmap(df: pd.DataFrame) -> pd.DataFrame:
    """Parallel efficiency E = P_n / ((n / b) * P_b) as a heat-map table: one row per
    scaling series, one column per count (nodes, workers or GPUs as its unit says); a cell
    whose value failed holds its status."""
    table = node_scaling(df)
    if table.empty:
        return empty(HEATMAP_INDEX)
    table["cell"] = table["efficiency"].astype(object).where(table["efficiency"].notna(), table["status"])
    index = list(HEATMAP_INDEX)
    wide = table.pivot_table(index=index, columns="count", values="cell", aggfunc="first", dropna=False)
    wide = wide.dropna(how="all")
    wide.columns = [str(int(c)) for c in wide.columns]
    return sort_rows(wide.reset_index(), index)


def io_overhead(df: pd.DataFrame) -> pd.DataFrame:
    """I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic * 100
    (:func:`metrics.io_overhead_percent`) for every configuration run with both inputs;
    at each size of a scaling series, the best parameter-server count and variable update
    of each input (as CSCS 2017 Fig. 11 compares them)."""
    s = _train(summary_of(df))
    s = best_choice(with_units(s[s["data"].notna()]))
    if s.empty:
        return empty(IO_COLUMNS)
    keys = [k for k in KEYS if k not in CHOICES]
    p = pair(s, "data", first="synthetic", second="real", keys=keys + ["count"])
    p = p[p["status_1"].notna() & p["status_2"].notna()]  # both inputs were run
    if p.empty:
        return empty(IO_COLUMNS)
    p = p.reset_index(drop=True)
    p["series"] = series_labels(series_identity(p, without=("data",))).to_numpy()
    p["img_s_synthetic"], p["img_s_real"] = p.pop("value_1"), p.pop("value_2")
    p["statistic"] = s["statistic"].iloc[0]
    p["io_overhead_percent"] = metrics.io_overhead_percent(p["img_s_synthetic"], p["img_s_real"])
    p["status"] = pair_status(p["status_1"], p["status_2"], labels=("synthetic", "real"))
    return sort_rows(p[list(IO_COLUMNS)], ("experiment", "system", "model", "series", "count", "intra_threads"))
