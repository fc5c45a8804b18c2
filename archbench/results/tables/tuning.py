"""The tuner's result (docs/metrics.md, "Tuning"): per tune experiment, system, framework
and model, the best configuration its trials found at full fidelity, what finding it cost,
and, where the exhaustive sweep its trials name has records in the same data, how far the
found configuration is from the sweep's best and what the sweep cost.

Input is the tidy table (one row per run) with the record's ``trial`` as ``trial_*``
columns and each run's ``node_hours`` (:func:`archbench.results.collect.flatten`). A
numerics setting (precision, math mode, graph) is a key of the group when its values do
not follow the trial number (one study per value: trial 0 ran in each), and tuned when they
do (one study over them: each trial ran one value).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from archbench.core import metrics
from archbench.core.fields import NUMERICS
from archbench.results.tables.common import _to_bool, check_statistic, empty, normalise, of_kind, sort_rows

GROUP = ("experiment", "system", "device", "framework", "model", "data")
# the axes a configuration of the tuner's space is told apart by, as the table names them
CONFIG = ("processes_per_node", "intra_threads", "inter_threads", "batch_per_process")
HOROVOD = {"horovod_cycle_time_ms": "metric_horovod_cycle_time",
           "horovod_fusion_threshold_bytes": "metric_horovod_fusion_threshold"}
# what else must agree for a sweep's configuration to be the tuner's
SAME = ("nodes", "strategy", "vendor_library_enabled", "image_size", *NUMERICS)
TRIAL_INT = ("trial_number", "trial_round", "trial_rung")
TRIAL_FLOAT = ("trial_exhaustive_node_hours", "trial_budget_node_hours", "node_hours")
COLUMNS = (
    *GROUP, *NUMERICS, "tuned",
    *(f"best_{c}" for c in (*CONFIG, *HOROVOD)), "n", "runs", "statistic", "img_s", "img_s_ci95_low",
    "img_s_ci95_high", "trials", "failed_trials", "measurements", "node_hours",
    "budget_node_hours", "exhaustive_node_hours", "sweep", "sweep_configurations",
    "sweep_best_img_s", *(f"sweep_best_{c}" for c in CONFIG), "found_img_s", "found_from",
    "regret", "sweep_node_hours", "cost_ratio", "status",
)


def tune_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The training runs of ``df`` (tidy) with their ``trial_*`` and ``node_hours`` columns
    typed (added empty where missing), the Horovod settings as :data:`HOROVOD` names and
    ``ok`` (status ok with a value)."""
    runs = of_kind(df if "variant" in df else normalise(df), "train")
    for name in TRIAL_INT:
        runs[name] = pd.to_numeric(runs.get(name, pd.Series(np.nan, index=runs.index))).astype("Int64")
    for name in (*TRIAL_FLOAT, *HOROVOD.values()):
        runs[name] = pd.to_numeric(runs.get(name, pd.Series(np.nan, index=runs.index))).astype(float)
    top = runs.get("trial_top_rung", pd.Series(pd.NA, index=runs.index))
    runs["trial_top_rung"] = pd.array([_to_bool(v) for v in top], dtype="boolean")
    sweep = runs.get("trial_sweep", pd.Series(pd.NA, index=runs.index)).astype("string")
    runs["trial_sweep"] = sweep.mask(sweep.str.strip().eq(""))
    for name, column in HOROVOD.items():
        runs[name] = runs[column]
    value = runs.get("throughput", pd.Series(np.nan, index=runs.index))  # (a summary has none)
    runs["ok"] = (runs["status"].eq("ok").fillna(False) & value.notna()).astype(bool)
    return runs


def tuned_numerics(trials: pd.DataFrame) -> tuple[str, ...]:
    """The numerics settings the study of ``trials`` (one experiment, system, device,
    framework, model and data) tunes: those taking several values, each trial number one."""
    tuned = []
    for name in NUMERICS:
        values = trials[name].astype(object)
        if values.nunique(dropna=False) > 1 and \
                trials.assign(_v=values).groupby("trial_number")["_v"].nunique(dropna=False).max() == 1:
            tuned.append(name)
    return tuple(tuned)


