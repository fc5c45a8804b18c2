"""The two figure shapes most archbench figures are: lines over a numeric x and bars over
categories, one panel per value of the panel columns, one legend for the figure.

Both split series by every candidate column that varies inside a panel
(:func:`archbench.results.figures.labels.series_columns`), so a legend entry is one series and
no two configurations share a point or a bar slot. Each series has one :class:`Look`
(colour from its hue columns, marker and dashes from its style columns), the same in
every panel; lines and bars are drawn at the table's value with error bars from its min
to its max.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from archbench.plan.experiment_types import EXPERIMENT_TYPES
from archbench.results.figures.labels import IDENTITY, NAMED, label, series_columns, steady, varying
from archbench.results.figures.style import (
    DASHES,
    FAILED,
    MARKERS,
    Panel,
    grid,
    in_order,
    log2_axis,
    mark_failures,
    palette,
    shared_legend,
    style,
)


@dataclass(frozen=True)
class Look:
    """How one series is drawn."""

    colour: tuple
    marker: str
    dashes: object


def looks(frame: pd.DataFrame, columns: Sequence[str], style_columns: Sequence[str] = ()
          ) -> dict[str, Look]:
    """A :class:`Look` per legend label (``label(frame, columns)``), in table order: the
    colour from the label's columns that are not ``style_columns``, marker and dashes from
    the ``style_columns`` that vary."""
    text = label(frame, columns)
    hue_cols = [c for c in columns if c not in style_columns]
    style_cols = varying(frame, style_columns)
    hue = label(frame, hue_cols)
    dash = label(frame, style_cols)
    hues = in_order(frame, hue_cols, hue)
    dashes = in_order(frame, style_cols, dash)
    colours = dict(zip(hues, palette(len(hues))))
    out = {}
    firsts = pd.Series(text.index, index=text.to_numpy()).groupby(level=0, sort=False).first()
    for name in in_order(frame, [*hue_cols, *style_cols], text):
        first = firsts[name]
        i = dashes.index(dash[first])
        out[name] = Look(colours[hue[first]], MARKERS[i % len(MARKERS)] if style_cols else "o",
                         DASHES[i % len(DASHES)] if style_cols else "-")
    return out


def draw_lines(ax, rows: pd.DataFrame, *, x: str, y: str, looks: dict[str, Look],
               low: str | None = None, high: str | None = None, connect: bool = True) -> None:
    """One line per legend label (column ``_label``) at ``y`` over ``x`` (markers only
    unless ``connect``), with min-max error bars from ``low``/``high``; rows without a
    value are red crosses on the x axis."""
    drawn = rows[rows[y].notna() & rows[x].notna()]
    groups = dict(list(drawn.groupby("_label", sort=False)))
    for name in [n for n in looks if n in groups]:
        look = looks[name]
        part = groups[name].sort_values(x, kind="mergesort")
        xs, ys = part[x].astype(float).to_numpy(), part[y].astype(float).to_numpy()
        ax.plot(xs, ys, color=look.colour, marker=look.marker,
                linestyle=look.dashes if connect else "none", label=name)
        error_bars(ax, part, xs, y=y, low=low, high=high, colour=look.colour)
    mark_failures(ax, rows.loc[rows[y].isna(), x].tolist())


def twin_lines(panel, looks: dict[str, Look], *, x: str, y: str):
    """A right-hand axis on ``panel`` with each series' ``y`` against ``x`` as a dashed
    line in the series' colour and marker (hollow); returns the twin axis."""
    twin = panel.ax.twinx()
    twin.grid(False)
    for text, rows in panel.rows.groupby("_label", sort=False):
        rows = rows[rows[y].notna()].sort_values(x)
        look = looks[text]
        twin.plot(rows[x].astype(float), rows[y].astype(float), ls="--", marker=look.marker,
                  mfc="none", color=look.colour, label=f"_{y}")
    return twin


def error_bars(ax, part: pd.DataFrame, xs, *, y: str, low: str | None, high: str | None,
               colour) -> None:
    """Error bars from ``part[low]`` to ``part[high]`` around ``part[y]`` at ``xs``."""
    if not low or not high or low not in part or high not in part:
        return
    values = part[y].astype(float)
    lower = (values - part[low].astype(float)).clip(lower=0).fillna(0).to_numpy()
    upper = (part[high].astype(float) - values).clip(lower=0).fillna(0).to_numpy()
    # plain lists: matplotlib warns on one-point arrays here
    ax.errorbar(list(xs), values.tolist(), yerr=[lower.tolist(), upper.tolist()], fmt="none",
                ecolor=colour,
                elinewidth=0.8, capsize=2, label="_nolegend_")


def draw_bars(ax, rows: pd.DataFrame, *, x: str, order: list, y: str, looks: dict[str, Look],
              low: str | None = None, high: str | None = None, note: str | None = None) -> None:
    """Bars of ``y`` per category of ``x`` (in ``order``), one bar per legend label side by
    side, min-max error bars; a configuration without a value shows its status; ``note``:
    a text column printed above each bar."""
    present = [name for name in looks if (rows["_label"] == name).any()]
    width = 0.8 / max(len(present), 1)
    for j, name in enumerate(present):
        part = rows[rows["_label"] == name]
        pos = np.array([order.index(v) for v in part[x]], dtype=float) - 0.4 + width * (j + 0.5)
        ok = part[y].notna().to_numpy()
        if ok.any():
            ax.bar(pos[ok], part[y][ok].astype(float), width=width, color=looks[name].colour,
                   label=name)
            error_bars(ax, part[ok], pos[ok], y=y, low=low, high=high, colour="0.2")
        for p, status in zip(pos[~ok], part["status"][~ok] if "status" in part else []):
            ax.text(p, 0, str(status), rotation=90, ha="center", va="bottom", fontsize=7,
                    color=FAILED)
        if note and ok.any():
            top = part[high] if high and high in part else part[y]
            for p, h, text in zip(pos[ok], top[ok].astype(float), part[note][ok]):
                if isinstance(text, str) and text:
                    ax.annotate(text, (p, h), xytext=(0, 2), textcoords="offset points",
                                ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(order)), [str(v) for v in order], rotation=45, ha="right")


