"""Figures of the Horovod tuning (experiment 6): img/s vs the allreduce operations a step
needed, and img/s with the allreduce count vs HOROVOD_CYCLE_TIME on two y axes (OSU 2019
Fig. 18). Numbers come from the ``horovod_tuning`` table."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import number
from archbench.results.figures.plot import Layout, line_figure, table_of, twin_lines
from archbench.results.figures.style import Panel, no_data, proxy, value_label

SETTINGS = ["experiment", "batch_per_process", "vendor_library_enabled", "data",
            "intra_threads", "inter_threads"]


def _with_layout(table: pd.DataFrame) -> pd.DataFrame:
    nodes = table["nodes"].map(number)
    return table.assign(layout=nodes + " node" + nodes.map(lambda n: "" if n == "1" else "s")
                        + " x " + table["processes_per_node"].map(number) + " ppn")


def horovod_tuning(df: pd.DataFrame) -> Figure:
    """img/s vs allreduce operations per step (table ``horovod_tuning``), a point per
    setting: colour per HOROVOD_FUSION_THRESHOLD, marker per HOROVOD_CYCLE_TIME; a panel
    per system, model and layout. A setting without a successful run has no point (the
    table names its status)."""
    name = "Horovod tuning: img/s vs allreduces per step"
    table = table_of(tables.horovod_tuning, df, "horovod_tuning")
    table = table[table["img_s"].notna() & table["allreduces_per_step"].notna()]
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="allreduce operations per step", ylabel=ylabel)

    layout = Layout(panels=["system", "model", "layout"],
                    always=["fusion_threshold_mb", "cycle_time_ms"], series=SETTINGS,
                    style=["cycle_time_ms"])
    return line_figure(_with_layout(table), layout, x="allreduces_per_step", y="img_s",
                       low="img_s_min", high="img_s_max", log_x=False, points=True,
                       name=name, each=axes)


def horovod_cycle_time(df: pd.DataFrame) -> Figure:
    """img/s (left axis, solid) and allreduce operations per step (right axis, dashed) vs
    HOROVOD_CYCLE_TIME (table ``horovod_tuning``), a line per model and fusion threshold;
    a panel per system and layout (OSU 2019 Fig. 18)."""
    name = "Horovod: img/s and allreduces per step vs HOROVOD_CYCLE_TIME"
    table = table_of(tables.horovod_tuning, df, "horovod_cycle_time")
    table = table[table["cycle_time_ms"].notna()]
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def allreduces(panel: Panel, looks: dict) -> None:
        twin = twin_lines(panel, looks, x="cycle_time_ms", y="allreduces_per_step")
        twin.set_ylim(0, None)
        twin.set_ylabel("allreduce operations per step")
        panel.ax.set(xlabel="HOROVOD_CYCLE_TIME (ms)", ylabel=ylabel, ylim=(0, None))

    layout = Layout(panels=["system", "layout"], always=["model"],
                    series=["fusion_threshold_mb", *SETTINGS],
                    extra_legend=[proxy("solid: img/s (left axis)"),
                                  proxy("dashed: allreduces per step (right axis)", dashes="--")])
    return line_figure(_with_layout(table), layout, x="cycle_time_ms", y="img_s",
                       low="img_s_min", high="img_s_max", name=name, each=allreduces)
