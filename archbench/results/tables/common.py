"""Shared pieces of the derived tables: column types, the per-configuration summary,
pairing and baselines. Every number goes through :mod:`archbench.core.metrics`.

Input everywhere is the tidy measurements table (one row per record, see
``archbench.results.collect.flatten``), optionally extended with imported rows
(``archbench.importer``), which add ``reported_error`` and ``source`` columns.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from archbench.core import fields, metrics
from archbench.workloads.energy import KEYS as ENERGY_KEYS
from archbench.plan.experiment_types import feeding

FAILURE_STATUSES = ("oom", "timeout", "failed")
HAS_MEAN = ("ok", "partial")  # summary statuses whose mean is a measurement

# one dtype per column: the identity fields' (archbench.core.fields), then the rest
STRING_FIELDS = (
    *fields.of_kind(str), "status", "reason", "throughput_unit", "config_id", "run_id", "source",
    "env", "mkl_env", "kmp_read_by", "devices", "executed_precision", "evidence_label",
)
INT_FIELDS = (*fields.of_kind(int), "repetition")
BOOL_FIELDS = (*fields.of_kind(bool), "host_busy")
# record metrics a configuration's summary carries, by summary column: measured ones as
# the mean over its ok runs, settings from any run (failure records name them too)
MEASURED_METRICS = {
    "flops_per_image": "metric_flops_per_image",
    "allreduces_per_step": "metric_allreduces_per_step",
    # joules per image of the window, per energy source (archbench.workloads.energy.columns)
    **{f"j_per_img_{key}": f"energy_{key}_j_per_img" for key in ENERGY_KEYS.values()},
    "compile_s": "metric_compile_s",  # the compiling first step of a compiled graph
    "loss_tail": "loss_tail",  # mean loss of the last third of the measured steps
    # the quality gate (outcome.to_accuracy): the share of ok runs that reached the target,
    # and steps and seconds to it (the mean over those that reached it)
    "accuracy_reached": "metric_accuracy_reached",
    "steps_to_accuracy": "metric_steps_to_accuracy",
    "time_to_accuracy_s": "metric_time_to_accuracy_s",
}
SETTING_METRICS = {
    "horovod_cycle_time_ms": "metric_horovod_cycle_time",
    "horovod_fusion_threshold_bytes": "metric_horovod_fusion_threshold",
    "cores": "metric_cores",  # cores the process was pinned to (inter/intra sweep)
    "loader_workers": "metric_loader_workers",  # PyTorch DataLoader workers, where set
    "target_accuracy": "metric_target_accuracy",  # the quality gate's validation accuracy
}
# settings recorded as text, by summary column: the value of the ok runs (of any run when
# none is ok); runs that disagree give their values joined by " | "
# the MKL/OpenMP environment the runs had (collect.mkl_env_text) and the runtime that reads
# its KMP_* part (vendor_evidence.library.kmp_read_by: "none" = no runtime loaded reads them)
# and what precision the vendor probe saw the computing primitives run in, with the label
# that compares it with the one asked for (vendor_evidence.precision.precision_columns: "bf16
# requested, fp32 executed"; empty when they agree), which every table reading the
# summary can show
# and each energy source's status, with why where it was not measured (energy_status)
# and the framework version that ran: a configuration's runs of two versions (Debian's
# PyTorch 1.13.1 and the index's 2.14.1, an image rebuilt between repetitions) state both,
# "1.13.1 | 2.14.1", never one number silently pooled from both
SETTING_TEXT = ("mkl_env", "kmp_read_by", "executed_precision", "evidence_label", "energy_status",
                "framework_version")
SUMMARY_METRICS = {**MEASURED_METRICS, **SETTING_METRICS}
FLOAT_FIELDS = ("throughput", "reported_error", "measured_window_s", "host_other_cores",
                *SUMMARY_METRICS.values())
_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "on": True, "off": False,
              "yes": True, "no": False}

# The identity of a configuration: the record's configuration fields (the device and
# framework among them: a GPU and a CPU run, or a TensorFlow and a PyTorch run, never share a
# row) and the series fields GPU, parameter-server and scaling studies add
# (archbench.core.fields), plus the variant, the hash suffix config_id appends when a
# configuration carries tuning or environment settings (e.g. MKL settings on/off), which is
# not a record field of its own.
KEYS = fields.CONFIG_FIELDS + fields.SERIES_FIELDS + ("variant",)

STATISTICS = tuple(metrics.STATISTIC_OF)  # what a campaign's tables report (``statistic:``)
SUMMARY_STATS = (
    "unit", "n", "statistic", "value", "mean", "median", "std", "min", "max", "ci95_low",
    "ci95_high", "error", "spread_flag", "host_busy", "short_window_flag",
    "n_failed", "failures", "status", *SUMMARY_METRICS, *SETTING_TEXT, "source",
)
SUMMARY_COLUMNS = KEYS + SUMMARY_STATS


def _to_bool(value: object) -> object:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return pd.NA
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower()
    if text == "":
        return pd.NA
    if text not in _BOOL_TEXT:
        raise ValueError(f"not a boolean: {value!r}")
    return _BOOL_TEXT[text]


def normalise(df: pd.DataFrame) -> pd.DataFrame:
    """The tidy table with every identity column present and one dtype per column.

    Strings become pandas ``string``, counts ``Int64``, flags ``boolean``, values ``float``;
    missing columns are added empty. Works the same on a table read from CSV or Parquet.
    """
    out = df.copy()
    for name in STRING_FIELDS:
        if name not in out:
            out[name] = pd.Series(pd.NA, index=out.index, dtype="string")
        else:
            col = out[name].astype("string")
            out[name] = col.mask(col.str.strip() == "")
    for name in INT_FIELDS:
        if name not in out:
            out[name] = pd.Series(pd.NA, index=out.index, dtype="Int64")
        else:
            out[name] = pd.to_numeric(out[name], errors="raise").astype("Int64")
    for name in BOOL_FIELDS:
        if name not in out:
            out[name] = pd.Series(pd.NA, index=out.index, dtype="boolean")
        elif out[name].dtype != "boolean":
            out[name] = pd.array([_to_bool(v) for v in out[name]], dtype="boolean")
    for name in FLOAT_FIELDS:
        if name not in out:
            out[name] = np.nan
        out[name] = pd.to_numeric(out[name], errors="raise").astype(float)
    # records written before a field ran at its read_as (CPUs, TensorFlow, fp32, strict,
    # eager): one configuration, old or new
    for name, value in fields.READ_AS.items():
        out[name] = out[name].fillna(value)
    variant = out["config_id"].str.extract(r"_([0-9a-f]{8})$", expand=False)
    out["variant"] = variant.fillna("").astype("string")
    return out


def empty(columns: Sequence[str]) -> pd.DataFrame:
    """An empty table with ``columns`` (every table file is written even without data)."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def sort_rows(frame: pd.DataFrame, by: Iterable[str]) -> pd.DataFrame:
    """Rows in a fixed order (missing values last), index reset."""
    by = [c for c in by if c in frame]
    if frame.empty or not by:
        return frame.reset_index(drop=True)
    return frame.sort_values(by, kind="mergesort", na_position="last").reset_index(drop=True)


