"""Before and after: two record sets of the same campaign, configuration by configuration.

A configuration is matched by its identity, never by provenance: the tidy table's
``KEYS`` (the record's ``CONFIG_FIELDS``, the series fields and the variant) plus its
``config_id``. A comparison *across* identity fields (``across``: e.g. the vendor library
on vs off, or one system vs another) matches without them and without ``config_id``,
which encodes them; their values are then reported among the changes.

For each configuration present on both sides, with the ok runs of each side:

    ratio      = statistic(new) / statistic(base)        (mean, or median)
    interval   = Welch's t interval on ln throughput     (archbench.core.metrics.ratio_interval)

and a verdict: faster or slower when the interval excludes 1 and the ratio lies outside
the practical band [1 / (1 + threshold), 1 + threshold]; no significant change otherwise;
not comparable with fewer than 2 ok runs on a side, different units, or a configuration
present on one side only. What changed in the runs' provenance (framework, oneDNN, image,
CPU, hosts, commit, CUDA...) is listed per configuration and summarised: each framework's
version under its framework's name, the CUDA stack of GPU runs only (a CPU run's tensors
never met it).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from archbench.core import metrics
from archbench.results.record_sets import DEFAULT_THRESHOLD, CompareError
from archbench.results.tables.common import KEYS, check_statistic, normalise, sort_rows
from archbench.workloads.training.frameworks import label

IDENTITY = (*KEYS, "config_id")
VERDICTS = ("slower", "faster", "no significant change", "not comparable")  # table order
PRESENT = ("both", "base only", "new only")
CONFIDENCE = 0.95
FAILURE_STATUSES = ("oom", "timeout", "failed")
# what a run was made with, by tidy-table column: never part of a configuration's identity
PROVENANCE = {
    "framework_version": "framework version",  # summarised per framework: "PyTorch version"
    "vendor_evidence_version": "oneDNN version (vendor evidence)",
    "vendor_evidence_library": "vendor library that ran (vendor evidence)",
    "image": "container image",
    "image_sha256": "image digest",
    "cpu_model": "CPU model",
    "hosts": "hosts",
    "git_commit": "archbench git commit",
    "cuda_version": "CUDA version",
    "cudnn_version": "cuDNN version",
    "nccl_version": "NCCL version",
    "gpu_models": "GPU models",
}
VERSION = "framework_version"  # one per framework: named by the configurations' framework
GPU_STACK = ("cuda_version", "cudnn_version", "nccl_version", "gpu_models")  # of GPU runs only
ENV = "env "  # the run's environment: one provenance field per variable, "env <NAME>"
SHORT_HEX = 12
COLUMNS = (
    "experiment", "system", "config_id", "config_id_new", "present", "statistic", "unit",
    "n_base", "n_new", "base", "new", "ratio", "gm_ratio", "ci95_low", "ci95_high",
    "verdict", "reason", "host_busy", "failures_base", "failures_new", "changed",
)
CHANGE_COLUMNS = ("field", "what", "changed", "configurations", "base", "new")


# ----------------------------------------------------------------- per configuration
@dataclass
class Runs:
    """The runs of one configuration on one side."""

    identity: dict
    framework: str = ""  # the framework its runs ran in (names its version)
    values: list[float] = field(default_factory=list)  # ok runs' throughputs
    units: set = field(default_factory=set)
    failures: Counter = field(default_factory=Counter)
    provenance: dict = field(default_factory=dict)  # column -> distinct texts
    busy: int = 0  # ok runs that shared their cores with other work (host_busy)

    def statistic(self, name: str) -> float:
        """The mean or median of the ok runs (NaN without one)."""
        if not self.values:
            return math.nan
        return float(np.mean(self.values) if name == "mean" else np.median(self.values))

    def failure_text(self) -> str:
        """"oom:2, timeout:1" (empty when no run failed)."""
        return ", ".join(f"{s}:{self.failures[s]}" for s in FAILURE_STATUSES if self.failures[s])


def _text(value: object) -> str | None:
    """A provenance value as text; long hex digests shortened; None when empty."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    if re.fullmatch(r"(sha256:)?[0-9a-f]{16,}", text):
        text = text.removeprefix("sha256:")[:SHORT_HEX]
    return text or None


