"""Claims against the campaign that imports them, checked before any job runs.

A claim (a row of a claims file, :mod:`archbench.results.claims`) that no configuration of
its campaign can ever match would only read "not measured" in ``vs_published``: a
misspelt model, a system the campaign does not run, a column its metric's table does not
have, a baseline count the series lacks. :func:`check_claims` refuses such a claim when the campaign is planned
(``archbench check``, the workflow), with one line naming the file, the row and the column.

What "can match" means is what ``vs_published`` computes: the metric's table is built from
the campaign's plan as if every configuration had run once (:func:`planned_runs`), and
the claim must get a value from some row of it. Where a table keeps the best of several
rows (the best parameter-server setting, the best core count of an inter/intra sweep),
any of them may turn out best, so the claim is held against all of them
(``Metric.candidates``); a node-scaling ``best:`` configuration may take any layout of
the sweeps it names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from archbench.core.csvfile import ImportFormatError, show
from archbench.core.metrics import layout_counts
from archbench.core.fields import config_id
from archbench.plan.experiment_types.node_scaling import best_sources
from archbench.results.claims import METRICS, identity_of, is_claims_file, read_claims
from archbench.results.collect import env_text, mkl_env_text
from archbench.results.tables.best import LAYOUT_FIELDS
from archbench.results.tables.common import summary_of
from archbench.results.tables.vs_published import BUILDERS, RowMatcher, claim_values, table_column

SHOWN_VALUES = 8  # values a refusal lists of the column it names


def planned_runs(measurements: Iterable[dict]) -> pd.DataFrame:
    """The tidy table of the plan: one successful run per configuration (its first
    repetition), every ``best:`` configuration once per layout of its sweeps."""
    measurements = list(measurements)
    rows = []
    for m in measurements:
        if m.get("repetition", 0) == 0:
            rows.extend(_run(c) for c in _layouts(m, measurements))
    return pd.DataFrame(rows)


def _run(m: dict) -> dict:
    """One ok tidy-table row of measurement ``m``, with the settings a record carries."""
    env, tuning = m.get("env") or {}, m.get("tuning") or {}
    row = {k: v for k, v in m.items() if k not in ("env", "tuning", "best_of")}
    row.update(throughput=1.0, throughput_unit=m.get("throughput_unit", "img/s"), status="ok",
               env=env_text(env), mkl_env=mkl_env_text(env))
    if "cores" in tuning:
        row["metric_cores"] = tuning["cores"]
    if "horovod_cycle_time_ms" in tuning:
        row["metric_horovod_cycle_time"] = tuning["horovod_cycle_time_ms"]
    return row


def _layouts(m: dict, measurements: list[dict]) -> list[dict]:
    """``m``, or for a ``best:`` placeholder one measurement per layout its sweeps ran for
    its system, framework and model (as :func:`archbench.results.tables.best.resolve_best`
    makes it)."""
    if not m.get("best_of"):
        return [m]
    sources = set(best_sources(m["best_of"]))
    layouts = {tuple(s[k] for k in LAYOUT_FIELDS) for s in measurements
               if s["experiment"] in sources and s.get("repetition", 0) == 0
               and all(s.get(k) == m.get(k) for k in ("system", "framework", "model"))}
    out = []
    for layout in sorted(layouts):
        resolved = {**m, **dict(zip(LAYOUT_FIELDS, layout))}
        resolved.update(layout_counts(resolved))
        resolved["config_id"] = config_id(resolved)
        out.append(resolved)
    return out


def planned_summary(measurements: Iterable[dict]) -> pd.DataFrame:
    """The summary of :func:`planned_runs`, what :func:`check_claims` builds tables from."""
    return summary_of(planned_runs(measurements))


def check_claims(paths: Iterable[str | os.PathLike], summary: pd.DataFrame) -> None:
    """Raise ImportFormatError ('FILE: row N: column 'C': why', one line) for the first
    claim of the claims files among ``paths`` that no configuration of a campaign's plan
    (``summary``, :func:`planned_summary`) can match. Import files pass: their rows are
    measurements merged into the tables, which may well be of other systems."""
    built: dict[str, pd.DataFrame] = {}
    rows = {"summary": RowMatcher(summary)}  # each table's, kept across claims
    for path in (Path(p) for p in paths if is_claims_file(p)):
        for _, claim in read_claims(path).iterrows():
            metric = METRICS[claim["metric"]]
            name = metric.candidates or metric.table
            if name not in built:
                built[name] = BUILDERS[name](summary).reset_index(drop=True)
                rows[name] = RowMatcher(built[name])
            why = unmatched(claim, built[name], name, summary,
                            rows=rows[name], summary_rows=rows["summary"])
            if why:
                row = str(claim["file"]).rsplit(", row ", 1)[1]  # read_claims: "NAME, row N"
                raise ImportFormatError(f"{path}: row {row}: {why}")


def unmatched(claim: pd.Series, table: pd.DataFrame, name: str,
              summary: pd.DataFrame | None = None, *, rows: RowMatcher | None = None,
              summary_rows: RowMatcher | None = None) -> str | None:
    """Why ``claim`` gets no value from any row of ``table`` (the table ``name`` of its
    metric, built from the plan ``summary``), as "column 'C': reason"; None when some row
    gives one. The column named is the first that matches nothing: a value no
    configuration of the whole plan has, else (the metric's table empty) the metric,
    else the first column, in :data:`~archbench.results.claims.IDENTITY` order, that no
    configuration agreeing with the columns before it has. ``rows``, ``summary_rows``: the
    :class:`~archbench.results.tables.vs_published.RowMatcher` of each, kept across claims."""
    identity = identity_of(claim)
    rows = rows or RowMatcher(table)
    if summary is not None:
        summary_rows = summary_rows or RowMatcher(summary)
    for key in identity:
        if table_column(table, key) is None:
            return f"column '{key}': the {name} table, which gives {claim['metric']}, has no such column"
    for key, value in identity.items():  # a name the campaign never runs, whatever the metric
        if summary is not None and table_column(summary, key) is not None \
                and not summary_rows({key: value}).any():
            return (f"column '{key}': {_shown(value)} matches no configuration of the campaign "
                    f"({_values_of(summary, key)})")
    if table.empty:
        return (f"column 'metric': no configuration of the campaign gives a {claim['metric']} "
                f"(its {name} table is empty)")
    mask, before = rows({}), {}
    for key, value in identity.items():
        narrowed = mask & rows({key: value})
        if not narrowed.any():
            return (f"column '{key}': {_shown(value)} matches no configuration of the "
                    f"campaign{_with(before)} ({_values_of(table[mask], key)})")
        mask, before = narrowed, {**before, key: value}
    if claim_values(claim, table, rows).empty:
        if "baseline" in claim and not pd.isna(claim["baseline"]):
            metric = METRICS[claim["metric"]]
            return (f"column 'baseline': no configuration it matches has a series with "
                    f"{metric.count} {int(claim['baseline'])}")
        return f"column 'metric': no configuration it matches gives a {claim['metric']}"
    return None


def _plain(value: object) -> str:
    """A claim's value as written: counts without a decimal point."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _shown(value: object) -> str:
    return f"'{show(value)}'" if isinstance(value, str) else _plain(value)


def _with(identity: dict) -> str:
    """' with k=v, ...' of the columns matched so far ('' for none)."""
    return " with " + ", ".join(f"{k}={_plain(v)}" for k, v in identity.items()) if identity else ""


def _values_of(rows: pd.DataFrame, key: str) -> str:
    """'it runs KEY a, b, ...' for the refusal: what the column holds instead."""
    values = sorted({str(v) for v in rows[table_column(rows, key)].dropna()})
    if not values:
        return f"none has a {key}"
    more = f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else ""
    return f"it runs {key} {', '.join(values[:SHOWN_VALUES])}{more}"
