"""Framework against framework (docs/metrics.md, "Framework ratio"): every configuration
run in two registered frameworks, side by side, each framework against the base its
experiment names (``framework_base``; :data:`DEFAULT_FRAMEWORK`, TensorFlow, unless named), e.g.
PyTorch against TensorFlow.

Two configurations are twins when their identity (:data:`common.KEYS`) agrees in all but
the framework: experiment, system, device, model, data, strategy, vendor setting, layout
(nodes x processes per node, GPUs), threads, batch, image size. Their variants (the hash
of each configuration's tuning and environment) are compared through the settings the
runs record (pinned cores, Horovod cycle time and fusion threshold, the MKL/OpenMP
environment), not as hashes: a setting only one framework takes (``Framework.tuning``,
PyTorch's ``loader_workers``) enters its configurations' hash and never its twin's. Where
one framework has several configurations that agree on all of that (e.g. two Horovod
controllers), the variants must be equal too.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from archbench.core import metrics
from archbench.core.fields import DEFAULT_FRAMEWORK, EVERY_TABLE
from archbench.workloads.training.frameworks import FRAMEWORKS
from archbench.results.tables.common import (
    KEYS,
    empty,
    group_ids,
    is_summary,
    normalise,
    of_kind,
    of_type,
    pair_status,
    sort_rows,
    summary_of,
)

# recorded settings that stand for the variant (summary columns)
SETTINGS = ("cores", "horovod_cycle_time_ms", "horovod_fusion_threshold_bytes", "mkl_env")
IDENTITY = (
    "experiment", "system", "device", "model", *EVERY_TABLE,
    "data", "strategy", "vendor_library",
    "vendor_library_enabled", "layout", "nodes", "processes_per_node", "gpus_per_node",
    "workers", "intra_threads", "inter_threads", "batch_per_process", "global_batch",
    "image_size", "cores", "variant",
)
SIDE = ("n", "img_s", "img_s_min", "img_s_max", "cv")
ORDER = ("experiment", "system", "device", "model", *EVERY_TABLE, "data", "strategy",
         "vendor_library_enabled", "nodes", "processes_per_node", "gpus_per_node",
         "intra_threads", "inter_threads", "batch_per_process", "cores", "variant")


def tuning_columns() -> tuple[str, ...]:
    """The settings only some registered frameworks take (``Framework.tuning``, e.g.
    PyTorch's ``loader_workers``), in the registry's order: a column each."""
    return tuple(dict.fromkeys(k for f in FRAMEWORKS.values() for k in f.tuning))


def columns() -> tuple[str, ...]:
    """The table's columns: the configuration, then the pair (``framework`` against
    ``base``), each registered framework's side (``img_s_<framework>`` ...), the ratio."""
    return (*IDENTITY, *tuning_columns(), "statistic", "framework", "base",
            *(f"{c}_{f}" for f in FRAMEWORKS for c in SIDE),
            "ratio", "ratio_ci95_low", "ratio_ci95_high", "host_busy", "status")


def layout_text(frame: pd.DataFrame) -> pd.Series:
    """The layout of each row: "1 node x 2 ppn" (processes per node), on GPUs "2 nodes x
    4 GPUs" (one process per GPU)."""
    def text(nodes: object, per_node: object, device: object) -> str:
        unit = "GPUs" if device == "gpu" else "ppn"
        return f"{nodes} node{'' if nodes == 1 else 's'} x {per_node} {unit}"
    return pd.Series([text(n, p, d) for n, p, d in zip(
        frame["nodes"], frame["processes_per_node"], frame["device"])], index=frame.index,
        dtype=object)


def _identity(frame: pd.DataFrame) -> pd.Series:
    """Each row's configuration identity (KEYS) as a tuple, missing values as None."""
    keys = frame[list(KEYS)].astype(object)
    return keys.where(keys.notna(), None).apply(tuple, axis=1)


def _run_values(runs: pd.DataFrame | None) -> dict[tuple, list[float]]:
    """The throughputs of the ok runs of every configuration of the tidy table ``runs``."""
    if runs is None or runs.empty:
        return {}
    ok = runs[runs["status"].eq("ok").fillna(False).astype(bool) & runs["throughput"].notna()]
    values: dict[tuple, list[float]] = {}
    for key, value in zip(_identity(ok), ok["throughput"]):
        values.setdefault(key, []).append(float(value))
    return values


def _matched(s: pd.DataFrame) -> pd.DataFrame:
    """``s`` (configurations of two frameworks) with ``_gid``, one id per pair of twins."""
    keys = [k for k in KEYS if k not in ("framework", "variant")] + [c for c in SETTINGS if c in s]
    s = s.assign(_gid=group_ids(s, keys))
    several = s.groupby(["_gid", "framework"])["framework"].transform("size").gt(1)
    ambiguous = several.groupby(s["_gid"]).transform("any").astype(bool)
    s["_variant"] = s["variant"].astype(object).where(ambiguous, "")
    return s.assign(_gid=group_ids(s, [*keys, "_variant"]))


def _of(s: pd.DataFrame, framework: str) -> pd.DataFrame:
    """The configurations of ``framework`` in ``s``, one per pair id."""
    return s[s["framework"].eq(framework).fillna(False).astype(bool)].drop_duplicates("_gid")


