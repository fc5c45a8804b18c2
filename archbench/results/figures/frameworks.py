"""TensorFlow against PyTorch: grouped bars of each framework's img/s for every
configuration run in both, the ratio PyTorch / TensorFlow above each pair. Numbers come
from the table ``framework_comparison``."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import label, varying
from archbench.results.figures.plot import Layout, bar_figure, table_of
from archbench.results.figures.style import Panel, in_order, no_data, value_label
from archbench.results.tables.frameworks import BASE, OTHER, SIDE

PANELS = ["system", "device"]
# what names a configuration on the x axis: always these, then whatever else varies
ALWAYS = ["model", "batch_per_process", "layout"]
OTHERS = ["experiment", "data", "strategy", "vendor_library_enabled", "intra_threads",
          "inter_threads", "image_size", "cores", "variant", "loader_workers"]


def bars_of(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and framework (``framework``, ``img_s``, its min and max,
    ``status``) from the wide ``framework_comparison`` table, with the configuration's
    name in ``configuration`` and the ratio printed above PyTorch's bar (``ratio_text``)."""
    within = [c for c in PANELS if c in table]
    columns = ALWAYS + varying(table, OTHERS, within)
    lines = pd.concat([label(table, [c], empty="") for c in columns], axis=1)
    named = table.assign(configuration=lines.apply(lambda r: "\n".join(t for t in r if t), axis=1),
                         _order=range(len(table)))
    ratio = named["ratio"].map(lambda r: f"{r:.2f}x" if pd.notna(r) else "")
    sides = []
    for framework in (BASE, OTHER):  # a side without a value shows the pair's status
        side = named.rename(columns={f"{c}_{framework}": c for c in SIDE}).assign(
            framework=framework, _side=len(sides), ratio_text=ratio if framework == OTHER else "")
        sides.append(side[[*within, "configuration", "framework", *SIDE, "status", "ratio_text",
                           "statistic", "_order", "_side"]])
    return pd.concat(sides, ignore_index=True).sort_values(["_order", "_side"], kind="mergesort")


def framework_comparison(df: pd.DataFrame) -> Figure:
    """img/s in TensorFlow and in PyTorch (table ``framework_comparison``): a bar per
    framework for every configuration run in both (named by model, batch, layout and
    whatever else varies), min-max error bars, the ratio PyTorch / TensorFlow above each
    pair; a panel per system and device."""
    name = "TensorFlow vs PyTorch: img/s of the same configuration"
    table = table_of(tables.framework_comparison, df, "framework_comparison")
    if table.empty:
        return no_data(name)
    bars = bars_of(table.reset_index(drop=True))
    order = in_order(bars, ["_order"], bars["configuration"])
    ylabel = value_label(table, df)

    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(ylabel=ylabel, ylim=(0, panel.ax.get_ylim()[1] * 1.08))  # room for the ratios
        for tick in panel.ax.get_xticklabels():  # a configuration's name, one setting a line
            tick.set(rotation=0, ha="center", fontsize=7)

    layout = Layout(panels=PANELS, series=["framework"], always=["framework"], fallback=())
    figure = bar_figure(bars, layout, x="configuration", order=order, y="img_s",
                        low="img_s_min", high="img_s_max", note="ratio_text", name=name, each=axes)
    widest = bars.groupby([c for c in PANELS if c in bars], dropna=False)["configuration"].nunique().max()
    lines = max(text.count("\n") + 1 for text in order)
    width, height = figure.get_size_inches()
    panels = sum(ax.get_visible() for ax in figure.axes)
    figure.set_size_inches(max(width, min(panels, 3) * 1.1 * widest + 2.4), height + 0.15 * lines)
    return figure