def environment(frame: pd.DataFrame) -> pd.DataFrame:
    """The tidy table's ``env`` text (``NAME=value; ...``) as one column per variable,
    ``env <NAME>`` (empty where a run had no such variable)."""
    if "env" not in frame:
        return pd.DataFrame(index=frame.index)
    parsed = frame["env"].map(lambda text: dict(pair.split("=", 1) for pair in text.split("; ") if "=" in pair)
                              if isinstance(text, str) else {})
    names = sorted(set().union(*parsed)) if len(parsed) else []
    return pd.DataFrame({f"{ENV}{n}": parsed.map(lambda d, n=n: d.get(n)) for n in names},
                        index=frame.index, dtype=object)


def configurations(frame: pd.DataFrame, identity: Sequence[str], extra: Sequence[str] = ()) -> dict:
    """Runs per configuration of ``frame`` (key: its ``identity`` values), with the
    distinct values of the provenance columns, of each environment variable and of
    ``extra`` (the across fields)."""
    if frame.empty:
        return {}
    env = environment(frame)
    frame = pd.concat([frame, env], axis=1)
    columns = [c for c in (*PROVENANCE, *env.columns, *extra) if c in frame]
    shown = ("experiment", "system", "config_id")
    keys = frame[list(identity)].astype(object).where(frame[list(identity)].notna(), None)
    texts = pd.DataFrame({c: frame[c].astype(object).map(_text) for c in (*shown, *columns)})
    on_cpu = frame["device"].ne("gpu").fillna(True).to_numpy(dtype=bool) if "device" in frame \
        else np.ones(len(frame), dtype=bool)
    for c in (c for c in GPU_STACK if c in columns):  # a CUDA build's versions, never used
        texts[c] = texts[c].where(~on_cpu, None)
    framework = frame["framework"].astype(object).map(_text) if "framework" in frame else \
        pd.Series(None, index=frame.index, dtype=object)
    ok = (frame["status"].eq("ok").fillna(False) & frame["throughput"].notna()).to_numpy()
    status = frame["status"].astype(object).where(frame["status"].isin(FAILURE_STATUSES), "failed")
    busy = (frame["host_busy"].astype("boolean").fillna(False).to_numpy(dtype=bool)
            if "host_busy" in frame else np.zeros(len(frame), dtype=bool))
    found: dict[tuple, Runs] = {}
    rows = zip(keys.itertuples(index=False, name=None), texts.itertuples(index=False, name=None),
               ok, frame["throughput"].to_numpy(), frame["throughput_unit"].astype(object), status,
               framework, busy)
    for key, text, good, value, unit, failure, name, shared in rows:
        runs = found.get(key)
        if runs is None:
            runs = found[key] = Runs(dict(zip(shown, text)), name or "",
                                     provenance={c: set() for c in columns})
        if good:
            runs.values.append(float(value))
            runs.units.add(str(unit))
            runs.busy += bool(shared)
        else:
            runs.failures[failure] += 1
        for c, t in zip(columns, text[len(shown):]):
            if t is not None:
                runs.provenance[c].add(t)
    return found


def verdict(ratio: float, interval: tuple[float, float], threshold: float) -> tuple[str, str]:
    """(verdict, reason) of a ratio and its interval: faster or slower when the interval
    excludes 1 and the ratio lies outside [1 / (1 + threshold), 1 + threshold]."""
    low, high = interval
    band = 1 + threshold
    if low > 1 and ratio > band:
        return "faster", ""
    if high < 1 and ratio < 1 / band:
        return "slower", ""
    if low <= 1 <= high:
        return "no significant change", "interval contains 1"
    if 1 / band <= ratio <= band:
        return "no significant change", f"within the +/-{threshold:.1%} threshold"
    return "no significant change", "the statistic's ratio and the interval disagree"


def fields(base: Iterable[Runs], new: Iterable[Runs], across: Sequence[str] = ()) -> list[str]:
    """The provenance fields the runs of either side give a value, in a fixed order: ``PROVENANCE``'s,
    the environment variables by name, then the across fields."""
    held = {c for side in (base, new) for runs in side for c, values in runs.provenance.items() if values}
    env = sorted(c for c in held if c.startswith(ENV))
    return [c for c in (*PROVENANCE, *env, *across) if c in held]