def group_ids(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """One integer per distinct combination of ``keys`` (missing values are a value)."""
    if frame.empty:
        return np.zeros(0, dtype=int)
    return frame.groupby(list(keys), dropna=False, sort=True).ngroup().to_numpy()


def _distinct_text(frame: pd.DataFrame, column: str) -> pd.Series:
    """Per ``_gid`` of ``frame``: the distinct values of ``column``, sorted and joined by
    " | " (groups without a value are left out)."""
    pairs = frame.loc[frame[column].notna(), ["_gid", column]].astype({column: str})
    pairs = pairs.drop_duplicates().sort_values(["_gid", column], kind="mergesort")
    text = pairs.drop_duplicates("_gid").set_index("_gid")[column].astype(object)
    several = pairs["_gid"].duplicated(keep=False)
    if several.any():  # rare: runs of one configuration that disagree
        joined = pairs[several].groupby("_gid")[column].agg(" | ".join)
        text.loc[joined.index] = joined
    return text


def _failure_text(counts: Counter) -> str:
    return ", ".join(f"{status}:{counts[status]}" for status in FAILURE_STATUSES if counts[status])


def _summary_status(n_ok: int, counts: Counter) -> str:
    if n_ok and not counts:
        return "ok"
    if n_ok:
        return "partial"
    if not counts:
        return "failed"
    # the most frequent failure; ties broken by the order oom, timeout, failed
    return max(FAILURE_STATUSES, key=lambda s: (counts[s], -FAILURE_STATUSES.index(s)))


def _short_windows(good: pd.DataFrame) -> pd.Series:
    """Per ``_gid`` of the ok runs ``good``: True when one of them timed a window too short
    to time (:func:`metrics.short_window`), False when every one states a longer one,
    else missing."""
    seconds = good["measured_window_s"] if "measured_window_s" in good else [None] * len(good)
    short = pd.Series([metrics.short_window(None if pd.isna(s) else s) for s in seconds],
                      index=good.index, dtype="boolean")
    grouped = short.groupby(good["_gid"])
    return grouped.any().where(grouped.any() | (grouped.count() == grouped.size()), pd.NA)


def _host_busy(good: pd.DataFrame) -> pd.Series:
    """Per ``_gid`` of the ok runs ``good``: True when one of them shared its cores with
    other work (the record's ``host_busy``), False when every one states it did not, else
    missing (imported rows, records before the field)."""
    busy = good["host_busy"].astype("boolean")
    grouped = busy.groupby(good["_gid"])
    return grouped.any().where(grouped.any() | (grouped.count() == grouped.size()), pd.NA)


def summarise(df: pd.DataFrame, statistic: str = metrics.DEFAULT_STATISTIC) -> pd.DataFrame:
    """Summary per configuration (docs/metrics.md, "Repetitions and the summary").

    One row per configuration (``KEYS``): over the runs with status ok, ``n``, ``mean``,
    ``median``, ``value`` (the one of them named by ``statistic``, the number every derived
    table reports; ``statistic`` names it in each row), ``std`` (sample), ``min``, ``max``, the 95% confidence interval of the mean
    (t-distribution, n-1 degrees of freedom; empty for n < 2), ``error`` = max - min
    (:func:`metrics.spread`; an imported row's published error when it is a single value),
    ``spread_flag`` (:func:`metrics.spread_flag`, error > 10% of the mean),
    ``host_busy`` (an ok run shared its cores with other work,
    :mod:`archbench.core.hostload`; empty when no run states it),
    ``short_window_flag`` (an ok run's window lasted under :data:`metrics.MIN_WINDOW_S`;
    empty when no run states its window), ``n_failed``,
    ``failures`` ("oom:2, timeout:1") and ``status``: ok, partial (some runs failed), or the
    dominant failure (oom|timeout|failed) when no run succeeded -- then every value is empty,
    never zero.
    """
    check_statistic(statistic)
    frame = df if "variant" in df else normalise(df)
    if frame.empty:
        return empty(SUMMARY_COLUMNS)
    frame = frame.assign(_gid=group_ids(frame, KEYS))
    ok = frame["status"].eq("ok").fillna(False).to_numpy() & frame["throughput"].notna().to_numpy()
    first = frame.drop_duplicates("_gid").set_index("_gid").sort_index()
    out = first[list(KEYS)].copy()

    good = frame[ok]
    values = good.groupby("_gid")["throughput"].agg(list)
    stats_ = good.groupby("_gid")["throughput"].agg(["count", "mean", "median", "std", "min", "max"])
    out["n"] = stats_["count"].reindex(out.index).fillna(0).astype(int)
    for name in ("mean", "median", "std", "min", "max"):
        out[name] = stats_[name].reindex(out.index).astype(float)
    out["statistic"] = statistic
    out["value"] = out[statistic]
    out["unit"] = good.groupby("_gid")["throughput_unit"].first().reindex(out.index)
    missing_unit = out["unit"].isna()
    if missing_unit.any():  # a configuration that only failed: keep any unit its records carry
        out.loc[missing_unit, "unit"] = (
            frame.groupby("_gid")["throughput_unit"].first().reindex(out.index)[missing_unit])

    n = out["n"].to_numpy()
    several = n >= 2
    half = np.full(len(n), np.nan)
    if several.any():  # scipy only then: a plan's summary (one run each, the claim check) has none
        from scipy import stats
        half[several] = (stats.t.ppf(0.975, n[several] - 1) * out["std"].to_numpy()[several]
                         / np.sqrt(n[several]))
    out["ci95_low"] = out["mean"] - half
    out["ci95_high"] = out["mean"] + half

    spread = values.map(metrics.spread).reindex(out.index).astype(float)
    flag = values.map(metrics.spread_flag).reindex(out.index)
    reported = good.groupby("_gid")["reported_error"].mean().reindex(out.index)
    use_reported = reported.notna() & (out["n"] == 1)
    out["error"] = spread.where(~use_reported, reported)
    reported_flag = reported > metrics.SPREAD_LIMIT * out["mean"]
    out["spread_flag"] = flag.where(~use_reported, reported_flag).astype("boolean")
    out["host_busy"] = _host_busy(good).reindex(out.index).astype("boolean")
    out["short_window_flag"] = _short_windows(good).reindex(out.index).astype("boolean")

    failed = frame[~ok]
    # a run without a value counts as failed even if its status claims ok
    statuses = failed["status"].where(failed["status"].isin(FAILURE_STATUSES), "failed")
    counts = {gid: Counter(group) for gid, group in statuses.groupby(failed["_gid"])}
    out["n_failed"] = [sum(counts.get(g, Counter()).values()) for g in out.index]
    out["failures"] = [_failure_text(counts.get(g, Counter())) for g in out.index]
    out["status"] = [_summary_status(k, counts.get(g, Counter())) for g, k in zip(out.index, n)]
    for name, column in MEASURED_METRICS.items():
        out[name] = good.groupby("_gid")[column].mean().reindex(out.index).astype(float)
    for name, column in SETTING_METRICS.items():
        out[name] = frame.groupby("_gid")[column].first().reindex(out.index).astype(float)
    for name in SETTING_TEXT:
        if name not in frame:  # a table normalised before the column existed
            out[name] = pd.Series(pd.NA, index=out.index, dtype="string")
            continue
        own = _distinct_text(good, name).reindex(out.index)
        anyrun = _distinct_text(frame, name).reindex(out.index)
        out[name] = own.where(own.notna(), anyrun).astype("string")
    out["source"] = frame.groupby("_gid")["source"].first().reindex(out.index)
    return sort_rows(out[list(SUMMARY_COLUMNS)], KEYS)


def is_summary(df: pd.DataFrame) -> bool:
    """True when ``df`` is already a :func:`summarise` result."""
    return "n_failed" in df and "mean" in df and "variant" in df


def check_statistic(statistic: str) -> None:
    """Raise ValueError unless ``statistic`` is one a campaign may report."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic: '{statistic}' is not one of {', '.join(STATISTICS)}")


def summary_of(df: pd.DataFrame, statistic: str | None = None) -> pd.DataFrame:
    """Summary per configuration over its repetitions: n, mean, median, std, min, max, the
    95% confidence interval of the mean, error = max - min, a flag where the error exceeds
    10% of the mean, a flag where a run's window was too short to time, failures and status; ``value`` is the reported statistic (mean unless
    ``statistic`` says median); settings the runs recorded: the ``cores`` a process was
    pinned to and ``mkl_env``, the MKL/OpenMP environment variables the runs had ("none":
    none set). ``df`` passes as is when it already is a summary and no other statistic is
    asked for."""
    if not is_summary(df):
        return summarise(df, statistic or metrics.DEFAULT_STATISTIC)
    if statistic is None or df.empty:
        return df
    check_statistic(statistic)
    return df.assign(statistic=statistic, value=df[statistic])


def of_kind(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The rows of one record kind (``train`` or ``kernel``; rows without one are neither)."""
    return frame[frame["kind"].eq(kind).fillna(False).astype(bool)].copy()


