"""Figures of the training experiments. Each takes the tidy measurements table and
returns a ``Figure``; the numbers come from :mod:`archbench.tables` (the same values the
tables print). Lines show means; error bars span min-max of the runs; a configuration
whose runs all failed is a red cross on the x axis, never a zero."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from archbench import tables
from archbench.figures.style import (
    facets,
    label_column,
    log2_axis,
    mark_failures,
    no_data,
    ordered,
    palette,
    panels,
    series_plot,
    shared_legend,
    style,
)
from archbench.tables.common import HAS_MEAN


def _failed_x(frame: pd.DataFrame, x: str, status: str = "status") -> list:
    return frame.loc[~frame[status].isin(HAS_MEAN) & frame[x].notna(), x].tolist()


def thread_scaling(df: pd.DataFrame) -> Figure:
    """img/s vs intra-op threads (one process), one colour per batch size, one line style
    per vendor library setting (on/off); one panel per system and model."""
    title = "Thread scaling: img/s vs threads (one process)"
    table = tables.thread_efficiency(df)
    if table.empty:
        return no_data(title)
    table["batch"] = table["batch_per_process"].map(lambda b: f"batch {b}")
    table["vendor"] = label_column(table, ["vendor_library_enabled"])
    with style():
        groups = facets(table, ["system", "model"])
        figure, axes = panels(len(groups))
        hue_order = [f"batch {b}" for b in ordered(table["batch_per_process"])]
        style_order = ordered(table["vendor"]) if table["vendor"].ne("").any() else None
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["img_s"].notna()]
            series_plot(ax, ok, x="threads", y="img_s", hue="batch", hue_order=hue_order, style_col="vendor" if style_order else None, style_order=style_order, low="img_s_min", high="img_s_max")
            mark_failures(ax, _failed_x(part, "threads"))
            log2_axis(ax, "x", part["threads"])
            ax.set(title=name, xlabel="intra-op threads", ylabel="img/s")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def thread_efficiency(df: pd.DataFrame) -> Figure:
    """Thread efficiency e_t = p_t / (t p_1) vs threads, one panel per system."""
    title = "Thread efficiency e_t = p_t / (t p_1)"
    table = tables.thread_efficiency(df)
    if table.empty:
        return no_data(title)
    table["series"] = label_column(table, ["model", "batch_per_process", "vendor_library_enabled"],
                                   ["", "batch ", ""])
    with style():
        groups = facets(table, ["system"])
        figure, axes = panels(len(groups), sharey=True)
        hue_order = ordered(table["series"])
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["efficiency"].notna()]
            series_plot(ax, ok, x="threads", y="efficiency", hue="series", hue_order=hue_order)
            mark_failures(ax, _failed_x(part, "threads"))
            ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
            log2_axis(ax, "x", part["threads"])
            ax.set(title=name, xlabel="intra-op threads", ylabel="efficiency", ylim=(0, None))
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def vendor_speedup(df: pd.DataFrame) -> Figure:
    """Vendor-library speedup (img/s with / without) vs threads, one panel per system."""
    title = "Vendor-library speedup (img/s with / without)"
    table = tables.vendor_speedup(df)
    if table.empty:
        return no_data(title)
    table["series"] = label_column(table, ["model", "batch_per_process"], ["", "batch "])
    with style():
        groups = facets(table, ["system", "vendor_library"])
        figure, axes = panels(len(groups), sharey=True)
        hue_order = ordered(table["series"])
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["speedup"].notna()]
            series_plot(ax, ok, x="intra_threads", y="speedup", hue="series", hue_order=hue_order)
            mark_failures(ax, part.loc[part["speedup"].isna(), "intra_threads"].tolist())
            ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
            log2_axis(ax, "x", part["intra_threads"])
            ax.set(title=name, xlabel="intra-op threads", ylabel="speedup")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def hybrid_configurations(df: pd.DataFrame) -> Figure:
    """Bars of img/s per processes x threads configuration (min-max error bars), one panel
    per system and model; a configuration that only failed is labelled with its status."""
    title = "Hybrid configurations: processes x threads per node"
    table = tables.hybrid_configurations(df)
    if table.empty:
        return no_data(title)
    table["batch"] = table["batch_per_process"].map(lambda b: f"batch {b}")
    with style():
        groups = facets(table, ["system", "model"])
        figure, axes = panels(len(groups))
        hue_order = [f"batch {b}" for b in ordered(table["batch_per_process"])]
        colours = dict(zip(hue_order, palette(len(hue_order))))
        for ax, (name, part) in zip(axes, groups):
            part = part.sort_values(["processes_per_node", "intra_threads"], kind="mergesort")
            order = list(dict.fromkeys(part["configuration"]))
            width = 0.8 / max(len(hue_order), 1)
            for i, level in enumerate(hue_order):
                rows = part[part["batch"] == level]
                pos = np.array([order.index(c) for c in rows["configuration"]]) - 0.4 + width * (i + 0.5)
                ok = rows["img_s"].notna().to_numpy()
                if ok.any():
                    ax.bar(pos[ok], rows["img_s"][ok], width=width, color=colours[level], label=level)
                    ax.errorbar(pos[ok], rows["img_s"][ok],
                                yerr=[(rows["img_s"] - rows["min"])[ok], (rows["max"] - rows["img_s"])[ok]],
                                fmt="none", ecolor="0.2", elinewidth=0.8, capsize=2)
                for p, status in zip(pos[~ok], rows["status"][~ok]):
                    ax.text(p, 0, str(status), rotation=90, ha="center", va="bottom",
                            fontsize=7, color="#c0392b")
            ax.set_xticks(range(len(order)), order, rotation=45)
            ax.set(title=name, xlabel="processes x threads", ylabel="img/s")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def node_scaling(df: pd.DataFrame) -> Figure:
    """img/s vs nodes (or workers) for synthetic and real data, with the ideal scaling
    line P_b * n / b from the smallest count b; one panel per system."""
    title = "Scaling: img/s vs nodes or workers (dotted: ideal)"
    table = tables.node_scaling(df)
    if table.empty:
        return no_data(title)
    table["series"] = label_column(table, ["model", "data", "strategy"])
    with style():
        groups = facets(table, ["system"])
        figure, axes = panels(len(groups))
        hue_order = ordered(table["series"])
        colours = dict(zip(hue_order, palette(len(hue_order))))
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["img_s"].notna()]
            series_plot(ax, ok, x="count", y="img_s", hue="series", hue_order=hue_order)
            for level, series in part.groupby("series", sort=True):
                counts = np.array(sorted(series["count"].dropna().astype(float).unique()))
                base = series["img_s_baseline"].dropna()
                if len(counts) and not base.empty:
                    first = float(series["baseline_count"].dropna().iloc[0])
                    ax.plot(counts, float(base.iloc[0]) * counts / first, ls=":", lw=1,
                            color=colours[level])
            mark_failures(ax, _failed_x(part, "count"))
            log2_axis(ax, "x", part["count"])
            if (ok["img_s"] > 0).any():
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(ScalarFormatter())
                ax.yaxis.set_minor_formatter(NullFormatter())
            units = ordered(part["scaling_unit"])
            ax.set(title=name, xlabel=" / ".join(units), ylabel="img/s")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def efficiency_heatmap(df: pd.DataFrame) -> Figure:
    """Parallel efficiency E_n = P_n / (n P_1) as a heat map: series (system / model / data)
    x node count; failed cells show their status."""
    title = "Parallel efficiency E_n = P_n / (n P_1)"
    table = tables.efficiency_heatmap(df)
    if table.empty:
        return no_data(title)
    counts = [c for c in table.columns if c.isdigit()]
    labels = label_column(table, ["system", "model", "data", "strategy", "processes_per_node"],
                          ["", "", "", "", "ppn "]).tolist()
    cells = table[counts].astype(object)
    values = cells.apply(lambda col: pd.to_numeric(col, errors="coerce")).astype(float).to_numpy()
    with style():
        height = 1.2 + 0.35 * len(labels)
        figure = Figure(figsize=(2.5 + 0.7 * len(counts) + 0.06 * max(map(len, labels)), height),
                        layout="constrained")
        ax = figure.subplots()
        sns.heatmap(values, ax=ax, vmin=0, vmax=max(1.0, float(np.nanmax(values)) if np.isfinite(values).any() else 1.0),
                    cmap="viridis", annot=True, fmt=".2f", cbar_kws={"label": "efficiency"},
                    xticklabels=counts, yticklabels=labels, linewidths=0.5, linecolor="white")
        for (i, j), cell in np.ndenumerate(cells.to_numpy()):
            if isinstance(cell, str):
                ax.text(j + 0.5, i + 0.5, cell, ha="center", va="center", fontsize=7,
                        color="#c0392b")
        units = " / ".join(ordered(table["scaling_unit"]))
        ax.set(xlabel=units, ylabel="")
        figure.suptitle(title)
    return figure


def io_overhead(df: pd.DataFrame) -> Figure:
    """I/O overhead (%) = (synthetic - real) / synthetic x 100 vs nodes."""
    title = "I/O overhead: (synthetic - real) / synthetic"
    table = tables.io_overhead(df)
    if table.empty:
        return no_data(title)
    table["series"] = label_column(table, ["system", "model", "strategy"])
    with style():
        figure, axes = panels(1)
        ax = axes[0]
        hue_order = ordered(table["series"])
        ok = table[table["io_overhead_percent"].notna()]
        series_plot(ax, ok, x="nodes", y="io_overhead_percent", hue="series", hue_order=hue_order)
        mark_failures(ax, table.loc[table["io_overhead_percent"].isna(), "nodes"].tolist())
        ax.axhline(0.0, color="0.5", lw=0.8, ls=":")
        log2_axis(ax, "x", table["nodes"])
        ax.set(xlabel="nodes", ylabel="I/O overhead (%)")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def horovod_tuning(df: pd.DataFrame) -> Figure:
    """img/s vs allreduce operations per step (counted in Horovod's timeline), one colour
    per fusion threshold, one marker per cycle time, one panel per system, model and layout.
    A setting without a successful run has no point (the table names its status)."""
    title = "Horovod tuning: img/s vs allreduces per step"
    table = tables.horovod_tuning(df)
    table = table[table["img_s"].notna() & table["allreduces_per_step"].notna()].copy()
    if table.empty:
        return no_data(title)
    # "_" names: the labels say what they are, the legend needs no section titles
    table["_fusion"] = table["fusion_threshold_mb"].map(lambda v: f"fusion {v:g} MiB")
    table["_cycle"] = table["cycle_time_ms"].map(lambda v: f"cycle {v:g} ms")
    with style():
        groups = facets(table.assign(layout=table["nodes"].astype(str) + " node(s) x "
                                      + table["processes_per_node"].astype(str)),
                         ["system", "model", "layout"])
        figure, axes = panels(len(groups))
        fusion_order = [f"fusion {v:g} MiB" for v in ordered(table["fusion_threshold_mb"])]
        cycle_order = [f"cycle {v:g} ms" for v in ordered(table["cycle_time_ms"])]
        colours = dict(zip(fusion_order, palette(len(fusion_order))))
        for ax, (name, part) in zip(axes, groups):
            sns.scatterplot(data=part, x="allreduces_per_step", y="img_s", hue="_fusion",
                            hue_order=fusion_order, palette=colours, style="_cycle",
                            style_order=cycle_order, s=60, ax=ax)
            ax.set(title=name, xlabel="allreduce operations per step", ylabel="img/s")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure
