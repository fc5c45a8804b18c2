"""Figures of the HPC kernels (experiment 7): GFLOP/s vs workers per problem size, and
STREAM bandwidth vs array/message size. Numbers come from the ``kernel_gflops`` and
``stream_bandwidth`` tables."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.plot import Layout, line_figure, table_of
from archbench.results.figures.style import Panel, no_data, statistic_of


def kernel_gflops(df: pd.DataFrame) -> Figure:
    """GFLOP/s vs workers (table ``kernel_gflops``), one line per problem and tile size; a
    panel per system and kernel."""
    name = "Kernels: GFLOP/s vs workers"
    table = table_of(tables.kernel_gflops, df, "kernel_gflops")
    if table.empty:
        return no_data(name)
    statistic = statistic_of(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="workers", ylabel=f"GFLOP/s ({statistic})")

    # nodes only where two rows would share a point (fallback): with workers_per_node
    # the node count grows with the workers, inside one line
    layout = Layout(panels=["system", "kernel"], always=["problem_size"],
                    series=["device", "tile_size", "experiment"])
    return line_figure(table, layout, x="workers", y="gflops", low="gflops_min",
                       high="gflops_max", name=name, each=axes)


def stream_bandwidth(df: pd.DataFrame) -> Figure:
    """STREAM bandwidth (GB/s) vs array or message size (table ``stream_bandwidth``), one
    line per kernel, worker and node count; a panel per system."""
    name = "STREAM bandwidth vs size"
    table = table_of(tables.stream_bandwidth, df, "stream_bandwidth")
    if table.empty:
        return no_data(name)
    statistic = statistic_of(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="size (bytes)", ylabel=f"bandwidth (GB/s, {statistic})",
                     ylim=(0, None))

    layout = Layout(panels=["system"], always=["kernel"],
                    series=["device", "workers", "nodes", "tile_size", "experiment"])
    return line_figure(table, layout, x="problem_size", y="bandwidth_gb_s",
                       low="bandwidth_min", high="bandwidth_max", name=name, each=axes)
