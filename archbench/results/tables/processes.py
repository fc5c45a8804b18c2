"""Single vs multi process per node (docs/experiments.md, experiment 5; OSU 2019 Figs. 6
and 10).

A ppn sweep runs 1, 2, 4, ... processes per node with intra-op threads = cores / ppn - 1;
its table gives each layout's img/s and the speedup over one process per node (SP) of the
same system, framework, model, data, vendor setting, node count, batch per process,
inter-op threads and variant.
"""

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
    "batch_per_process", "inter_threads", "variant",
)
PROCESS_LAYOUT_COLUMNS = (
    *GROUP, "processes_per_node", "intra_threads", "workers", "global_batch", "statistic",
    "n", "img_s", "img_s_min", "img_s_max", "error", "img_s_single_process", "speedup",
    "host_busy", "status",
)
_LAYOUT = ("processes_per_node", "intra_threads", "workers", "global_batch")


def process_layout(df: pd.DataFrame) -> pd.DataFrame:
    """Processes per node (experiment 5; OSU 2019 Figs. 6, 10): img/s per processes per
    node (ppn) with its intra-op threads, and the speedup of multi over single process
    = img/s / img/s(ppn 1) of the same system, framework, model, data, vendor setting,
    nodes, batch per process, inter-op threads and variant (the hash of other settings, e.g. the
    Horovod controller; empty when there are none). Without a ppn 1 run the speedup is
    empty ("no single process"); a failed one is named ("single process oom")."""
    s = summary_of(df)
    s = of_type(of_kind(s, "train"), "process_layout")
    if s.empty:
        return empty(PROCESS_LAYOUT_COLUMNS)
    keys = [k for k in KEYS if k not in _LAYOUT]
    s = with_baseline(s, "processes_per_node", keys, value=1)
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    s["img_s_single_process"] = s["baseline_value"]
    s["speedup"] = metrics.speedup(s["value"], s["baseline_value"])
    s["status"] = derived_status(s["status"], s["baseline_status"], "single process")
    s["variant"] = s["variant"].astype("string").mask(s["variant"].eq("").fillna(False))
    return sort_rows(s[list(PROCESS_LAYOUT_COLUMNS)], [*GROUP, "processes_per_node"])
