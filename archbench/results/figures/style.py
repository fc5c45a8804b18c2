"""One look for every archbench figure, and the panel, legend and axis helpers the
figures share.

Figures are built on ``matplotlib.figure.Figure`` (no pyplot state) inside :func:`style`:
seaborn's whitegrid axes and paper context, the colorblind palette, DejaVu Sans. Panels
come from :func:`grid` (one per distinct value of the panel columns, optionally as a
rows x columns matrix); one legend right of the figure lists every series once
(:func:`shared_legend`), the figure growing so that every entry fits.
"""

from __future__ import annotations

import math
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter, ScalarFormatter
from matplotlib.transforms import blended_transform_factory

from archbench.core.metrics import DEFAULT_STATISTIC
from archbench.results.figures import NO_DATA
from archbench.results.figures.labels import title

PALETTE = "colorblind"
PANEL_WIDTH, PANEL_HEIGHT, MAX_COLUMNS = 3.4, 2.7, 3
# legend: inches per entry, entries in one column, longest label of a two-column legend;
# characters of a panel title line
LEGEND_ENTRY, LEGEND_ROWS, LEGEND_SHORT, TITLE_WIDTH = 0.19, 30, 32, 40
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
FAILED = "#c0392b"
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
    import seaborn as sns  # here: a dry run imports the figure registry, not seaborn
    rc = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper"), **RC}
    with matplotlib.rc_context(rc):
        yield


def palette(n: int) -> list:
    """``n`` distinct colours: the colorblind palette, or evenly spaced hues beyond it."""
    import seaborn as sns
    return sns.color_palette(PALETTE if n <= 10 else "husl", n_colors=max(n, 1))


def ordered(values: Iterable) -> list:
    """Distinct values in a fixed order: numbers numerically, then text alphabetically."""
    distinct = {v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))
                and v is not pd.NA}
    return sorted(distinct, key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else 0,
                                           str(v)))


