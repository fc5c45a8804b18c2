"""Framework against framework: grouped bars of each framework's img/s for every
configuration run in it and in its experiment's base framework (TensorFlow unless the
campaign names another), the ratio framework / base (e.g. PyTorch / TensorFlow) above each
framework's bar. Numbers come from the table ``framework_comparison``."""

from __future__ import annotations

from functools import partial
from typing import Mapping

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import label, varying
from archbench.results.figures.plot import Layout, bar_figure, table_of
from archbench.results.figures.style import Panel, in_order, no_data, value_label
from archbench.results.tables.frameworks import SIDE, tuning_columns
from archbench.workloads.training.frameworks import FRAMEWORKS
from archbench.workloads.training.frameworks import label as framework_label

PANELS = ["system", "device"]
# what names a configuration on the x axis: always these, then whatever else varies
ALWAYS = ["model", "batch_per_process", "layout"]
OTHERS = ["experiment", "data", "strategy", "vendor_library_enabled", "intra_threads",
          "inter_threads", "image_size", "cores", "variant"]  # and each framework's own setting


def bars_of(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and framework (``framework``, ``img_s``, its min and max,
    ``status``) from the wide ``framework_comparison`` table, with the configuration's
    name in ``configuration`` and the ratio printed above the compared framework's bar
    (``ratio_text``); a base compared with several frameworks is one bar."""
    within = [c for c in PANELS if c in table]
    columns = ALWAYS + varying(table, [*OTHERS, *tuning_columns()], within)
    lines = pd.concat([label(table, [c], empty="") for c in columns], axis=1)
    named = table.assign(configuration=lines.apply(lambda r: "\n".join(t for t in r if t), axis=1),
                         _order=range(len(table)))
    ratio = named["ratio"].map(lambda r: f"{r:.2f}x" if pd.notna(r) else "")
    rank = {name: k for k, name in enumerate(FRAMEWORKS)}
    sides = []
    for role in ("base", "framework"):  # a side without a value shows the pair's status
        for framework, part in named.groupby(role, sort=False):
            side = part.rename(columns={f"{c}_{framework}": c for c in SIDE}).assign(
                framework=framework, _side=(role == "framework") * (len(rank) + 1) + rank.get(framework, len(rank)),
                ratio_text=ratio[part.index] if role == "framework" else "")
            sides.append(side[[*within, "configuration", "framework", *SIDE, "status", "ratio_text",
                               "statistic", "_order", "_side"]])
    bars = pd.concat(sides, ignore_index=True)
    bars = bars.drop_duplicates([*within, "configuration", "framework"])
    return bars.sort_values(["_order", "_side"], kind="mergesort")


def title(table: pd.DataFrame) -> str:
    """"TensorFlow vs PyTorch": the frameworks compared, bases first, in the registry's order."""
    rank = {name: k for k, name in enumerate(FRAMEWORKS)}
    names = [*table.get("base", []), *table.get("framework", [])] or list(FRAMEWORKS)[:2]
    return " vs ".join(framework_label(n) for n in sorted(dict.fromkeys(names), key=lambda n: (
        n not in set(table.get("base", [])), rank.get(n, len(rank)))))


def framework_comparison(df: pd.DataFrame, bases: Mapping[str, str] | None = None) -> Figure:
    """img/s in each framework and in its base, TensorFlow unless the campaign names another
    (table ``framework_comparison``): a bar per framework for every configuration run in
    both (named by model, batch, layout and whatever else varies), min-max error bars, the
    ratio framework / base (e.g. PyTorch / TensorFlow) above the framework's bar; a panel
    per system and device."""
    table = table_of(partial(tables.framework_comparison, bases=bases), df, "framework_comparison")
    name = f"{title(table)}: img/s of the same configuration"
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
