"""The best layout of a hybrid sweep (docs/experiments.md, experiment 2): ONE choice,
published by the ``hybrid_best`` table and run by node scaling's ``best: <hybrid
experiment>``.

Per hybrid experiment, system, framework, model, data and vendor-library setting, the
processes x threads x batch configuration with the highest img/s (the campaign's
statistic, mean by default) over its successful runs; ties go to the first in table order (fewer processes, then fewer threads, inter-op threads,
smaller batch). A group whose configurations all failed keeps a row with status
"all failed" and no layout.
"""

from __future__ import annotations

import pandas as pd

from archbench.core.metrics import DEFAULT_STATISTIC, layout_counts
from archbench.core.fields import EVERY_TABLE, config_id
from archbench.core.record import raw_path
from archbench.plan.experiment_types.node_scaling import best_sources
from archbench.results.tables.common import empty, sort_rows, summary_of
from archbench.results.tables.training import best_per_group, hybrid_configurations

GROUP = ("experiment", "system", "framework", *EVERY_TABLE, "model", "data",
         "vendor_library_enabled")
LAYOUT_FIELDS = ("processes_per_node", "intra_threads", "inter_threads", "batch_per_process")
BEST_HYBRID_COLUMNS = (
    *GROUP, "configuration", *LAYOUT_FIELDS, "global_batch", "statistic", "img_s", "error",
    "n_configurations", "n_failed_configurations", "status",
)


def best_hybrid(df: pd.DataFrame) -> pd.DataFrame:
    """The best processes x threads configuration per hybrid experiment, system,
    framework, precision, fp32 math mode, graph, model, data and vendor setting (highest
    img/s); "all failed" when none has a value."""
    table = hybrid_configurations(df)
    if table.empty:
        return empty(BEST_HYBRID_COLUMNS)
    blank = ("configuration", *LAYOUT_FIELDS, "global_batch", "error")
    out = best_per_group(table, keys=GROUP, value="img_s", blank=blank)
    return sort_rows(out[list(BEST_HYBRID_COLUMNS)], GROUP)


def best_layout(best: pd.DataFrame, measurement: dict) -> dict | None:
    """From the :func:`best_hybrid` table ``best``: the best layout of the hybrid sweeps
    ``measurement["best_of"]`` names (one or several, e.g. one per system or model) for the
    measurement's system and model (the same data and vendor setting preferred when the
    sweeps ran them), as {processes_per_node, intra_threads, inter_threads,
    batch_per_process, img_s}; None when no named sweep has a successful run for them."""
    sources = best_sources(measurement["best_of"])
    rows = best[best["status"].eq("ok") & best["experiment"].isin(sources)
                & best["system"].eq(measurement["system"]) & best["model"].eq(measurement["model"])]
    for column in ("framework", *EVERY_TABLE, "data", "vendor_library_enabled"):
        value = measurement.get(column)
        same = rows[column].eq(value).fillna(False).astype(bool)
        if value is not None and same.any():
            rows = rows[same]
    if rows.empty:
        return None
    row = rows.loc[rows["img_s"].astype(float).idxmax()]
    return {k: int(row[k]) for k in LAYOUT_FIELDS} | {"img_s": float(row["img_s"])}


def resolve_best(measurements: list[dict], df: pd.DataFrame, *, on_missing: str = "raise",
                 statistic: str = DEFAULT_STATISTIC) -> list[dict]:
    """Replace every ``best_of`` placeholder of ``measurements`` with :func:`best_layout`
    of ``df`` (tidy measurements or their summary). Other measurements pass unchanged.

    The resolved measurement keeps ``tuning.best_of`` (so its id shows where the layout came
    from), loses the top-level marker, and gets workers, global batch and config_id anew.
    ``on_missing``: ``raise`` (ValueError) or ``drop`` when the sweep has no successful run.
    ``statistic``: the one the campaign's tables report, so the run and the table agree.
    """
    wanted = any(m.get("best_of") for m in measurements)
    table = best_hybrid(summary_of(df, statistic)) if wanted else None
    out = []
    for m in measurements:
        name = m.get("best_of")
        if not name:
            out.append(m)
            continue
        best = best_layout(table, m)
        if best is None:
            if on_missing == "drop":
                continue
            raise ValueError(f"{m['experiment']}: no successful run of "
                             f"'{', '.join(best_sources(name))}' for system "
                             f"{m['system']} and model {m['model']} to take the best configuration from")
        resolved = {k: v for k, v in m.items() if k != "best_of"}
        resolved.update({k: best[k] for k in LAYOUT_FIELDS})
        resolved["tuning"] = {**(m.get("tuning") or {}), "best_of": name}
        resolved.update(layout_counts(resolved))
        resolved["config_id"] = config_id(resolved)
        out.append(resolved)
    return out


def choose_layouts(measurements: list[dict], df: pd.DataFrame, *, statistic: str = DEFAULT_STATISTIC) -> dict:
    """For each `best` measurement of ``measurements`` (keyed by its record path,
    ``raw/...``): the measurement :func:`resolve_best` makes of it with its planned
    ``config_id`` kept (the record's place), or ``{"error": why no layout}``. What the
    supervisor of a `best` measurement runs (``archbench.execute.supervisor``)."""
    chosen = {}
    for m in measurements:
        try:
            resolved = resolve_best([m], df, statistic=statistic)[0]
        except ValueError as exc:
            chosen[raw_path(m)] = {"error": str(exc)}
            continue
        chosen[raw_path(m)] = {**resolved, "config_id": m["config_id"]}
    return chosen