def studies(runs: pd.DataFrame) -> Iterator[tuple[dict, pd.DataFrame, tuple[str, ...]]]:
    """The tuning studies of ``runs`` (:func:`tune_runs`), in key order: (the row's keys,
    :data:`GROUP` and the untuned numerics, a tuned one None; its trials' runs; the tuned
    numerics settings)."""
    tune = runs[runs["experiment_type"].eq("tune").fillna(False).astype(bool)
                & runs["trial_number"].notna()]
    for values, study in tune.groupby(list(GROUP), dropna=False, sort=True):
        tuned_names = tuned_numerics(study)
        fixed = [n for n in NUMERICS if n not in tuned_names]
        parts = study.groupby(fixed, dropna=False, sort=True) if fixed else [((), study)]
        for fixed_values, trials in parts:
            fixed_values = fixed_values if isinstance(fixed_values, tuple) else (fixed_values,)
            keys = {**dict(zip(GROUP, map(_text, values))),
                    **dict(zip(fixed, map(_text, fixed_values))), **{n: None for n in tuned_names}}
            yield keys, trials, tuned_names


def _text(value: object) -> object:
    return None if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else value


def _configurations(runs: pd.DataFrame, keys: Sequence[str], statistic: str) -> pd.DataFrame:
    """The img/s (``value``: ``statistic`` of its ok runs), the values and their count per
    configuration (``keys``) of the ok ``runs``, highest value first (ties: the first
    configuration in key order)."""
    ok = runs[runs["ok"]]
    if ok.empty:
        return pd.DataFrame(columns=[*keys, "value", "values", "n"])
    keyed = ok[list(keys)].astype(object).where(ok[list(keys)].notna(), None)
    table = (ok.assign(**{k: keyed[k] for k in keys})
             .groupby(list(keys), dropna=False, sort=True)["throughput"]
             .agg(value=statistic, values=list, n="count").reset_index())
    return table.sort_values("value", ascending=False, kind="mergesort").reset_index(drop=True)


