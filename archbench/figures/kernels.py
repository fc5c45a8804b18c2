"""Figures of the HPC kernels (experiment 7): GFLOP/s vs workers per problem size, and
STREAM bandwidth vs array/message size. Values come from :mod:`archbench.tables`."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench import tables
from archbench.figures.style import (
    facets,
    label_column,
    log2_axis,
    mark_failures,
    no_data,
    ordered,
    panels,
    series_plot,
    shared_legend,
    style,
)


def kernel_gflops(df: pd.DataFrame) -> Figure:
    """GFLOP/s vs workers, one line per problem size; one panel per system and kernel."""
    title = "Kernels: GFLOP/s vs workers"
    table = tables.kernel_gflops(df)
    if table.empty:
        return no_data(title)
    table["size"] = label_column(table, ["problem_size", "tile_size"], ["N=", "tile "])
    with style():
        groups = facets(table, ["system", "kernel"])
        figure, axes = panels(len(groups))
        sizes = table[["problem_size", "tile_size"]].astype(float).fillna(-1)
        hue_order = list(dict.fromkeys(
            table.assign(_n=sizes["problem_size"], _t=sizes["tile_size"])
            .sort_values(["_n", "_t"], kind="mergesort")["size"]))
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["gflops"].notna()]
            series_plot(ax, ok, x="workers", y="gflops", hue="size", hue_order=hue_order,
                        low="gflops_min", high="gflops_max")
            mark_failures(ax, part.loc[part["gflops"].isna(), "workers"].tolist())
            log2_axis(ax, "x", part["workers"])
            ax.set(title=name, xlabel="workers", ylabel="GFLOP/s")
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure


def stream_bandwidth(df: pd.DataFrame) -> Figure:
    """STREAM bandwidth (GB/s) vs array or message size; one panel per system."""
    title = "STREAM bandwidth vs size"
    table = tables.stream_bandwidth(df)
    if table.empty:
        return no_data(title)
    table["series"] = label_column(table, ["kernel", "workers", "nodes"], ["", "workers ", "nodes "])
    with style():
        groups = facets(table, ["system"])
        figure, axes = panels(len(groups))
        hue_order = ordered(table["series"])
        for ax, (name, part) in zip(axes, groups):
            ok = part[part["bandwidth_gb_s"].notna()]
            series_plot(ax, ok, x="problem_size", y="bandwidth_gb_s", hue="series", hue_order=hue_order,
                        low="bandwidth_min", high="bandwidth_max")
            mark_failures(ax, part.loc[part["bandwidth_gb_s"].isna(), "problem_size"].tolist())
            log2_axis(ax, "x", part["problem_size"])
            ax.set(title=name, xlabel="size (bytes)", ylabel="bandwidth (GB/s)", ylim=(0, None))
        shared_legend(figure, axes)
        figure.suptitle(title)
    return figure
