"""Precision, fp32 math mode and graph against fp32 strict eager: a bar per configuration
of the speedup over its fp32-strict-eager twin, with its interval, the evidence label and
the quality flag above the bar. Numbers come from the table ``precision_speedup``."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.core.fields import NUMERICS
from archbench.results.figures.labels import label, varying
from archbench.results.figures.plot import Layout, bar_figure
from archbench.results.figures.style import Panel, in_order, no_data
from archbench.results.tables.precision import precision_speedup as speedup_table

PANELS = ["system", "device"]
# what names a configuration on the x axis: always these, then whatever else varies
ALWAYS = ["model", *NUMERICS]
OTHERS = ["experiment", "data", "strategy", "vendor_library_enabled", "nodes",
          "processes_per_node", "gpus_per_node", "intra_threads", "inter_threads",
          "batch_per_process", "image_size", "variant"]


def note(table: pd.DataFrame) -> pd.Series:
    """The text above each bar: the speedup, the evidence label where what executed is not
    what was asked, and "loss departs" where the quality flag is set."""
    def text(row: pd.Series) -> str:
        parts = [f"{row['speedup']:.2f}x"] if pd.notna(row["speedup"]) else []
        if isinstance(row["evidence_label"], str) and row["evidence_label"]:
            parts.append(row["evidence_label"].replace(" requested, ", " asked,\n"))
        if row["quality_flag"] is True or (pd.notna(row["quality_flag"]) and bool(row["quality_flag"])):
            parts.append("loss departs")
        return "\n".join(parts)
    return table.apply(text, axis=1) if not table.empty else pd.Series(dtype=object)


def interval(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The error bar of each speedup: its 95% interval, or where a side has fewer than two
    ok runs, the range min / twin max to max / twin min."""
    low = table["speedup_ci95_low"].astype(float).fillna(
        table["img_s_min"].astype(float) / table["img_s_twin_max"].astype(float))
    high = table["speedup_ci95_high"].astype(float).fillna(
        table["img_s_max"].astype(float) / table["img_s_twin_min"].astype(float))
    return low, high


def precision_speedup(df: pd.DataFrame) -> Figure:
    """Speedup over the fp32-strict-eager twin (table ``precision_speedup``): a bar per
    precision / math mode / graph configuration (named by model, the three settings and
    whatever else varies), a colour per framework, a panel per system and device; error
    bars: the 95% interval where the runs are at hand, else (from the per-configuration
    summary, as the workflow draws it) min / twin max to max / twin min; above each bar
    the speedup, the evidence label ("bf16 asked, fp32 executed") and "loss departs"
    where the quality flag is set; a dashed line at 1 (as fast as fp32 strict eager)."""
    table = speedup_table(df)  # a summary: the error bars fall back to the min/max range
    name = "Speedup over fp32 strict eager of the same configuration"
    if table.empty:
        return no_data(name)
    table = table.reset_index(drop=True)
    within = [c for c in PANELS if c in table]
    columns = ALWAYS + varying(table, OTHERS, within)
    lines = pd.concat([label(table, [c], empty="") for c in columns], axis=1)
    table = table.assign(configuration=lines.apply(lambda r: "\n".join(t for t in r if t), axis=1),
                         _order=range(len(table)), _note=note(table))
    table["_low"], table["_high"] = interval(table)
    order = in_order(table, ["_order"], table["configuration"])

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.axhline(1.0, color="0.4", linestyle="--", linewidth=0.8)
        panel.ax.set(ylabel="speedup over fp32 strict eager",
                     ylim=(0, panel.ax.get_ylim()[1] * 1.15))  # room for the notes
        for tick in panel.ax.get_xticklabels():  # a configuration's name, one setting a line
            tick.set(rotation=0, ha="center", fontsize=7)

    layout = Layout(panels=PANELS, series=["framework"], always=["framework"], fallback=())
    figure = bar_figure(table, layout, x="configuration", order=order, y="speedup",
                        low="_low", high="_high", note="_note", name=name, each=axes)
    widest = table.groupby(within, dropna=False)["configuration"].nunique().max()
    width, height = figure.get_size_inches()
    figure.set_size_inches(max(width, 1.1 * widest + 2.4), height + 0.6)
    return figure