def _run_counts(runs: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The number of ``runs`` (ok or failed) per configuration (``keys``) as ``runs``."""
    keyed = runs[list(keys)].astype(object).where(runs[list(keys)].notna(), None)
    return keyed.groupby(list(keys), dropna=False, sort=False).size().rename("runs").reset_index()


def _first(series: pd.Series) -> object:
    values = series.dropna()
    return values.iloc[0] if len(values) else None


def _group_row(trials: pd.DataFrame, runs: pd.DataFrame, keys: dict, tuned_names: tuple,
               statistic: str) -> dict:
    """The table row of one tuning study's ``trials`` (``runs``: every training run)."""
    axes = [*CONFIG, *HOROVOD, *SAME]
    row = dict(keys)
    row["tuned"] = ", ".join(a for a in (*CONFIG, *HOROVOD, *NUMERICS)
                             if trials[a].astype(object).nunique(dropna=True) > 1) or "none"
    numbers = trials["trial_number"]
    failed = [t for t, ok in trials.groupby("trial_number")["ok"].any().items() if not ok]
    row.update(trials=int(numbers.nunique()), failed_trials=len(failed),
               measurements=len(trials), node_hours=float(trials["node_hours"].sum(min_count=1)),
               budget_node_hours=_first(trials["trial_budget_node_hours"]),
               exhaustive_node_hours=_first(trials["trial_exhaustive_node_hours"]),
               sweep=_text(_first(trials["trial_sweep"])))
    top_runs = trials[trials["trial_top_rung"].fillna(False).astype(bool)]
    top = _configurations(top_runs, axes, statistic)
    if top.empty:
        row["status"] = (f"all {row['trials']} trials failed" if len(failed) == row["trials"]
                         else "no top-rung measurement")
        return row
    top = top.merge(_run_counts(top_runs, axes), on=axes, how="left", sort=False)
    whole = top[top["runs"] == top["n"]]  # a configuration with a failed run is never the best
    best = (whole if not whole.empty else top).iloc[0]
    for name in (*CONFIG, *HOROVOD):
        row[f"best_{name}"] = best[name]
    for name in tuned_names:  # a tuned numerics setting: the best configuration's value
        row[name] = best[name]
    lost = int(best["runs"] - best["n"])
    row.update(n=int(best["n"]), runs=int(best["runs"]), statistic=statistic, img_s=float(best["value"]),
               status="ok" if not lost else f"every top-rung configuration had a failed run (the best: {lost})")
    if best["n"] >= 2 and statistic == "mean":
        row["img_s_ci95_low"], row["img_s_ci95_high"] = metrics.mean_interval(best["values"])
    row.update(_against_sweep(row, best, runs, tuned_names, statistic))
    return row


def _against_sweep(row: dict, best: pd.Series, runs: pd.DataFrame, tuned_names: tuple,
                   statistic: str) -> dict:
    """The sweep's columns of a row: its best, the found value, regret and cost ratio
    (empty without a named sweep with an ok run in the same data)."""
    if row["sweep"] is None:
        return {}
    fixed = [k for k in (*GROUP[1:], *NUMERICS) if k not in tuned_names]
    sweep = runs[runs["experiment"].eq(row["sweep"]).fillna(False).astype(bool)]
    for name in fixed:
        sweep = sweep[sweep[name].astype(object).eq(row[name]).fillna(False).astype(bool)]
    axes = [*CONFIG, *HOROVOD, *SAME]
    configurations = _configurations(sweep, axes, statistic)
    if configurations.empty:
        return {"sweep_configurations": 0}
    top, spent = configurations.iloc[0], float(sweep["node_hours"].sum(min_count=1))
    out = {"sweep_configurations": len(configurations), "sweep_best_img_s": float(top["value"]),
           **{f"sweep_best_{c}": top[c] for c in CONFIG}, "sweep_node_hours": spent}
    same = np.ones(len(configurations), dtype=bool)
    for name in axes:  # the configuration the tuner chose, run by the sweep
        same &= np.array([_text(v) == _text(best[name]) for v in configurations[name]])
    if same.any():
        out.update(found_img_s=float(configurations.loc[same, "value"].iloc[0]), found_from="sweep")
    else:
        out.update(found_img_s=row["img_s"], found_from="tuner")
    out["regret"] = metrics.regret(out["found_img_s"], out["sweep_best_img_s"])
    if spent and not np.isnan(spent) and not np.isnan(row["node_hours"]):
        out["cost_ratio"] = metrics.cost_ratio(row["node_hours"], spent)
    return out


def tuning(df: pd.DataFrame, statistic: str | None = None) -> pd.DataFrame:
    """The tuner's best configuration and its cost, per tune experiment, system, device,
    framework, model and input data (and precision, math mode and graph where each ran as
    a study of its own; ``tuned``: the axes the trials varied, a tuned numerics setting
    showing the best configuration's value). The best configuration (``best_*``: processes
    per node, intra- and inter-op threads, batch per process, Horovod cycle time and fusion
    threshold) is the one with the highest ``img_s`` = the campaign's ``statistic`` (mean
    unless it says median) of the img/s of its ok runs at the top rung (full fidelity;
    lower rungs only choose what is promoted), ``n`` of them of its ``runs`` there (a
    configuration with a failed run at the top rung is never the best while another ran
    without one: the status says when none did), with the 95 % interval of the
    mean (t, n - 1 degrees of freedom; empty for n < 2, and for the median: n is too small
    for an interval of a median). ``trials``:
    distinct trial numbers (``failed_trials``: those without an ok run), ``measurements``:
    its runs, ``node_hours``: their sum of nodes x (end - start) in hours, failed runs
    included; ``budget_node_hours`` and ``exhaustive_node_hours``: the plan's estimates of
    the tuner's and the exhaustive sweep's cost. Where the trials name a sweep (``sweep``,
    a campaign experiment) with ok runs in the same data (same system, device, framework,
    model, input and untuned numerics): ``sweep_configurations`` with a value, the sweep's
    best img/s (``sweep_best_img_s``, the same statistic) and its configuration;
    ``found_img_s``: the sweep's value for the configuration the tuner chose when the sweep ran it
    (``found_from`` sweep; the same nodes, strategy, vendor setting and image size), else
    the tuner's ``img_s`` (``found_from`` tuner); ``regret`` = 1 - found_img_s /
    sweep_best_img_s (0: the sweep's best was found); ``cost_ratio`` = node_hours /
    ``sweep_node_hours`` (the sweep's runs, failed ones included). Status: ok, "all k
    trials failed", or "no top-rung measurement" (no ok run at full fidelity)."""
    runs = tune_runs(df)
    statistic = statistic or metrics.DEFAULT_STATISTIC
    check_statistic(statistic)
    rows = [_group_row(trials, runs, keys, tuned_names, statistic)
            for keys, trials, tuned_names in studies(runs)]
    if not rows:
        return empty(COLUMNS)
    table = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    for name in ("n", "runs", "trials", "failed_trials", "measurements", "sweep_configurations",
                 *(f"best_{c}" for c in CONFIG), *(f"sweep_best_{c}" for c in CONFIG)):
        table[name] = pd.to_numeric(table[name]).astype("Int64")
    for name in ("img_s", "img_s_ci95_low", "img_s_ci95_high", "node_hours", "budget_node_hours",
                 "exhaustive_node_hours", "sweep_best_img_s", "found_img_s", "regret",
                 "sweep_node_hours", "cost_ratio", *(f"best_{h}" for h in HOROVOD)):
        table[name] = pd.to_numeric(table[name]).astype(float)
    return sort_rows(table, (*GROUP, *NUMERICS))
