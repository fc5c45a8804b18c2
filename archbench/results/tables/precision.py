"""Precision, fp32 math mode and graph against fp32 strict eager (docs/metrics.md,
"Precision speedup"): every training configuration that runs another precision, math mode
or graph, against its twin that runs fp32, strict, eager and is the same otherwise.

Two configurations are twins when their identity (:data:`common.KEYS`) agrees in all but
the three numerics settings (:data:`archbench.core.fields.NUMERICS`): experiment,
system, device, framework, model, data, strategy, vendor setting, layout, threads, batch,
image size and variant (the tuning and environment hash, which the numerics settings do not
enter). Each row carries what the vendor probe saw execute (``executed_precision``) and the
label comparing it with the request (``evidence_label``: "bf16 requested, fp32 executed"),
and a quality flag: the configuration's loss over the last third of its measured steps
departs from its twin's by more than the tolerance (:func:`metrics.loss_departs`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archbench.core import metrics
from archbench.core.fields import EVERY_TABLE, NUMERICS, NUMERICS_DEFAULTS
from archbench.results.tables.common import (
    KEYS,
    empty,
    group_ids,
    is_summary,
    normalise,
    of_kind,
    pair_status,
    sort_rows,
    summary_of,
)
from archbench.results.tables.frameworks import _identity, _interval, _run_values

COLUMNS = (
    "experiment", "system", "device", "framework", "model", "data", "strategy",
    "vendor_library_enabled", "nodes", "processes_per_node", "gpus_per_node", "intra_threads",
    "inter_threads", "batch_per_process", "image_size",
    *(name for name in EVERY_TABLE if name not in NUMERICS), "variant", *NUMERICS, "statistic",
    "n", "img_s", "img_s_min", "img_s_max", "n_twin", "img_s_twin", "img_s_twin_min",
    "img_s_twin_max", "speedup", "speedup_ci95_low", "speedup_ci95_high", "compile_s",
    "executed_precision", "evidence_label", "loss_tail", "loss_tail_twin", "loss_change",
    "quality_flag", "host_busy", "status",
)
ORDER = COLUMNS[:COLUMNS.index("statistic")]


def _is_twin(frame: pd.DataFrame) -> pd.Series:
    """True for the rows that run fp32, strict, eager (every numerics setting its default)."""
    twin = pd.Series(True, index=frame.index)
    for name, default in NUMERICS_DEFAULTS.items():
        twin &= frame[name].eq(default).fillna(False).astype(bool)
    return twin


def _quality(loss: pd.Series, twin: pd.Series) -> pd.Series:
    """Per row: True when ``loss`` departs from ``twin`` beyond the tolerance
    (:func:`metrics.loss_departs`), False when not, missing without both losses."""
    flags = [pd.NA if pd.isna(a) or pd.isna(b) else metrics.loss_departs(float(a), float(b))
             for a, b in zip(loss, twin)]
    return pd.Series(flags, index=loss.index, dtype="boolean")


def _troubled(runs: pd.DataFrame | None) -> set[tuple]:
    """The configurations (identity tuples) of which an ok run's losses do not show it
    training (:func:`metrics.loss_trouble`: not finite, or rising)."""
    if runs is None or runs.empty or "loss_decreased" not in runs:
        return set()
    ok = runs[runs["status"].eq("ok").fillna(False).astype(bool)]
    cells = ok[["loss_first", "loss_tail", "loss_decreased"]].astype(object)
    cells = cells.where(cells.notna(), None)
    return {key for key, (first, tail, decreased) in zip(_identity(ok), cells.itertuples(index=False))
            if metrics.loss_trouble(first, tail, decreased)}


def precision_speedup(df: pd.DataFrame, statistic: str | None = None) -> pd.DataFrame:
    """Precision speedup = img/s of a precision / math mode / graph configuration over its
    fp32-strict-eager twin (the same system, device, framework, model, data, strategy,
    vendor setting, layout, threads, batch and image size; :func:`metrics.precision_speedup`;
    above 1: faster), both the campaign's statistic of their ok runs, with min and max, and
    its 95% interval (Welch's t interval on ln img/s, :func:`metrics.ratio_interval`; empty
    with fewer than 2 ok runs a side); ``compile_s``: the compiling first step (compiled
    graphs; not in the window); ``executed_precision``: what the vendor probe saw the
    computing primitives run in, ``evidence_label``: how it compares with the request
    ("bf16 requested, fp32 executed"; empty when they agree); ``loss_tail``: the mean loss
    of the last third of the measured steps (mean over the ok runs), ``loss_change`` =
    loss_tail - loss_tail_twin, and ``quality_flag`` true where ``|loss_change|`` > max(10 % of
    loss_tail_twin, 0.02) (:func:`metrics.loss_departs`), or where an ok run of either side
    has losses that are not finite or rise (:func:`metrics.loss_trouble`): the faster
    number may not train the same model; ``host_busy`` where either side shared its cores
    with other work (:mod:`archbench.core.hostload`): the speedup may be the other load's.
    Status names a failed or missing side ("twin oom", "no twin").
    Quality-gate runs (experiment type ``quality``) are left out: they train to a target,
    not over a window, and the ``time_to_accuracy`` table compares them."""
    summary = summary_of(df, statistic)
    runs = None if is_summary(df) else (df if "variant" in df else normalise(df))
    s = of_kind(summary, "train")
    if "experiment_type" in s:
        s = s[s["experiment_type"] != "quality"]
    if s.empty:
        return empty(COLUMNS)
    keys = [k for k in KEYS if k not in NUMERICS]
    s = s.reset_index(drop=True).assign(_gid=group_ids(s, keys))
    twin = _is_twin(s)
    out = s[~twin].copy()
    if out.empty:
        return empty(COLUMNS)
    base = s[twin].drop_duplicates("_gid").set_index("_gid")
    side = {"n_twin": "n", "img_s_twin": "value", "img_s_twin_min": "min",
            "img_s_twin_max": "max", "loss_tail_twin": "loss_tail", "_status_twin": "status",
            "_busy_twin": "host_busy"}
    for name, column in side.items():
        out[name] = out["_gid"].map(base[column])
    out["img_s"], out["img_s_min"], out["img_s_max"] = out["value"], out["min"], out["max"]
    out["speedup"] = metrics.precision_speedup(out["img_s"].astype(float),
                                               out["img_s_twin"].astype(float))
    values = _run_values(runs)
    twin_key = base.assign(_key=_identity(base))["_key"] if not base.empty else pd.Series(dtype=object)
    intervals = [_interval(values.get(twin_key.get(g), []), values.get(k, []))
                 for g, k in zip(out["_gid"], _identity(out))]
    out["speedup_ci95_low"] = [low for low, _ in intervals]
    out["speedup_ci95_high"] = [high for _, high in intervals]
    out["loss_change"] = out["loss_tail"].astype(float) - out["loss_tail_twin"].astype(float)
    troubled = _troubled(runs)
    out["quality_flag"] = _quality(out["loss_tail"], out["loss_tail_twin"]).mask(
        [bool(troubled & {k, twin_key.get(g)}) for g, k in zip(out["_gid"], _identity(out))], True)
    out["host_busy"] = out["host_busy"].astype("boolean") | out["_busy_twin"].astype("boolean")
    out["status"] = pair_status(out["_status_twin"].astype(object).where(out["_gid"].isin(base.index), None),
                                out["status"], labels=("twin", "config"))
    out["status"] = out["status"].str.replace("config ", "", regex=False)
    out["evidence_label"] = out["evidence_label"].astype(object).where(out["evidence_label"].notna(), "")
    out["variant"] = out["variant"].astype("string").mask(out["variant"].eq("").fillna(False))
    out["n_twin"] = pd.to_numeric(out["n_twin"]).astype("Int64")
    out.loc[out["speedup"].isin([np.inf, -np.inf]), "speedup"] = np.nan
    return sort_rows(out.reindex(columns=list(COLUMNS)), ORDER)
