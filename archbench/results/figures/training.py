"""Figures of one-node training: thread scaling and efficiency (BSC 2019 Figs. 2-7),
vendor-library speedup, img/s vs batch size (OSU 2019 Figs. 1b, 11), processes x threads
configurations (BSC 2019 Figs. 8-13) and single- vs multi-process bars (OSU 2019 Figs. 6,
10). Each takes the per-configuration summary and returns a ``Figure``; its numbers come
from the table function named in its docstring (the values that table prints)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import merged, number
from archbench.results.figures.plot import Layout, bar_figure, line_figure, table_of
from archbench.results.figures.style import Panel, in_order, no_data, proxy, statistic_of, value_label
from archbench.results.tables.common import group_ids

ONE_PROCESS = ["experiment", "batch_per_process", "vendor_library_enabled", "data",
               "inter_threads"]


def thread_scaling(df: pd.DataFrame) -> Figure:
    """img/s vs intra-op threads of one process (table ``thread_efficiency``): a colour per
    batch size, a line style per vendor-library setting; a panel per system and model."""
    name = "Thread scaling: img/s vs threads (one process)"
    table = table_of(tables.thread_efficiency, df, "thread_scaling")
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="intra-op threads", ylabel=ylabel, ylim=(0, None))

    layout = Layout(panels=["system", "model"], series=ONE_PROCESS,
                    style=["vendor_library_enabled"])
    return line_figure(table, layout, x="threads", y="img_s", low="img_s_min",
                       high="img_s_max", name=name, each=axes)


def best_batch(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` (thread_efficiency) at the batch size delivering the best
    performance (BSC 2019 Fig. 7): per system, model, data, vendor-library setting and
    inter-op threads, the batch whose highest img/s over the thread counts is the highest
    (ties: the smaller batch)."""
    group = [c for c in ("experiment", "system", "model", "data", "vendor_library",
                         "vendor_library_enabled", "inter_threads") if c in table]
    gid = pd.Series(group_ids(table, group), index=table.index)
    peak = table.groupby([gid, table["batch_per_process"]])["img_s"].transform("max")
    frame = table.assign(_gid=gid, _peak=peak)
    ranked = frame.sort_values(["_gid", "_peak", "batch_per_process"], ascending=[True, False, True],
                               na_position="last", kind="mergesort")
    best = ranked.drop_duplicates("_gid").set_index("_gid")["batch_per_process"]
    return table[frame["batch_per_process"].eq(frame["_gid"].map(best)).fillna(False).astype(bool)]


def thread_efficiency(df: pd.DataFrame) -> Figure:
    """Thread efficiency e_t = p_t / (t p_1) vs threads (table ``thread_efficiency``) at
    each system's best batch size (:func:`best_batch`), every system in one panel per
    model (BSC 2019 Fig. 7)."""
    name = "Thread efficiency e_t = p_t / (t p_1) at each system's best batch"
    table = table_of(tables.thread_efficiency, df, "thread_efficiency")
    if table.empty:
        return no_data(name)
    table = best_batch(table)

    ylabel = f"efficiency e_t ({statistic_of(table, df)} img/s)"

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
        panel.ax.set(xlabel="intra-op threads", ylabel=ylabel, ylim=(0, None))

    layout = Layout(panels=["model"], always=["system", "batch_per_process"],
                    series=["experiment", "vendor_library_enabled", "data", "inter_threads"],
                    style=["vendor_library_enabled"])
    return line_figure(table, layout, x="threads", y="efficiency", name=name, each=axes)


