"""Time to accuracy (the quality gate): bars of the seconds to the target validation
accuracy per precision / fp32 math mode / graph, a bar per framework. Numbers come from
the table ``time_to_accuracy``."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import number
from archbench.results.figures.plot import Layout, bar_figure, table_of
from archbench.results.figures.style import Panel, in_order, no_data, proxy, value_label
from archbench.workloads.training.vendor_evidence.precision import REQUEST_FIELDS


def note_of(row: pd.Series) -> str:
    """Above a bar: the steps it took, where runs did not all reach the target how many
    did, and the evidence label (a precision asked for but not executed); nothing where
    no run reached it (the bar is missing and says "not reached")."""
    if pd.isna(row["steps_to_accuracy"]):
        return ""
    text = f"{number(round(row['steps_to_accuracy']))} steps"
    if row["reached"] != "yes":
        text += f" ({row['reached']} runs)"
    label = row.get("evidence_label")
    return text + (f"\n{label}" if isinstance(label, str) and label else "")


def time_to_accuracy(df: pd.DataFrame) -> Figure:
    """Seconds to the target validation accuracy (table ``time_to_accuracy``) per
    requested precision, fp32 math mode and graph, a bar per framework and other setting
    that varies, a panel per system and model; above each bar its steps; where no run
    reached the target, "not reached" in place of the bar."""
    name = "Time to accuracy"
    table = table_of(tables.quality.time_to_accuracy, df, "time_to_accuracy")
    if table.empty:
        return no_data(name)
    numerics = list(REQUEST_FIELDS)
    table = table.assign(  # a configuration without a value shows its status at the bar
        status=table["status"].mask(table["reached"].eq("no").fillna(False), "not reached"),
        numerics=table[numerics].astype(str).agg(" ".join, axis=1),
        _note=table.apply(note_of, axis=1),
        target=table["target_accuracy"].map(lambda t: f"target {number(t)}"))
    order = in_order(table, numerics, table["numerics"])
    ylabel = value_label(table, df, "seconds to target")

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="precision, fp32 math mode, graph", ylabel=ylabel)

    layout = Layout(panels=["system", "model"],
                    series=["experiment", "target", "batch_per_process", "intra_threads",
                            "vendor_library_enabled", "variant"],
                    extra_legend=[proxy("above bars: steps to the target", colour="none")])
    return bar_figure(table, layout, x="numerics", order=order, y="time_to_accuracy_s",
                      note="_note", name=name, each=axes)
