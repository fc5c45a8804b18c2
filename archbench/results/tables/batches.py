"""img/s against the batch size (OSU 2019 Figs. 1b and 11; BSC 2019 thread scaling per
batch): one process (thread scaling, batch sweep), each batch size relative to the
smallest batch of the same layout."""

from __future__ import annotations

import pandas as pd

from archbench.core.fields import EVERY_TABLE
from archbench.core import metrics
from archbench.results.tables.common import (
    of_kind,
    KEYS,
    derived_status,
    empty,
    of_type,
    sort_rows,
    summary_of,
    with_baseline,
)

GROUP = (
    "experiment", "system", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library_enabled", "nodes",
    "processes_per_node", "intra_threads", "inter_threads",
)
BATCH_SCALING_COLUMNS = (
    *GROUP, "batch_per_process", "global_batch", "statistic", "n", "img_s", "img_s_min",
    "img_s_max", "error", "baseline_batch", "img_s_baseline", "relative", "host_busy", "status",
)


def batch_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """img/s per batch size (OSU 2019 Figs. 1b, 11): per system, framework, model, data,
    vendor setting, intra-op and inter-op threads, nodes and processes per node, img/s at each
    batch per process and relative = img/s / img/s(b0), b0 the smallest batch run with
    that layout. A failed smallest batch leaves the ratios empty ("baseline oom")."""
    s = summary_of(df)
    s = of_type(of_kind(s, "train"), "batch_scaling")
    s = s[s["batch_per_process"].notna()]
    if s.empty:
        return empty(BATCH_SCALING_COLUMNS)
    keys = [k for k in KEYS if k not in ("batch_per_process", "global_batch")]
    s = with_baseline(s, "batch_per_process", keys)
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    s["baseline_batch"] = s["baseline_batch_per_process"]
    s["img_s_baseline"] = s["baseline_value"]
    s["relative"] = metrics.speedup(s["value"], s["baseline_value"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "baseline")
    return sort_rows(s[list(BATCH_SCALING_COLUMNS)], [*GROUP, "batch_per_process"])