def _side(s: pd.DataFrame, framework: str) -> pd.DataFrame:
    """The configurations of ``framework``, one per pair id, their columns named for it."""
    part = _of(s, framework)
    out = pd.DataFrame({"_gid": part["_gid"], "n": part["n"], "img_s": part["value"],
                        "img_s_min": part["min"], "img_s_max": part["max"],
                        "cv": metrics.coefficient_of_variation(part["std"], part["mean"]),
                        "status": part["status"], "busy": part["host_busy"],
                        "_key": _identity(part)})
    return out.set_index("_gid").add_suffix(f"_{framework}")


def _interval(base: list[float], other: list[float]) -> tuple[float, float]:
    """The 95% interval of the ratio (:func:`metrics.ratio_interval`), NaN without two
    positive values a side."""
    if min(len(base), len(other)) < metrics.MIN_REPETITIONS_TO_COMPARE or min(*base, *other) <= 0:
        return np.nan, np.nan
    _, low, high, _ = metrics.ratio_interval(base, other, 0.95)
    return low, high


def _pairs(s: pd.DataFrame, base: str, other: str, values: dict[tuple, list[float]]) -> pd.DataFrame:
    """The rows of framework ``other`` against ``base`` from the configurations ``s`` of
    experiments whose base is ``base`` (empty without twins)."""
    s = s[s["framework"].isin([base, other]).fillna(False).astype(bool)]
    if s.empty:
        return pd.DataFrame()
    s = _matched(s.reset_index(drop=True))
    both = _side(s, base).join(_side(s, other), how="inner")
    if both.empty:
        return pd.DataFrame()
    out = _of(s, base).set_index("_gid").loc[both.index].join(both)
    for name in tuning_columns():  # a framework's own setting, from the side that takes it
        owner = next((f for f in (other, base) if name in FRAMEWORKS[f].tuning), None)
        out[name] = (np.nan if owner is None or name not in s
                     else _of(s, owner).set_index("_gid")[name].reindex(out.index))
    out["layout"] = layout_text(out)
    out["ratio"] = metrics.framework_ratio(out[f"img_s_{other}"].astype(float),
                                           out[f"img_s_{base}"].astype(float))
    intervals = [_interval(values.get(a, []), values.get(b, []))
                 for a, b in zip(out[f"_key_{base}"], out[f"_key_{other}"])]
    out["ratio_ci95_low"] = [low for low, _ in intervals]
    out["ratio_ci95_high"] = [high for _, high in intervals]
    out["status"] = pair_status(out[f"status_{base}"], out[f"status_{other}"], labels=(base, other))
    out["host_busy"] = out[f"busy_{base}"].astype("boolean") | out[f"busy_{other}"].astype("boolean")
    out["variant"] = out["variant"].astype("string").mask(out["variant"].eq("").fillna(False))
    return out.assign(framework=other, base=base, _other=list(FRAMEWORKS).index(other))


def framework_comparison(df: pd.DataFrame, statistic: str | None = None,
                         bases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Each framework against its experiment's base (``framework_base``, TensorFlow unless
    the campaign names another): every configuration run in both (the same experiment,
    system, device, model, data, strategy, vendor setting, layout = nodes x processes per
    node or GPUs per node, threads, batch and settings), each framework's img/s (the
    campaign's statistic of its ok runs) with ``n``, min, max and the coefficient of
    variation ``cv`` = std / mean of its repetitions, and ratio = img/s ``framework`` /
    img/s ``base``, e.g. PyTorch / TensorFlow (:func:`metrics.framework_ratio`; above 1:
    ``framework`` is faster) with its 95% interval (Welch's t interval on ln img/s,
    :func:`metrics.ratio_interval`; empty with fewer than 2 ok runs a side). A setting
    only one framework takes (``loader_workers``: PyTorch's DataLoader workers where the
    experiment sets them) is that framework's; ``variant``: the base's; ``host_busy``:
    either side shared its cores with other work (the ratio may be the other load's). Status names a
    failed side ("pytorch oom")."""
    bases = bases or {}
    summary = summary_of(df, statistic)
    runs = None if is_summary(df) else (df if "variant" in df else normalise(df))
    s = of_type(of_kind(summary, "train"), "framework_comparison")
    s = s[s["framework"].isin(list(FRAMEWORKS)).fillna(False).astype(bool)]
    if s.empty:
        return empty(columns())
    base_of = s["experiment"].map(lambda e: bases.get(e, DEFAULT_FRAMEWORK))
    values = _run_values(runs)
    parts = [_pairs(s[base_of.eq(base)], base, other, values)
             for base in FRAMEWORKS for other in FRAMEWORKS if other != base]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return empty(columns())
    out = pd.concat(parts, ignore_index=True)
    for name in ("cores", *tuning_columns()):  # counts the runs recorded as metrics
        out[name] = pd.to_numeric(out[name], errors="coerce").astype(float).round().astype("Int64")
    # the sides of frameworks in no pair of this campaign stay empty columns
    return sort_rows(out, [*ORDER, "_other"]).reindex(columns=list(columns()))