def of_type(summary: pd.DataFrame, table: str, *, fallback: pd.Series | None = None) -> pd.DataFrame:
    """Configurations of the experiment types that feed ``table`` (their registry entries
    name it); rows without a type (imported results) are kept where ``fallback`` is true."""
    keep = summary["experiment_type"].isin(feeding(table)).fillna(False)
    if fallback is not None:
        keep = keep | (summary["experiment_type"].isna() & fallback.fillna(False))
    return summary[keep.astype(bool)].copy()


def derived_status(own: pd.Series, other: pd.Series, other_label: str) -> pd.Series:
    """Status of a derived value: the row's own failure, else the failure (or absence) of
    the value it is divided by, e.g. "baseline oom", "no baseline"; else "ok"."""
    own = own.astype(object).where(own.notna(), "missing")
    other = other.astype(object).where(other.notna(), None)
    result = []
    for a, b in zip(own, other):
        if a not in HAS_MEAN:
            result.append(str(a))
        elif b is None:
            result.append(f"no {other_label}")
        elif b not in HAS_MEAN:
            result.append(f"{other_label} {b}")
        else:
            result.append("ok")
    return pd.Series(result, index=own.index, dtype=object)


def with_baseline(frame: pd.DataFrame, axis: str, keys: Sequence[str], *,
                  value: int | None = None) -> pd.DataFrame:
    """Add ``baseline_<axis>``, ``baseline_value`` and ``baseline_status`` per group of
    ``keys``: the row whose ``axis`` equals ``value``, or the smallest ``axis`` when
    ``value`` is None. Where rows carry ``host_busy``, it becomes the ratio's: True where
    the row or its baseline shared its cores with other work (:func:`either_busy`)."""
    frame = frame.copy()
    if frame.empty:
        for name in (f"baseline_{axis}", "baseline_value", "baseline_status"):
            frame[name] = pd.Series(dtype=object)
        return frame
    frame["_gid"] = group_ids(frame, keys)
    ordered = frame.sort_values(["_gid", axis], kind="mergesort")
    if value is not None:
        ordered = ordered[ordered[axis] == value]
    base = ordered.drop_duplicates("_gid").set_index("_gid")
    frame[f"baseline_{axis}"] = frame["_gid"].map(base[axis]).astype("Int64")
    frame["baseline_value"] = frame["_gid"].map(base["value"]).astype(float)
    frame["baseline_status"] = frame["_gid"].map(base["status"])
    if "host_busy" in frame:  # a ratio over a baseline that shared its cores says so
        frame["host_busy"] = either_busy(frame["host_busy"], frame["_gid"].map(base["host_busy"]))
    return frame.drop(columns="_gid")


