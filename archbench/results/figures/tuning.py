"""The tuner's progress: per tuning study a panel of img/s against the node-hours spent,
runs in start order; a marker per rung for each run's own img/s, the best-so-far line, and
the best of the sweep the trials name as a dashed line. Numbers come from the table
``tuning`` and the runs behind it."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.core import metrics
from archbench.results.figures.labels import number
from archbench.results.figures.style import (
    MARKERS,
    grid,
    mark_failures,
    no_data,
    palette,
    shared_legend,
    style,
)
from archbench.results.tables.tuning import GROUP, NUMERICS, studies, tune_runs
from archbench.results.tables.tuning import tuning as tuning_table

NAME = "Tuning: best so far against node-hours"
PANELS = [*GROUP, *NUMERICS]
CONFIGURATION = ("processes_per_node", "intra_threads", "inter_threads", "batch_per_process",
                 "horovod_cycle_time_ms", "horovod_fusion_threshold_bytes",
                 "nodes", "strategy", "vendor_library_enabled", "image_size", *NUMERICS)


def progress(trials: pd.DataFrame, statistic: str = metrics.DEFAULT_STATISTIC) -> pd.DataFrame:
    """The runs of one study in start order with ``spent`` (cumulative node-hours when the
    run ended) and ``best_so_far``: the highest img/s (``statistic``: mean or median) of a
    configuration over its ok top-rung runs up to then (empty before the first; a
    configuration with a failed top-rung run only while none ran without): the best as
    the table would give it at that moment."""
    aggregate = metrics.STATISTIC_OF[statistic]
    runs = trials.assign(_start=pd.to_datetime(trials["start_time"], utc=True, format="ISO8601"))
    runs = runs.sort_values(["_start", "trial_number"], kind="mergesort").reset_index(drop=True)
    runs["spent"] = runs["node_hours"].fillna(0.0).cumsum()
    at_top = runs["trial_top_rung"].fillna(False).astype(bool)
    keys = runs[list(CONFIGURATION)].astype(object).where(runs[list(CONFIGURATION)].notna(), None)
    config = keys.apply(tuple, axis=1)
    values: dict[tuple, list[float]] = {}
    failed: set[tuple] = set()
    so_far = []
    for key, is_top, ok, value in zip(config, at_top, runs["ok"], runs["throughput"]):
        if is_top and ok:
            values.setdefault(key, []).append(float(value))
        elif is_top:
            failed.add(key)
        # every configuration's value as its runs so far give it (a later run may lower one);
        # one with a failed run only while none ran without
        whole = [v for k, v in values.items() if k not in failed] or list(values.values())
        so_far.append(max(map(aggregate, whole)) if whole else None)
    runs["best_so_far"] = pd.array(so_far, dtype="Float64").astype(float)
    return runs


def tuning(summary: pd.DataFrame, statistic: str = metrics.DEFAULT_STATISTIC) -> Figure:
    """Best-so-far img/s (the campaign's ``statistic`` of a configuration's top-rung runs)
    against cumulative node-hours per tuning study (table ``tuning``); a figure saying so
    without tuning runs."""
    runs = tune_runs(summary)
    parts = []
    for keys, trials, _ in studies(runs):
        parts.append(progress(trials, statistic).assign(**keys))
    if not parts:
        return no_data(NAME)
    frame = pd.concat(parts, ignore_index=True)
    table = tuning_table(summary, statistic)
    rungs = sorted(int(r) for r in frame["trial_rung"].dropna().unique())
    colours = dict(zip(rungs, palette(len(rungs))))
    with style():
        figure, panels = grid(frame, PANELS)
        for panel in panels:
            ax, rows = panel.ax, panel.rows
            ax.step(rows["spent"], rows["best_so_far"], where="post", color="0.15",
                    label=f"best so far ({statistic} of a configuration's top-rung runs)")
            for rung in rungs:
                part = rows[rows["ok"] & rows["trial_rung"].eq(rung).fillna(False).astype(bool)]
                if part.empty:
                    continue
                top = part["trial_top_rung"].fillna(False).astype(bool).any()
                ax.plot(part["spent"], part["throughput"], linestyle="none",
                        marker=MARKERS[rung % len(MARKERS)], color=colours[rung],
                        label=f"rung {rung}{' (top: full fidelity)' if top else ''}: a run")
            mark_failures(ax, rows.loc[~rows["ok"], "spent"], "failed run")
            sweep = _sweep_of(table, rows.iloc[0])
            if sweep is not None:
                name, value = sweep
                ax.axhline(value, linestyle="--", color="0.45", label=f"best of the sweep {name}")
                ax.annotate(f"sweep {name}: {number(value)} img/s", (0.02, value),
                            xycoords=("axes fraction", "data"), xytext=(0, 3),
                            textcoords="offset points", fontsize=6, color="0.3")
            ax.set_xlabel("node-hours spent (cumulative)")
            ax.set_ylabel("img/s")
            ax.set_xlim(left=0)
            highest = max([*rows["throughput"].dropna(), *(sweep[1:] if sweep else ())], default=1.0)
            ax.set_ylim(0, 1.12 * highest)
        shared_legend(figure, [p.ax for p in panels])
        figure.suptitle(NAME)
    return figure


def _sweep_of(table: pd.DataFrame, row: pd.Series) -> tuple[str, float] | None:
    """The sweep's name and best img/s of the study ``row`` belongs to, None without."""
    same = pd.Series(True, index=table.index)
    for name in PANELS:
        value = row[name]
        column = table[name].astype(object)
        same &= column.isna() if value is None or pd.isna(value) else column.eq(value).fillna(False)
    match = table[same.astype(bool) & table["sweep_best_img_s"].notna()]
    if match.empty:
        return None
    return str(match["sweep"].iloc[0]), float(match["sweep_best_img_s"].iloc[0])
