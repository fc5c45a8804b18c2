"""One look for every archbench figure, and the panel/legend helpers the figures share.

Figures are built on ``matplotlib.figure.Figure`` (no pyplot state) inside :func:`style`:
seaborn's whitegrid axes and paper context, the colorblind palette, DejaVu Sans. Categories
(hue, style) are mapped in sorted order so colours are the same in every panel and run.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterable, Iterator, Sequence

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

PALETTE = "colorblind"
NO_DATA = "no data for this experiment in the campaign"
PANEL_WIDTH, PANEL_HEIGHT, MAX_COLUMNS = 3.4, 2.7, 3
RC = {
    "font.family": "DejaVu Sans",
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "svg.hashsalt": "archbench",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "axes.titlesize": 9,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "lines.markersize": 5,
}


@contextmanager
def style() -> Iterator[None]:
    """rcParams of the archbench look (used while a figure is built)."""
    rc = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper"), **RC}
    with matplotlib.rc_context(rc):
        yield


def palette(n: int) -> list:
    """``n`` colours of the archbench palette."""
    return sns.color_palette(PALETTE, n_colors=max(n, 1))


def ordered(values: Iterable) -> list:
    """Distinct values in a fixed order: numbers numerically, then text alphabetically."""
    distinct = {v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))
                and v is not pd.NA}
    return sorted(distinct, key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else 0,
                                           str(v)))


def label_column(frame: pd.DataFrame, columns: Sequence[str], names: Sequence[str] | None = None) -> pd.Series:
    """A text label per row from ``columns`` ("resnet50 / b64 / on"), for hue or panels."""
    names = names or [""] * len(columns)
    parts = []
    for column, name in zip(columns, names):
        col = frame[column].astype(object)
        if column == "vendor_library_enabled":
            text = col.map(lambda v: "vendor lib on" if v is True else
                           "vendor lib off" if v is False else "")
        else:
            text = col.map(lambda v, name=name: "" if v is None or v is pd.NA or
                           (isinstance(v, float) and math.isnan(v)) else f"{name}{v}")
        parts.append(text)
    joined = parts[0].astype(str) if parts else pd.Series("", index=frame.index)
    for part in parts[1:]:
        joined = joined.str.cat(part.astype(str), sep=" / ")
    return joined.str.replace(r"( / )+$", "", regex=True).str.replace(r"^( / )+", "", regex=True)


def panels(n: int, sharey: bool = False) -> tuple[Figure, list]:
    """A figure with ``n`` panels in up to three columns (constrained layout)."""
    ncols = min(MAX_COLUMNS, max(n, 1))
    nrows = max(1, math.ceil(n / ncols))
    figure = Figure(figsize=(PANEL_WIDTH * ncols + 1.6, PANEL_HEIGHT * nrows + 0.4),
                    layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False, sharey=sharey).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return figure, axes[:n]


def no_data(title: str) -> Figure:
    """The figure of an experiment the campaign has no data for (still a valid file)."""
    with style():
        figure = Figure(figsize=(PANEL_WIDTH * 1.6, PANEL_HEIGHT), layout="constrained")
        ax = figure.subplots()
        ax.set_axis_off()
        ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes,
                fontsize=10, color="0.3")
        figure.suptitle(title)
    return figure


def shared_legend(figure: Figure, axes: Sequence) -> None:
    """Replace the panels' legends with one legend right of the figure, centred vertically
    so it stays clear of the title (entries in the order first seen, duplicates dropped)."""
    seen: dict[str, object] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            if label and not label.startswith("_") and label not in seen:
                seen[label] = handle
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if seen:
        figure.legend(list(seen.values()), list(seen.keys()), loc="outside right center",
                      frameon=False)


def mark_failures(ax, xs: Sequence[float], label: str = "failed run(s)") -> None:
    """Red crosses on the x axis where a configuration produced no value (never a zero)."""
    xs = [float(x) for x in xs if x is not None and not pd.isna(x)]
    if not xs:
        return
    transform = blended_transform_factory(ax.transData, ax.transAxes)
    ax.scatter(xs, np.full(len(xs), 0.03), marker="x", color="#c0392b", s=30, zorder=5,
               transform=transform, clip_on=False, label=label)


def log2_axis(ax, axis: str, values: Iterable) -> None:
    """A base-2 log axis ticked at the measured ``values``."""
    ticks = [v for v in ordered(values) if isinstance(v, (int, float, np.integer, np.floating)) and v > 0]
    if len(ticks) < 2:
        return
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_ticks = ax.set_xticks if axis == "x" else ax.set_yticks
    set_scale("log", base=2)
    set_ticks(ticks, [_short(t) for t in ticks])
    if axis == "x":
        ax.minorticks_off()


def _short(value: float) -> str:
    """Tick text: 1, 2, ... 1K, 2M for powers of two sizes."""
    value = float(value)
    for factor, suffix in ((2**30, "G"), (2**20, "M"), (2**10, "K")):
        if value >= factor and value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return f"{int(value)}" if value.is_integer() else f"{value:g}"


def facets(frame: pd.DataFrame, columns: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(panel title, rows) per distinct value of ``columns``, in sorted order."""
    frame = frame.assign(_panel=label_column(frame, columns))
    return [(title, frame[frame["_panel"] == title]) for title in ordered(frame["_panel"])]


def series_plot(ax, data: pd.DataFrame, *, x: str, y: str, hue: str, hue_order: list,
                style_col: str | None = None, style_order: list | None = None,
                low: str | None = None, high: str | None = None) -> None:
    """Mean lines with markers (and min-max error bars when ``low``/``high`` are given)."""
    colours = dict(zip(hue_order, palette(len(hue_order))))
    marks = {"markers": True, "dashes": True} if style_col else {"marker": "o"}
    sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=hue_order, palette=colours,
                 style=style_col, style_order=style_order, errorbar=None, estimator=None,
                 sort=True, ax=ax, **marks)
    if low and high:
        for level in hue_order:
            part = data[data[hue] == level]
            if part.empty:
                continue
            lower = (part[y] - part[low]).clip(lower=0)
            upper = (part[high] - part[y]).clip(lower=0)
            ax.errorbar(part[x].astype(float), part[y], yerr=[lower, upper], fmt="none",
                        ecolor=colours[level], elinewidth=0.8, capsize=2)