def _changed(base: Runs, new: Runs, across: Sequence[str]) -> str:
    """The provenance fields whose values differ: "field: a -> b; ..."."""
    parts = []
    for c in fields([base], [new], across):
        a, b = sorted(base.provenance.get(c, set())), sorted(new.provenance.get(c, set()))
        if c == VERSION and base.framework != new.framework:  # across frameworks: name each
            a, b = ([f"{label(r.framework)} {v}" for v in vs] for r, vs in ((base, a), (new, b)))
        if a != b:
            parts.append(f"{c}: {' | '.join(a) or 'none'} -> {' | '.join(b) or 'none'}")
    return "; ".join(parts)


def _row(base: Runs | None, new: Runs | None, *, statistic: str, threshold: float,
         across: Sequence[str] = ()) -> dict:
    """One row of the comparison table."""
    either = base or new
    row = {**either.identity, "present": "both" if base and new else
           ("base only" if base else "new only"), "statistic": statistic}
    if base and new and new.identity["config_id"] != base.identity["config_id"]:
        row["config_id_new"] = new.identity["config_id"]
    for name, runs in (("base", base), ("new", new)):
        if runs:
            row.update({f"n_{name}": len(runs.values), name: runs.statistic(statistic),
                        f"failures_{name}": runs.failure_text()})
    units = sorted((base.units if base else set()) | (new.units if new else set()))
    row["unit"] = " | ".join(units)
    if not (base and new):
        return {**row, "verdict": "not comparable", "reason": f"only in {row['present'].split()[0]}"}
    row["changed"] = _changed(base, new, across)
    short = [f"{name}: {len(r.values)} ok run(s)" + (f" ({r.failure_text()})" if r.failures else "")
             for name, r in (("base", base), ("new", new))
             if len(r.values) < metrics.MIN_REPETITIONS_TO_COMPARE]
    mixed = [f"{name} mixes {f}: {' | '.join(sorted(r.provenance[f]))}"
             for name, r in (("base", base), ("new", new)) for f in across if len(r.provenance[f]) > 1]
    if mixed:
        return {**row, "verdict": "not comparable", "reason": "; ".join(mixed) + " (filter each side)"}
    if short:
        need = f"; needs {metrics.MIN_REPETITIONS_TO_COMPARE} per side"
        return {**row, "verdict": "not comparable", "reason": "; ".join(short) + need}
    if len(units) > 1:
        return {**row, "verdict": "not comparable", "reason": f"units differ: {' vs '.join(units)}"}
    try:
        gm, low, high, _ = metrics.ratio_interval(base.values, new.values, CONFIDENCE)
    except OverflowError:  # a spread of hundreds of orders of magnitude: no interval to give
        return {**row, "verdict": "not comparable", "reason": "the ratio's interval overflows"}
    ratio = row["new"] / row["base"]
    verdict_, reason = verdict(ratio, (low, high), threshold)
    if base.busy or new.busy:  # the change may be another process's load
        row["host_busy"] = True
        shared = "; ".join(f"{name}: {r.busy} of {len(r.values)} ok run(s) shared their cores"
                           for name, r in (("base", base), ("new", new)) if r.busy)
        reason = f"{reason}; host busy ({shared})" if reason else f"host busy ({shared})"
    return {**row, "ratio": ratio, "gm_ratio": gm, "ci95_low": low, "ci95_high": high,
            "verdict": verdict_, "reason": reason}


# ----------------------------------------------------------------------- the comparison
@dataclass
class Comparison:
    """A comparison's table (one row per configuration), its summary of provenance
    changes, and the settings it was made with."""

    table: pd.DataFrame
    changes: pd.DataFrame
    statistic: str
    threshold: float
    across: tuple[str, ...] = ()

    def caption(self) -> str:
        """How its numbers were made (:func:`caption`)."""
        return caption(self.statistic, self.threshold, self.across)

    def counts(self) -> dict[str, int]:
        """Configurations per verdict (every verdict named, 0 included)."""
        seen = Counter(self.table["verdict"]) if not self.table.empty else Counter()
        return {v: seen[v] for v in VERDICTS}

    def regressions(self, below: float) -> pd.DataFrame:
        """Significant slowdowns whose ratio is below ``below``."""
        t = self.table
        return t[(t["verdict"] == "slower") & (t["ratio"] < below)] if not t.empty else t