def either_busy(one: pd.Series, other: pd.Series) -> pd.Series:
    """``host_busy`` of a number built on two sides: True where either shared its cores
    with other work, False where both say they did not, else empty (Kleene's or)."""
    return one.astype("boolean") | other.astype("boolean")


def pair(summary: pd.DataFrame, axis: str, *, first: object, second: object,
         keys: Sequence[str]) -> pd.DataFrame:
    """Configurations that differ only in ``axis`` (``first`` vs ``second``), side by side.

    Returns the ``keys`` and ``value_1``, ``status_1``, ``value_2``, ``status_2`` for every
    group that has at least one of the two; a side that was not run is empty; and, where
    the summary carries it, ``host_busy`` of the pair (:func:`either_busy`).
    """
    keys = [k for k in keys if k != axis]
    sub = summary[summary[axis].isin([first, second]).fillna(False).astype(bool)].copy()
    if sub.empty:
        return empty(keys + ["value_1", "status_1", "value_2", "status_2"])
    sub["_gid"] = group_ids(sub, keys)
    base = sub.drop_duplicates("_gid").set_index("_gid")[keys]
    for index, side in ((1, first), (2, second)):
        part = sub[sub[axis] == side].drop_duplicates("_gid").set_index("_gid")
        base[f"value_{index}"] = part["value"].reindex(base.index).astype(float)
        base[f"status_{index}"] = part["status"].reindex(base.index)
        if "host_busy" in part:
            busy = part["host_busy"].reindex(base.index).astype("boolean")
            base["host_busy"] = busy if index == 1 else either_busy(base["host_busy"], busy)
    return base.reset_index(drop=True)


def pair_status(status_1: pd.Series, status_2: pd.Series, *, labels: tuple[str, str]) -> pd.Series:
    """"ok" when both sides have a mean, else which side failed or was not run."""
    result = []
    for a, b in zip(status_1.astype(object), status_2.astype(object)):
        parts = []
        for label, s in zip(labels, (a, b)):
            if s is None or s is pd.NA or (isinstance(s, float) and np.isnan(s)):
                parts.append(f"no {label}")
            elif s not in HAS_MEAN:
                parts.append(f"{label} {s}")
        result.append("; ".join(parts) if parts else "ok")
    return pd.Series(result, index=status_1.index, dtype=object)
