"""Per-host outliers: a configuration measured on more than one host (or host set), each
host's statistic against the configuration's, flagged when it deviates by more than the
spread limit the summary's ``spread_flag`` uses (:data:`archbench.core.metrics.SPREAD_LIMIT`).
"""

from __future__ import annotations

import pandas as pd

from archbench.core import metrics
from archbench.results.tables.common import KEYS, check_statistic, empty, group_ids, sort_rows

HOST_OUTLIER_COLUMNS = (
    "experiment", "system", "framework", "config_id", "hosts", "n", "statistic", "value", "config_value",
    "deviation_pct", "outlier", "n_hosts", "unit",
)


def host_outliers(df: pd.DataFrame, statistic: str = metrics.DEFAULT_STATISTIC) -> pd.DataFrame:
    """Hosts that measure a configuration apart from the others: per configuration run on
    more than one host or host set (a record's ``hosts``, joined), each host's ``value``
    (the campaign's statistic over its ok runs, ``n`` of them) against the configuration's
    ``config_value`` over all its ok runs, ``deviation_pct`` = 100 x (value - config_value)
    / config_value, and ``outlier`` when its magnitude exceeds 10 % (the summary's spread
    limit). Configurations seen on one host only are left out."""
    check_statistic(statistic)
    if df.empty or "hosts" not in df:
        return empty(HOST_OUTLIER_COLUMNS)
    hosts = df["hosts"].astype("string").str.strip()
    runs = df[df["status"].eq("ok").fillna(False) & df["throughput"].notna()
              & hosts.notna() & hosts.ne("").fillna(False)]
    runs = runs.assign(hosts=hosts[runs.index], _cid=group_ids(runs, KEYS))
    n_hosts = runs.groupby("_cid")["hosts"].nunique()
    runs = runs[runs["_cid"].map(n_hosts).gt(1).to_numpy()]
    if runs.empty:
        return empty(HOST_OUTLIER_COLUMNS)
    per_host = runs.groupby(["_cid", "hosts"])["throughput"].agg(["count", statistic])
    out = per_host.rename(columns={"count": "n", statistic: "value"}).reset_index()
    first = runs.drop_duplicates("_cid").set_index("_cid")
    for name in ("experiment", "system", "framework", "config_id"):
        out[name] = out["_cid"].map(first[name])
    out["unit"] = out["_cid"].map(first["throughput_unit"])
    out["statistic"] = statistic
    out["config_value"] = out["_cid"].map(runs.groupby("_cid")["throughput"].agg(statistic))
    out["n_hosts"] = out["_cid"].map(n_hosts).astype(int)
    out["deviation_pct"] = 100 * (out["value"] - out["config_value"]) / out["config_value"]
    out["outlier"] = (out["deviation_pct"].abs() > 100 * metrics.SPREAD_LIMIT).astype("boolean")
    return sort_rows(out[list(HOST_OUTLIER_COLUMNS)], ("experiment", "system", "config_id", "hosts"))
