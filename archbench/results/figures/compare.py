"""The before-and-after figure: each comparable configuration's ratio new / base with its
confidence interval (a horizontal bar), sorted by ratio, on a log axis centred on 1; the
band of no practical change shaded; the colour says the verdict. Drawn from the table of
:func:`archbench.results.comparison.compare`; not in ``FIGURES`` (it is made of two
record sets, not of one campaign's summary)."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from archbench.results.figures.style import FAILED, PANEL_WIDTH, no_data, palette, style

ROW_HEIGHT, MAX_LABEL = 0.24, 70
COLOURS = {"slower": FAILED, "faster": None, "no significant change": "0.45"}  # None: palette


def label(row: pd.Series, several: dict[str, bool]) -> str:
    """A configuration's y label: its (base side's) config_id, with the experiment and system
    where the table holds several."""
    parts = [str(row[c]) for c in ("system", "experiment") if several[c]]
    text = " / ".join([*parts, str(row["config_id"])])
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 3] + "..."


def comparison_figure(table: pd.DataFrame, threshold: float, *, title: str = "") -> Figure:
    """Ratio new / base and its interval per comparable configuration, sorted by ratio; the
    band [1 / (1 + threshold), 1 + threshold] shaded; configurations without a ratio are
    counted under the axis."""
    rows = table[table["ratio"].notna()] if not table.empty else table
    if rows.empty:
        return no_data(title or "comparison: no configuration comparable")
    rows = rows.sort_values(["ratio", "experiment", "system", "config_id"], kind="mergesort")
    several = {c: table[c].nunique(dropna=True) > 1 for c in ("system", "experiment")}
    with style():
        colours = {**COLOURS, "faster": palette(3)[2]}
        height = max(2.0, ROW_HEIGHT * len(rows) + 1.4)
        figure = Figure(figsize=(PANEL_WIDTH * 2.2, height), layout="constrained")
        ax = figure.subplots()
        band = 1 + threshold
        ax.axvspan(1 / band, band, color="0.88", zorder=0)
        ax.axvline(1.0, color="0.3", linewidth=0.8, zorder=1)
        ys = list(range(len(rows)))
        for y, (_, row) in zip(ys, rows.iterrows()):
            colour = colours[row["verdict"]]
            ax.plot([row["ci95_low"], row["ci95_high"]], [y, y], color=colour, linewidth=2,
                    solid_capstyle="butt", zorder=2)
            ax.plot([row["ratio"]], [y], "o", color=colour, zorder=3)
        ax.set_yticks(ys, [label(r, several) for _, r in rows.iterrows()], fontsize=7)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xscale("log")
        low = min(rows["ci95_low"].min(), rows["ratio"].min(), 1 / band)
        high = max(rows["ci95_high"].max(), rows["ratio"].max(), band)
        pad = (math.log(high) - math.log(low)) * 0.08 or 0.01
        ax.set_xlim(math.exp(math.log(low) - pad), math.exp(math.log(high) + pad))
        ax.xaxis.set_major_formatter("{x:.3g}")
        ax.xaxis.set_minor_formatter("{x:.3g}")
        ax.tick_params(axis="x", which="both", labelsize=7)
        statistic = str(rows["statistic"].iloc[0])
        others = len(table) - len(rows)
        xlabel = f"throughput ratio new / base ({statistic}, 95 % interval)"
        if others:
            xlabel += f"\n{others} configuration(s) not comparable (see the table)"
        ax.set_xlabel(xlabel)
        ax.grid(axis="y", visible=False)
        handles = [Patch(color=colours[v], label=v) for v in ("faster", "slower", "no significant change")
                   if (rows["verdict"] == v).any()]
        handles.append(Patch(color="0.88", label=f"within +/-{threshold:.1%}"))
        figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        if title:
            figure.suptitle(title)
    return figure