def compare(base: pd.DataFrame, new: pd.DataFrame, *, statistic: str = metrics.DEFAULT_STATISTIC,
            threshold: float = DEFAULT_THRESHOLD, across: Iterable[str] = ()) -> Comparison:
    """Compare the tidy tables ``base`` and ``new`` configuration by configuration (see the
    module docstring); ``across``: identity fields matched without (their values become
    changes)."""
    check_statistic(statistic)
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise CompareError(f"threshold: {threshold} is not a non-negative number")
    across = tuple(sorted(set(across)))
    unknown = [f for f in across if f not in KEYS]
    if unknown:
        raise CompareError(f"across: {', '.join(unknown)} not identity fields ({', '.join(KEYS)})")
    identity = [c for c in IDENTITY if c not in across and not (across and c == "config_id")]
    sides = [configurations(normalise(f) if "variant" not in f else f, identity, across)
             for f in (base, new)]
    rows = [_row(sides[0].get(k), sides[1].get(k), statistic=statistic, threshold=threshold,
                 across=across)
            for k in {**sides[0], **sides[1]}]
    table = pd.DataFrame(rows, columns=list(COLUMNS)) if rows else pd.DataFrame(columns=list(COLUMNS))
    for name in ("n_base", "n_new"):
        table[name] = table[name].astype("Int64")
    for name in ("base", "new", "ratio", "gm_ratio", "ci95_low", "ci95_high"):
        table[name] = table[name].astype(float)
    table["_rank"] = table["verdict"].map(VERDICTS.index)
    table["_side"] = table["present"].map(PRESENT.index)
    table = sort_rows(table, ["_rank", "ratio", "_side", "experiment", "system", "config_id",
                              "config_id_new"]).drop(columns=["_rank", "_side"])
    changes = summarise_changes(sides[0], sides[1], across)
    return Comparison(table, changes, statistic, threshold, across)


def summarise_changes(base: dict, new: dict, across: Sequence[str] = ()) -> pd.DataFrame:
    """Per provenance field (and across field) with a value on either side: what it is,
    whether it changed, in how many of the configurations present on both sides, and its
    values on each side (distinct, over every run)."""
    both = [k for k in base if k in new]
    rows = []
    for column in fields(base.values(), new.values(), across):
        what = PROVENANCE.get(column) or ("compared across" if column in across else "environment variable")
        names = sorted({r.framework for side in (base, new) for r in side.values()}) \
            if column == VERSION else [None]
        for name in names:  # each framework's version under its own name
            def held(runs: Runs, name=name) -> list[str]:
                mine = name is None or runs.framework == name
                return sorted(runs.provenance.get(column, set())) if mine else []
            values = [sorted(set().union(*map(held, side.values()))) for side in (base, new)]
            if not (values[0] or values[1]):
                continue
            differ = sum(held(base[k]) != held(new[k]) for k in both)
            rows.append({"field": column, "what": f"{label(name)} version" if name else what,
                         "changed": values[0] != values[1] or differ > 0,
                         "configurations": f"{differ} of {len(both)}",
                         "base": " | ".join(values[0]) or "none", "new": " | ".join(values[1]) or "none"})
    return pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))


def caption(statistic: str = metrics.DEFAULT_STATISTIC, threshold: float = DEFAULT_THRESHOLD,
            across: Sequence[str] = ()) -> str:
    """How a comparison's numbers were made, for its figure and tables."""
    band = 1 + threshold
    matched = f" Configurations are matched across {', '.join(across)}." if across else ""
    return (f"Ratio new / base of the {statistic} throughput of each configuration (matched "
            f"by identity fields and config_id, never by provenance), with the "
            f"{CONFIDENCE:.0%} confidence interval of Welch's t test on ln throughput: "
            f"exp(d -/+ t(dof) se), d the difference of the sides' mean ln throughput, se = "
            f"sqrt(s_new^2/n_new + s_base^2/n_base), dof Welch-Satterthwaite. Faster or slower "
            f"when the interval excludes 1 and the ratio lies outside the band "
            f"[{1 / band:.3f}, {band:.3f}] (threshold {threshold:.1%}, shaded); a side needs "
            f"{metrics.MIN_REPETITIONS_TO_COMPARE} ok runs.{matched}")