@dataclass
class Layout:
    """How a table becomes panels and series.

    ``panels`` (and ``cols``, the columns of a panel matrix) choose the panels; the legend
    label of a row is ``always`` plus every column of ``labels.NAMED`` (the framework) and
    of ``series`` that varies inside a panel (then ``fallback`` columns, only if needed to
    keep two rows apart); colours
    follow the label's columns except ``style``, which choose markers and dashes."""

    panels: Sequence[str]
    series: Sequence[str]
    cols: Sequence[str] = ()
    always: Sequence[str] = ()
    style: Sequence[str] = ()
    fallback: Sequence[str] = IDENTITY
    group: Sequence[str] = ()
    extra_legend: list = field(default_factory=list)


def table_of(build: Callable[[pd.DataFrame], pd.DataFrame], summary: pd.DataFrame,
             figure: str) -> pd.DataFrame:
    """``build(summary)`` (a table function) for figure ``figure``: the rows of the
    experiments that feed it (:func:`of_figure`), with the system's ``vendor_library`` where
    the table has no such column, so labels name it ("oneDNN on", not "vendor library on")."""
    table = of_figure(build(summary), summary, figure)
    if "vendor_library" in table or "system" not in table or "vendor_library" not in summary:
        return table
    named = summary[summary["vendor_library"].notna()].drop_duplicates("system")
    return table.assign(vendor_library=table["system"].map(
        named.set_index("system")["vendor_library"]))


def of_figure(table: pd.DataFrame, summary: pd.DataFrame, figure: str) -> pd.DataFrame:
    """The rows of ``table`` from experiments whose type lists ``figure`` among its figures
    (``ExperimentType.figures``), or that have no type (imported results); every row for a
    figure no type lists (one of every experiment, e.g. ``energy``)."""
    if "experiment" not in table or "experiment_type" not in summary or table.empty:
        return table
    if not any(figure in t.figures for t in EXPERIMENT_TYPES.values()):
        return table
    types = summary.drop_duplicates("experiment").set_index("experiment")["experiment_type"]
    kind = table["experiment"].map(types)
    keep = kind.map(lambda t: not isinstance(t, str) or t not in EXPERIMENT_TYPES
                    or figure in EXPERIMENT_TYPES[t].figures)
    return table[keep.fillna(True).astype(bool).to_numpy()]


def labelled(table: pd.DataFrame, layout: Layout, x: Sequence[str]) -> tuple[pd.DataFrame, dict]:
    """``table`` with its legend label in ``_label``, and the :class:`Look` of each label."""
    always = [c for c in layout.always if c in table]
    within = [*layout.panels, *layout.cols]
    series = [*(c for c in NAMED if c not in layout.series), *layout.series]
    columns = series_columns(table, columns=[*always, *series], within=within, x=x,
                             fallback=[c for c in layout.fallback if c not in within],
                             group=layout.group)
    columns = list(dict.fromkeys([*always, *columns]))
    named = steady(table, columns, layout.group) if layout.group else table
    table = table.assign(_label=label(named, columns))
    # the texts, not only the values, keep the series apart (raises ValueError otherwise)
    series_columns(table, columns=["_label"], within=within, x=x, fallback=(), group=layout.group)
    return table, looks(named, columns, layout.style)


def line_figure(table: pd.DataFrame, layout: Layout, *, x: str, y: str, name: str,
                low: str | None = None, high: str | None = None, log_x: bool = True,
                points: bool = False, each: Callable[[Panel, dict], None] | None = None) -> Figure:
    """Lines of ``y`` over ``x`` per series, min-max error bars from ``low``/``high``
    (``points``: one unconnected point per series and panel); ``each(panel, looks)`` adds
    to every panel (axis labels, reference lines)."""
    with style():
        table, series_looks = labelled(table, layout, [] if points else [x])
        figure, panels = grid(table, layout.panels, layout.cols)
        for panel in panels:
            draw_lines(panel.ax, panel.rows, x=x, y=y, looks=series_looks, low=low, high=high,
                       connect=not points)
            if log_x:
                log2_axis(panel.ax, "x", panel.rows[x].dropna())
            if each:
                each(panel, series_looks)
        shared_legend(figure, [p.ax for p in panels], layout.extra_legend)
        figure.suptitle(name)
    return figure


def bar_figure(table: pd.DataFrame, layout: Layout, *, x: str, order: list, y: str, name: str,
               low: str | None = None, high: str | None = None, note: str | None = None,
               each: Callable[[Panel, dict], None] | None = None) -> Figure:
    """Bars of ``y`` per category of ``x`` (in ``order``, those of a panel only), one bar
    per series side by side, min-max error bars, ``note`` printed above each bar."""
    with style():
        table, series_looks = labelled(table, layout, [x])
        figure, panels = grid(table, layout.panels, layout.cols)
        for panel in panels:
            present = [c for c in order if (panel.rows[x] == c).any()]
            draw_bars(panel.ax, panel.rows, x=x, order=present, y=y, looks=series_looks,
                      low=low, high=high, note=note)
            if each:
                each(panel, series_looks)
        shared_legend(figure, [p.ax for p in panels], layout.extra_legend)
        figure.suptitle(name)
    return figure