def sorted_index(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Index:
    """The index of ``frame`` sorted by ``columns``: numbers numerically, then text
    ("0", "2", "16", "cores"), missing last."""
    columns = [c for c in columns if c in frame]
    if not columns or frame.empty:
        return frame.index
    keys = pd.DataFrame(index=frame.index)
    for i, column in enumerate(columns):
        values = frame[column].astype(object)
        numeric = pd.to_numeric(values.map(lambda v: float(v) if isinstance(v, (bool, np.bool_))
                                           else v), errors="coerce")
        keys[f"{i}n"] = numeric.fillna(np.inf).where(values.notna(), np.inf)
        keys[f"{i}t"] = values.map(lambda v: "" if v is None or v is pd.NA else str(v))
        keys[f"{i}m"] = values.isna()
    order = [f"{i}{k}" for i in range(len(columns)) for k in "mnt"]
    return keys.sort_values(order, kind="mergesort").index


def in_order(frame: pd.DataFrame, columns: Sequence[str], text: pd.Series) -> list[str]:
    """Distinct ``text`` values in the order of the rows sorted by ``columns``."""
    return list(dict.fromkeys(text.loc[sorted_index(frame, columns)]))


def statistic_of(*frames: pd.DataFrame) -> str:
    """The statistic a table reports (its ``statistic`` column; mean when none says)."""
    for frame in frames:
        if "statistic" in frame and frame["statistic"].notna().any():
            return str(frame["statistic"].dropna().iloc[0])
    return DEFAULT_STATISTIC


def value_label(table: pd.DataFrame, df: pd.DataFrame, what: str = "img/s") -> str:
    """An axis label naming the statistic drawn, e.g. "img/s (median)"."""
    return f"{what} ({statistic_of(table, df)})"


# ------------------------------------------------------------------------ panels
@dataclass
class Panel:
    """One panel of a figure: its title, axes and the rows drawn in it."""

    title: str
    ax: object
    rows: pd.DataFrame


def grid(frame: pd.DataFrame, rows: Sequence[str], cols: Sequence[str] = (), *,
         sharey: bool = False) -> tuple[Figure, list[Panel]]:
    """A figure with one panel per distinct value of ``rows`` + ``cols``: a matrix (one row
    per value of ``rows``, one column per value of ``cols``) when ``cols`` vary, else up to
    three panels a row. Panels without data are not drawn."""
    frame = frame.assign(_row=title(frame, rows), _col=title(frame, cols))
    row_titles = in_order(frame, rows, frame["_row"])
    col_titles = in_order(frame, cols, frame["_col"])
    if len(col_titles) > 1:
        cells = [(r, c) for r in row_titles for c in col_titles]
        ncols, nrows = len(col_titles), len(row_titles)
    else:
        index = sorted_index(frame, [*rows, *cols])
        cells = list(dict.fromkeys(zip(frame.loc[index, "_row"], frame.loc[index, "_col"])))
        ncols = min(MAX_COLUMNS, max(len(cells), 1))
        nrows = max(1, math.ceil(len(cells) / ncols))
    figure = Figure(figsize=(PANEL_WIDTH * ncols + 2.4, PANEL_HEIGHT * nrows + 0.5),
                    layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False, sharey=sharey).ravel().tolist()
    out = []
    for ax, (r, c) in zip(axes, cells):
        part = frame[(frame["_row"] == r) & (frame["_col"] == c)]
        if part.empty:
            ax.set_visible(False)
            continue
        name = ", ".join(t for t in (r, c) if t)
        ax.set_title(textwrap.fill(name, TITLE_WIDTH, break_on_hyphens=False))
        out.append(Panel(name, ax, part.drop(columns=["_row", "_col"])))
    for ax in axes[len(cells):]:
        ax.set_visible(False)
    return figure, out


# ------------------------------------------------------------------------ legend
def shared_legend(figure: Figure, axes: Sequence, extra: Sequence[tuple[object, str]] = ()) -> None:
    """Replace the panels' legends with one legend right of the figure, centred vertically
    (entries in the order first seen, duplicates dropped, then ``extra`` (handle, label))."""
    seen: dict[str, object] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, text in zip(handles, labels):
            if text and not text.startswith("_") and text not in seen:
                seen[text] = handle
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    for handle, text in extra:
        seen.setdefault(text, handle)
    if not seen:
        return
    short = max(map(len, seen)) <= LEGEND_SHORT
    columns = 1 if len(seen) <= LEGEND_ROWS or not short else 2
    needed = math.ceil(len(seen) / columns) * LEGEND_ENTRY + 0.8
    if needed > figure.get_figheight():  # room for every entry: the figure grows
        figure.set_figheight(needed)
    figure.legend(list(seen.values()), list(seen.keys()), loc="outside right center",
                  frameon=False, ncols=columns)


def proxy(text: str, *, colour="0.4", marker: str = "", dashes: object = "-") -> tuple[Line2D, str]:
    """A legend entry not tied to one series (e.g. "dotted: ideal")."""
    return Line2D([], [], color=colour, marker=marker, linestyle=dashes), text


# ------------------------------------------------------------------------ axes
def no_data(name: str) -> Figure:
    """The figure of an experiment the campaign has no data for (still a valid file)."""
    with style():
        figure = Figure(figsize=(PANEL_WIDTH * 1.6, PANEL_HEIGHT), layout="constrained")
        ax = figure.subplots()
        ax.set_axis_off()
        ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes,
                fontsize=10, color="0.3")
        figure.suptitle(name)
    return figure


def mark_failures(ax, xs: Sequence[float], text: str = "failed run(s)") -> None:
    """Red crosses on the x axis where a configuration produced no value (never a zero)."""
    xs = [float(x) for x in xs if x is not None and not pd.isna(x)]
    if not xs:
        return
    transform = blended_transform_factory(ax.transData, ax.transAxes)
    ax.scatter(xs, np.full(len(xs), 0.03), marker="x", color=FAILED, s=30, zorder=5,
               transform=transform, clip_on=False, label=text)


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


def log_y(ax, values: Iterable) -> None:
    """A log y axis with plain numbers, when every value is positive."""
    values = [float(v) for v in values if not pd.isna(v)]
    if len(values) > 1 and min(values) > 0:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


def _short(value: float) -> str:
    """Tick text: 1, 2, ... 1K, 2M for powers of two sizes."""
    value = float(value)
    for factor, suffix in ((2**30, "G"), (2**20, "M"), (2**10, "K")):
        if value >= factor and value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return f"{int(value)}" if value.is_integer() else f"{value:g}"
