"""Figures of the scaling series (experiments 4 and 5): img/s vs nodes, workers or GPUs
with each series' ideal line (CSCS 2017 Figs. 8-10, BSC 2019 Figs. 14-15), img/s and
speedup with the ideal speedup (CESGA 2018 Fig. 10), the efficiency heat map (BSC 2019
Table IV) and the I/O overhead (CSCS 2017 Fig. 11). Numbers come from the tables
``node_scaling``, ``efficiency_heatmap`` and ``io_overhead``."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import label, series_columns, steady
from archbench.results.figures.plot import Layout, line_figure, table_of, twin_lines
from archbench.results.figures.style import Panel, log_y, no_data, proxy, statistic_of, style, value_label

PANELS = ["system", "model", "scaling_unit"]
IDEAL = "dotted: ideal P_b n / b"
WIDE = 16  # counts spanning more than this factor are drawn on log axes
# a scaling series is named by the table (``series``, unique within experiment, system and
# model); its legend label names the settings that tell the series of a panel apart
GROUP = ["experiment", "system", "model", "series"]
SETTINGS = ["experiment", "framework", "data", "strategy", "vendor_library_enabled", "processes_per_node",
            "gpus_per_node", "intra_threads", "inter_threads", "batch_per_process", "variant"]


def _unit(panel: Panel) -> str:
    units = panel.rows["scaling_unit"].dropna().unique()
    return str(units[0]) if len(units) == 1 else "count"


def _choices(panel: Panel) -> None:
    """The parameter-server count / variable update chosen at each point, where several
    were tried (CSCS 2017 Tables 1-3)."""
    rows = panel.rows
    if "n_choices" not in rows:
        return
    tried = rows[(pd.to_numeric(rows["n_choices"], errors="coerce") > 1) & rows["img_s"].notna()]
    for _, row in tried.iterrows():
        text = label(row.to_frame().T, ["parameter_servers", "variable_update"], empty="").iloc[0]
        if text:
            panel.ax.annotate(text, (float(row["count"]), float(row["img_s"])), xytext=(3, -8),
                              textcoords="offset points", fontsize=6, color="0.3")


def node_scaling(df: pd.DataFrame) -> Figure:
    """img/s vs nodes, workers or GPUs (table ``node_scaling``), one line per scaling series
    (a line style per input data) with its ideal line P_b n / b from its smallest count b;
    a panel per system, model and unit."""
    name = "Scaling: img/s vs nodes, workers or GPUs"
    table = table_of(tables.node_scaling, df, "node_scaling")
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def ideal(panel: Panel, looks: dict) -> None:
        for text, rows in panel.rows.groupby("_label", sort=False):
            rows = rows[rows["img_s_baseline"].notna()]
            if rows.empty:
                continue
            counts = np.array(sorted(rows["count"].astype(float).unique()))
            base, first = float(rows["img_s_baseline"].iloc[0]), float(rows["baseline_count"].iloc[0])
            panel.ax.plot(counts, base * counts / first, ls=":", lw=1, color=looks[text].colour,
                          label="_ideal")
        _choices(panel)
        log_y(panel.ax, panel.rows["img_s"])
        panel.ax.set(xlabel=_unit(panel), ylabel=ylabel)

    layout = Layout(panels=PANELS, group=GROUP, always=["data"], series=SETTINGS,
                    style=["data"], extra_legend=[proxy(IDEAL, dashes=":")])
    return line_figure(table, layout, x="count", y="img_s", low="img_s_min", high="img_s_max",
                       name=name, each=ideal)


def scaling_speedup(df: pd.DataFrame) -> Figure:
    """img/s (left axis, solid) and speedup S = P_n / P_b (right axis, dashed) vs nodes,
    workers or GPUs (table ``node_scaling``) with the ideal speedup n / b (dotted); a panel
    per system, model and unit (CESGA 2018 Fig. 10)."""
    name = "Scaling: img/s and speedup S = P_n / P_b"
    table = table_of(tables.node_scaling, df, "scaling_speedup")
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def speedup(panel: Panel, looks: dict) -> None:
        twin = twin_lines(panel, looks, x="count", y="speedup")
        for base in panel.rows["baseline_count"].dropna().unique():
            counts = np.array(sorted(panel.rows.loc[panel.rows["baseline_count"] == base, "count"]
                                     .astype(float).unique()))
            twin.plot(counts, counts / float(base), ls=":", color="0.4", lw=1, label="_ideal")
        twin.set_ylabel("speedup S = P_n / P_b")
        panel.ax.set(xlabel=_unit(panel), ylabel=ylabel)
        counts = panel.rows["count"].dropna().astype(float)
        if len(counts) and counts.max() > WIDE * counts.min():  # log-log: ideal is straight
            log_y(panel.ax, panel.rows["img_s"])
            log_y(twin, panel.rows["speedup"])
        else:
            panel.ax.set_xscale("linear")
            panel.ax.set_xticks(sorted(counts.unique()))
            panel.ax.set_ylim(0, None)
            twin.set_ylim(0, None)

    layout = Layout(panels=PANELS, group=GROUP, always=["data"], series=SETTINGS,
                    extra_legend=[proxy("solid: img/s (left axis)"),
                                  proxy("dashed: speedup (right axis)", dashes="--"),
                                  proxy("dotted: ideal speedup n / b", dashes=":")])
    return line_figure(table, layout, x="count", y="img_s", low="img_s_min", high="img_s_max",
                       name=name, each=speedup)


def with_settings(heat: pd.DataFrame, scaling: pd.DataFrame) -> pd.DataFrame:
    """The heat-map rows with the settings their series holds all along (from the
    ``node_scaling`` rows of the same experiment, system, model and series), for labels."""
    steady_rows = steady(scaling, SETTINGS, GROUP).drop_duplicates(GROUP)
    extra = [c for c in SETTINGS if c in steady_rows and c not in heat]
    if not extra:
        return heat
    keys = heat[GROUP].astype(object).where(heat[GROUP].notna(), "")
    found = steady_rows[GROUP].astype(object).where(steady_rows[GROUP].notna(), "")
    found = found.assign(**{c: steady_rows[c].to_numpy() for c in extra})
    joined = keys.merge(found, on=GROUP, how="left")
    return heat.assign(**{c: joined[c].to_numpy() for c in extra})


def efficiency_heatmap(df: pd.DataFrame) -> Figure:
    """Parallel efficiency E = P_n / ((n / b) P_b) as a heat map (table
    ``efficiency_heatmap``): one row per scaling series, one column per count; failed cells
    show their status."""
    name = "Parallel efficiency E = P_n / ((n / b) P_b)"
    table = table_of(tables.efficiency_heatmap, df, "efficiency_heatmap")
    if table.empty:
        return no_data(name)
    counts = sorted((c for c in table.columns if str(c).isdigit()), key=int)
    scaling = table_of(tables.node_scaling, df, "efficiency_heatmap")
    table = with_settings(table, scaling)
    columns = series_columns(table, columns=["system", "model", "experiment", "scaling_unit",
                                             *SETTINGS], fallback=["series"])
    labels = label(table, list(dict.fromkeys(["system", "model", *columns]))).tolist()
    if len(set(labels)) < len(labels):
        raise ValueError("series would merge: two heat-map rows have one label")
    cells = table[counts].astype(object)
    values = cells.apply(lambda col: pd.to_numeric(col, errors="coerce")).astype(float).to_numpy()
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    with style():
        figure = Figure(figsize=(2.5 + 0.7 * len(counts) + 0.06 * max(map(len, labels)),
                                 1.2 + 0.35 * len(labels)), layout="constrained")
        ax = figure.subplots()
        mesh = ax.pcolormesh(np.ma.masked_invalid(values), cmap="viridis", vmin=0,
                             vmax=max(1.0, top), edgecolors="white", linewidth=0.5)
        figure.colorbar(mesh, ax=ax, label=f"efficiency ({statistic_of(scaling, df)} img/s)",
                        shrink=min(1.0, 4.0 / max(len(labels), 1) + 0.3))
        for (i, j), cell in np.ndenumerate(cells.to_numpy()):
            number_ = values[i, j]
            text = cell if isinstance(cell, str) else "" if np.isnan(number_) else f"{number_:.2f}"
            colour = "#c0392b" if isinstance(cell, str) else \
                "black" if number_ > 0.6 * max(1.0, top) else "white"
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7, color=colour)
        ax.set_xticks(np.arange(len(counts)) + 0.5, counts)
        ax.set_yticks(np.arange(len(labels)) + 0.5, labels)
        ax.set_xlim(0, len(counts))
        ax.set_ylim(len(labels), 0)
        ax.grid(False)
        units = [str(u) for u in table["scaling_unit"].dropna().unique()] \
            if "scaling_unit" in table else []
        ax.set(xlabel=" / ".join(sorted(units)) or "count", ylabel="")
        figure.suptitle(name)
    return figure


def io_overhead(df: pd.DataFrame) -> Figure:
    """I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic x 100 (table
    ``io_overhead``) vs the series' count (nodes, workers or GPUs) or, for configurations
    outside a scaling series (one process), vs intra-op threads; a line per system, model
    and series, a panel per x axis."""
    name = "I/O overhead: (synthetic - real) / synthetic"
    table = table_of(tables.io_overhead, df, "io_overhead")
    if table.empty:
        return no_data(name)
    scaled = table["scaling_unit"].notna() & table["count"].notna()
    table = table.assign(
        _x=table["count"].astype(float).where(scaled, table["intra_threads"].astype(float)),
        axis=table["scaling_unit"].astype(object).where(scaled, "intra-op threads"))
    statistic = statistic_of(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.axhline(0.0, color="0.5", lw=0.8, ls=":")
        panel.ax.set(xlabel=str(panel.rows["axis"].iloc[0]),
                     ylabel=f"I/O overhead (%, {statistic} img/s)")

    # a series: the table's for scaling rows; for one process, all but the threads
    one = ["framework", "strategy", "vendor_library_enabled", "nodes", "processes_per_node", "gpus_per_node",
           "inter_threads", "batch_per_process", "variant"]
    table["_group"] = table["series"].astype(object).where(
        scaled, label(table, [c for c in one if c in table]))
    layout = Layout(panels=["axis"], group=["experiment", "system", "model", "_group"],
                    always=["system", "model"], series=SETTINGS, fallback=["series"])
    return line_figure(table, layout, x="_x", y="io_overhead_percent", name=name, each=axes)