def vendor_speedup(df: pd.DataFrame) -> Figure:
    """Vendor-library speedup (img/s with / without the library, table ``vendor_speedup``)
    vs intra-op threads, of the experiments whose type lists this figure (one-process
    sweeps; the table has no column to tell e.g. parameter-server counts apart); a panel
    per system and library."""
    name = "Vendor-library speedup (img/s with / without)"
    table = table_of(tables.vendor_speedup, df, "vendor_speedup")
    if table.empty:
        return no_data(name)
    ylabel = f"speedup ({statistic_of(table, df)} img/s on / off)"

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
        panel.ax.set(xlabel="intra-op threads", ylabel=ylabel)

    layout = Layout(panels=["system", "vendor_library"],
                    series=["experiment", "model", "batch_per_process", "data", "strategy",
                            "nodes", "processes_per_node", "inter_threads"],
                    style=["data"])
    return line_figure(table, layout, x="intra_threads", y="speedup", name=name, each=axes)


def batch_scaling(df: pd.DataFrame) -> Figure:
    """img/s vs batch size per process (table ``batch_scaling``): a line per thread count
    (and every other setting that varies), a panel per system and model (OSU 2019 Figs.
    1b and 11)."""
    name = "Batch scaling: img/s vs batch per process"
    table = table_of(tables.batch_scaling, df, "batch_scaling")
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="batch per process", ylabel=ylabel, ylim=(0, None))

    layout = Layout(panels=["system", "model"],
                    series=["experiment", "intra_threads", "processes_per_node",
                            "nodes", "inter_threads", "vendor_library_enabled", "data",
                            "strategy", "variant"],
                    style=["vendor_library_enabled", "data"])
    return line_figure(table, layout, x="batch_per_process", y="img_s", low="img_s_min",
                       high="img_s_max", name=name, each=axes)


def hybrid_configurations(df: pd.DataFrame) -> Figure:
    """Bars of img/s per processes x threads configuration (table
    ``hybrid_configurations``), a bar per batch size, vendor-library setting and input
    side by side; a panel per system and model. Where each configuration ran its own
    batch (batches per node), the batch is printed on its bar instead."""
    name = "Hybrid configurations: processes x threads per node"
    table = table_of(tables.hybrid_configurations, df, "hybrid_configurations")
    if table.empty:
        return no_data(name)
    order = in_order(table, ["processes_per_node", "intra_threads"], table["configuration"])
    series = ["experiment", "vendor_library_enabled", "data", "inter_threads"]
    panels = ["system", "model"]
    note = None
    if merged(table, [*panels, *series, "configuration"]):
        series.append("batch_per_process")  # batch is a series of its own
    elif table["batch_per_process"].nunique() > 1:  # one batch per configuration
        table = table.assign(_batch=table["batch_per_process"].map(lambda b: f"b{number(b)}"))
        note = "_batch"
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="processes x threads", ylabel=ylabel)

    layout = Layout(panels=panels, series=series, style=[])
    return bar_figure(table, layout, x="configuration", order=order, y="img_s", low="img_s_min",
                      high="img_s_max", note=note, name=name, each=axes)


def process_layout(df: pd.DataFrame) -> Figure:
    """Single vs multi process per node (table ``process_layout``): bars of img/s per
    processes-per-node x intra-op-threads layout, labelled with the speedup over one
    process per node (S = P_ppn / P_1ppn); a bar per batch size, node count and other
    setting side by side; a panel per system and model (OSU 2019 Figs. 6 and 10)."""
    name = "Single vs multi process per node"
    table = table_of(tables.process_layout, df, "process_layout")
    if table.empty:
        return no_data(name)
    table = table.assign(
        layout=table["processes_per_node"].map(number) + " x "
        + table["intra_threads"].map(number),
        _speedup=table["speedup"].map(lambda s: "" if pd.isna(s) else f"{s:.2f}x"))
    order = in_order(table, ["processes_per_node", "intra_threads"], table["layout"])
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="processes per node x intra-op threads", ylabel=ylabel)

    layout = Layout(panels=["system", "model"],
                    series=["experiment", "nodes", "batch_per_process", "inter_threads",
                            "vendor_library_enabled", "data", "strategy", "variant"],
                    extra_legend=[proxy("above bars: speedup over 1 process per node",
                                        colour="none")])
    return bar_figure(table, layout, x="layout", order=order, y="img_s", low="img_s_min",
                      high="img_s_max", note="_speedup", name=name, each=axes)
