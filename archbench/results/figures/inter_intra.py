"""Figures of the inter/intra-op thread sweep (experiment 3; CESGA 2018 Figs. 2-7): img/s
vs the cores one process is pinned to, a line per intra-op setting, a panel per inter-op
setting and MKL/OpenMP environment; and the best intra-op setting of each inter-op
setting in one panel (Fig. 6). Numbers come from the tables ``inter_intra_sweep`` and
``inter_intra_best``.

A configuration where a setting equals the cores ("1 = cores": inter-op 1 on 1 core) is
a point of both series, as the tables say; it is drawn in both.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results import tables
from archbench.results.figures.labels import missing
from archbench.results.figures.plot import Layout, line_figure, table_of
from archbench.results.figures.style import Panel, no_data, value_label

SETTINGS = " = "  # how the tables join two settings of one configuration
GROUP = ["experiment", "data", "vendor_library_enabled", "batch_per_process"]
# what identifies one sweep in both tables
SWEEP = ["experiment", "system", "framework", "model", "data", "vendor_library_enabled",
         "batch_per_process", "mkl_env"]


def _explode(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per setting a configuration belongs to ("1 = cores": rows "1" and "cores")."""
    settings = table[column].astype(object).map(
        lambda s: [None] if missing(s) else str(s).split(SETTINGS))
    return table.assign(**{column: settings}).explode(column).reset_index(drop=True)


def placed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that name the cores they were pinned to (records older than that setting
    do not; they have no place on the cores axis)."""
    return table[table["cores"].notna()]


def mkl_settings(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``table`` with ``mkl_settings``: "off" where no MKL/OpenMP variable was set, "on"
    where the one environment of the table was, the environment itself where there are
    several; and the note naming the "on" environment."""
    envs = sorted({str(e) for e in table["mkl_env"].dropna() if str(e) != "none"})
    single = len(envs) == 1

    def setting(env: object) -> object:
        if missing(env):
            return pd.NA
        if str(env) == "none":
            return "off"
        return "on" if single else str(env)
    note = f"MKL settings on: {envs[0]}" if single else ""
    return table.assign(mkl_settings=table["mkl_env"].astype(object).map(setting)), note


def _axes(ylabel: str):
    def axes(panel: Panel, _looks: dict) -> None:
        panel.ax.set(xlabel="cores used", ylabel=ylabel, ylim=(0, None))
    return axes


def inter_intra_sweep(df: pd.DataFrame) -> Figure:
    """img/s vs cores used (table ``inter_intra_sweep``), a line per intra-op setting (0 =
    TensorFlow decides, 1, = cores), a column of panels per inter-op setting, a row per
    system, model and MKL/OpenMP settings (CESGA 2018 Figs. 2-5 and 7)."""
    name = "Inter/intra-op sweep: img/s vs cores used"
    table = placed(table_of(tables.inter_intra_sweep, df, "inter_intra_sweep"))
    if table.empty:
        return no_data(name)
    table, note = mkl_settings(_explode(_explode(table, "inter_setting"), "intra_setting"))
    layout = Layout(panels=["system", "model", "mkl_settings"], cols=["inter_setting"],
                    always=["intra_setting"], series=GROUP,
                    style=["data", "vendor_library_enabled"])
    return line_figure(table, layout, x="cores", y="img_s", low="img_s_min", high="img_s_max",
                       name="\n".join(t for t in (name, note) if t),
                       each=_axes(value_label(table, df)))


def best_series(sweep: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """The sweep's rows (exploded by setting) of each inter-op setting's best intra-op
    setting (``best``: the ``inter_intra_best`` table; where the best configuration is in
    two intra series, "1 = cores", the first), as CESGA 2018 Fig. 6 plots them."""
    keys = [c for c in (*SWEEP, "inter_setting") if c in best and c in sweep]
    chosen = best[best["intra_setting"].notna()].assign(
        intra_setting=lambda b: b["intra_setting"].astype(str).str.split(SETTINGS).str[0])
    chosen = chosen[[*keys, "intra_setting", "cores"]].rename(columns={"cores": "best_cores"})
    rows = _explode(_explode(sweep, "inter_setting"), "intra_setting")
    join = [*keys, "intra_setting"]
    left = rows[join].astype(object).where(rows[join].notna(), "")
    right = chosen[join].astype(object).where(chosen[join].notna(), "")
    matched = left.reset_index().merge(right.assign(best_cores=chosen["best_cores"].to_numpy()),
                                       on=join, how="inner")
    out = rows.loc[matched["index"]].assign(best_cores=matched["best_cores"].to_numpy())
    return out.reset_index(drop=True)


def inter_intra_best(df: pd.DataFrame) -> Figure:
    """img/s vs cores used of each inter-op setting's best intra-op setting (the one of
    table ``inter_intra_best``: highest img/s over intra-op settings and cores), a line
    per inter-op setting, a panel per system, model and MKL/OpenMP settings (CESGA 2018
    Fig. 6); a star marks each setting's best point."""
    name = "Inter/intra-op sweep: best intra-op setting of each inter-op setting"
    sweep = placed(table_of(tables.inter_intra_sweep, df, "inter_intra_best"))
    best = table_of(tables.inter_intra_best, df, "inter_intra_best")
    if sweep.empty or best.empty:
        return no_data(name)
    table, note = mkl_settings(best_series(sweep, best))
    if table.empty:
        return no_data(name)
    ylabel = value_label(table, df)

    def axes(panel: Panel, looks: dict) -> None:
        top = panel.rows[panel.rows["cores"] == panel.rows["best_cores"]]
        for _, row in top.iterrows():
            if not missing(row["img_s"]):
                panel.ax.plot([float(row["cores"])], [float(row["img_s"])], marker="*",
                              markersize=11, color=looks[row["_label"]].colour, label="_best",
                              linestyle="none")
        _axes(ylabel)(panel, looks)

    layout = Layout(panels=["system", "model", "mkl_settings"],
                    always=["inter_setting", "intra_setting"], series=GROUP,
                    style=["data", "vendor_library_enabled"])
    return line_figure(table, layout, x="cores", y="img_s", low="img_s_min", high="img_s_max",
                       name="\n".join(t for t in (name, note) if t), each=axes)
