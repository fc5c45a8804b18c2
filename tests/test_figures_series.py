"""No figure merges two series: built from a campaign with two values on every axis its
table varies (``fabricated.axis_configurations``: system, model, data, vendor
library on/off, batch, threads, inter-op threads, processes per node, nodes, strategy and
parameter servers, MKL settings, cores, Horovod knobs, two experiments of a type, the
framework, precision, math mode and graph, ...),
every figure draws as many lines (bar groups, heat-map rows, points) as its table has
series, counted here from the table itself, and no two of them share a legend label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import fabricated as fabricate
import pandas as pd
import pytest
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from archbench.results.collect import flatten
from archbench.results.figures import FIGURES, build_figure
from archbench.results.figures.plot import of_figure
from archbench.results.tables import TABLES
from archbench.results.tables.common import normalise, summary_of

# the figures drawn from the summary; one drawn from the runs (``uses_runs``: the tuner's
# progress) has its series checked by its own test (tests/test_tuning_table.py)
SUMMARY_FIGURES = [name for name, spec in FIGURES.items() if not spec.uses_runs]

# table columns that are results, not settings: never a series of their own
RESULTS = {
    "statistic", "n", "img_s", "img_s_min", "img_s_max", "error", "std", "spread_flag",
    "host_busy", "short_window_flag",
    "n_failed", "status", "speedup", "efficiency", "img_s_baseline", "baseline_count",
    "img_s_1thread", "img_s_on", "img_s_off", "img_s_synthetic", "img_s_real",
    "io_overhead_percent", "relative", "baseline_batch", "img_s_single_process",
    "n_configurations", "n_failed_configurations", "relative_to_best", "allreduces_per_step",
    "gflops", "gflops_min", "gflops_max", "gflops_baseline", "baseline_workers",
    "bandwidth_gb_s", "bandwidth_min", "bandwidth_max", "unit", "n_choices",
    *(f"{c}_{f}" for f in ("tensorflow", "pytorch") for c in ("n", "img_s", "img_s_min",
                                                               "img_s_max", "cv")),
    "ratio", "ratio_ci95_low", "ratio_ci95_high",
}


@dataclass(frozen=True)
class Case:
    """How to count a figure's series in its table: rows with a value in ``y`` (when
    set), grouped by every column but the results, ``along`` (what changes along one
    line or across the bars of one group) and, where the table names its series,
    by ``series`` instead; ``kind``: what one series is drawn as."""

    y: str | None
    along: tuple[str, ...] = ()
    kind: str = "lines"
    series: tuple[str, ...] = ()
    rows: Callable[[pd.DataFrame], pd.DataFrame] | None = None


def split_settings(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep with a row per thread setting ("1 = cores" is in the series 1 and cores)."""
    for column in ("inter_setting", "intra_setting"):
        table = table.assign(**{column: table[column].astype(str).str.split(" = ")}).explode(column)
    return table


def best_of_each_inter(best: pd.DataFrame) -> pd.DataFrame:
    return best[best["img_s"].notna()]


def with_values(name: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda t: t[t[name].notna()]


SCALING = ("experiment", "system", "model", "series")
CASES = {
    "thread_scaling": Case("img_s", along=("threads",)),
    # one line per system (and setting) at its best batch: the batch is no series of its own
    "thread_efficiency": Case("efficiency", along=("threads", "batch_per_process")),
    "vendor_speedup": Case("speedup", along=("intra_threads",)),
    "batch_scaling": Case("img_s", along=("batch_per_process", "global_batch")),
    "hybrid_configurations": Case("img_s", kind="bars", along=(
        "configuration", "processes_per_node", "intra_threads", "global_batch")),
    "process_layout": Case("img_s", kind="bars", along=(
        "processes_per_node", "intra_threads", "workers", "global_batch")),
    "inter_intra_sweep": Case("img_s", along=("cores", "inter_threads", "intra_threads"),
                              rows=split_settings),
    "inter_intra_best": Case(None, along=("cores", "inter_threads", "intra_threads"),
                             rows=best_of_each_inter),
    "node_scaling": Case("img_s", series=SCALING),
    "scaling_speedup": Case("img_s", series=SCALING),
    "efficiency_heatmap": Case(None, kind="rows"),
    "io_overhead": Case("io_overhead_percent"),  # counted by io_series below
    "horovod_tuning": Case(None, kind="points", rows=lambda t: t[
        t["img_s"].notna() & t["allreduces_per_step"].notna()]),
    "horovod_cycle_time": Case("img_s", along=("cycle_time_ms",)),
    "framework_comparison": Case(None, kind="bars"),  # counted by framework_bars below
    "precision_speedup": Case("speedup", kind="bars"),  # counted by framework_bars below
    # a bar per framework and setting, grouped by precision / math mode / graph
    "time_to_accuracy": Case("time_to_accuracy_s", kind="bars", series=(
        "experiment", "system", "model", "framework", "batch_per_process", "intra_threads",
        "vendor_library_enabled", "target_accuracy", "variant")),
    "kernel_gflops": Case("gflops", along=("workers",)),
    "stream_bandwidth": Case("bandwidth_gb_s", along=("problem_size",)),
    # the points of one sensor in one panel (system, device, model) are one series, unjoined
    "energy": Case("j_per_img", kind="scatter", series=("system", "device", "model", "source", "covers")),
}


@pytest.fixture(scope="module")
def summary() -> pd.DataFrame:
    records = fabricate.fabricate_axis_records(repetitions=2)
    return summary_of(normalise(pd.DataFrame([flatten(r) for r in records])))


def table_behind(name: str, summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of the figure's table its experiments feed."""
    return of_figure(TABLES[FIGURES[name].table].build(summary), summary, name)


def _key(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(object).where(frame.notna(), "<NA>")


def expected_series(name: str, table: pd.DataFrame) -> int:
    """The number of series of ``table`` the figure must draw, counted from the table."""
    case = CASES[name]
    if case.rows:
        table = case.rows(table)
    if case.y:
        table = table[table[case.y].notna()]
    if case.kind in ("rows", "points"):
        return len(table)
    if name == "io_overhead":
        return io_series(table)
    if name == "framework_comparison":
        return framework_bars(table)
    if name == "precision_speedup":  # a bar series per framework in every panel
        return len(_key(table[["system", "device", "framework"]]).drop_duplicates())
    columns = list(case.series) or [c for c in table.columns
                                    if c not in RESULTS and c not in case.along]
    return len(_key(table[columns]).drop_duplicates())


def io_series(table: pd.DataFrame) -> int:
    """I/O overhead: a scaling series per (experiment, system, model, series); outside a
    scaling series a line over intra-op threads per remaining setting."""
    scaled = table["scaling_unit"].notna() & table["count"].notna()
    lines = len(_key(table.loc[scaled, list(SCALING)]).drop_duplicates())
    one = table.loc[~scaled, [c for c in table.columns if c not in RESULTS
                              and c not in ("intra_threads", "series", "count")]]
    return lines + len(_key(one).drop_duplicates())


def framework_bars(table: pd.DataFrame) -> int:
    """TensorFlow vs PyTorch: two series (a bar each) in every panel (system and device),
    each configuration a group of the two."""
    return 2 * len(_key(table[["system", "device"]]).drop_duplicates())


def drawn(figure: Figure, kind: str) -> list[list[str]]:
    """The labels of the series drawn, per panel (lines or points: labelled lines; bars:
    labelled bar groups; rows: the heat map's row labels; scatter: labelled lines of
    unjoined markers)."""
    out = []
    for ax in figure.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        if kind == "bars":
            labels = [c.get_label() for c in ax.containers if isinstance(c, BarContainer)]
        elif kind == "rows":
            labels = [t.get_text() for t in ax.get_yticklabels()]
        else:
            labels = [line.get_label() for line in ax.get_lines()]
        out.append([t for t in labels if t and not t.startswith("_")])
    return [labels for labels in out if labels]


@pytest.mark.parametrize("name", SUMMARY_FIGURES)
def test_every_series_of_the_table_is_drawn_once(name, summary):
    assert name in CASES, f"figure {name}: add how to count its series to CASES"
    table = table_behind(name, summary)
    expected = expected_series(name, table)
    assert expected >= 2, f"{name}: the fixture must give this figure several series"
    figure = build_figure(name, summary)
    panels = drawn(figure, CASES[name].kind)
    assert sum(len(p) for p in panels) == expected, f"{name}: {sum(len(p) for p in panels)} series drawn, the table has {expected}"
    for labels in panels:  # one label, one series, in every panel
        assert len(labels) == len(set(labels)), [t for t in labels if labels.count(t) > 1]
    legend = [t.get_text() for lg in figure.legends for t in lg.get_texts()]
    assert len(legend) == len(set(legend))


@pytest.mark.parametrize("name", [n for n in SUMMARY_FIGURES if CASES.get(n, Case(None)).kind == "lines"])
def test_a_line_visits_each_x_once(name, summary):
    # two series joined into one line would zig-zag: the same x twice on one line
    figure = build_figure(name, summary)
    for ax in figure.axes:
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                xs = list(line.get_xdata())
                assert len(xs) == len(set(xs)), (name, line.get_label(), xs)
                assert xs == sorted(xs), (name, line.get_label(), xs)


# the axes each table varies in the fixture (two values each)
AXES = {
    "thread_efficiency": ("experiment", "system", "framework", "model", "data",
                          "vendor_library_enabled", "batch_per_process", "inter_threads", "threads"),
    # (PyTorch runs with the vendor library on only: no PyTorch pair of on and off)
    "vendor_speedup": ("experiment", "system", "model", "data", "batch_per_process",
                       "inter_threads", "intra_threads"),
    "batch_scaling": ("experiment", "system", "framework", "model", "data",
                      "vendor_library_enabled", "intra_threads", "inter_threads",
                      "batch_per_process", "precision", "math_mode", "graph"),
    "hybrid_configurations": ("system", "framework", "model", "data", "vendor_library_enabled",
                              "batch_per_process", "inter_threads", "processes_per_node"),
    "process_layout": ("experiment", "system", "framework", "model", "data",
                       "vendor_library_enabled", "batch_per_process", "inter_threads", "nodes",
                       "processes_per_node"),
    "inter_intra_sweep": ("system", "framework", "model", "data", "vendor_library_enabled",
                          "batch_per_process", "mkl_env", "cores", "inter_setting",
                          "intra_setting"),
    "inter_intra_best": ("system", "framework", "model", "data", "vendor_library_enabled",
                         "batch_per_process", "mkl_env", "inter_setting"),
    "node_scaling": ("experiment", "system", "framework", "model", "data",
                     "vendor_library_enabled", "batch_per_process", "strategy",
                     "processes_per_node", "scaling_unit", "count", "parameter_servers"),
    "efficiency_heatmap": ("experiment", "system", "framework", "model", "data",
                           "vendor_library_enabled", "series"),
    "io_overhead": ("experiment", "system", "framework", "model", "vendor_library_enabled",
                    "batch_per_process", "strategy", "processes_per_node", "intra_threads",
                    "count"),
    "horovod_tuning": ("system", "framework", "model", "data", "vendor_library_enabled",
                       "batch_per_process", "nodes", "cycle_time_ms", "fusion_threshold_mb"),
    "framework_comparison": ("experiment", "system", "model", "data", "layout", "nodes",
                             "processes_per_node", "strategy", "intra_threads", "inter_threads",
                             "batch_per_process", "cores"),
    "precision_speedup": ("system", "framework", "precision", "math_mode", "graph"),
    "time_to_accuracy": ("system", "framework", "precision", "graph", "batch_per_process",
                         "intra_threads"),
    "kernel_gflops": ("system", "problem_size", "tile_size", "nodes", "workers"),
    "stream_bandwidth": ("system", "problem_size", "workers"),
    "energy": ("system", "framework", "model", "data", "batch_per_process", "covers"),
}


@pytest.mark.parametrize("name", SUMMARY_FIGURES)
def test_the_fixture_varies_every_axis_of_the_table(name, summary):
    # a merge along an axis shows only where the axis takes two values
    table = table_behind(name, summary)
    for column in AXES[FIGURES[name].table]:
        assert column in table, (name, column)
        assert table[column].astype(object).nunique(dropna=False) >= 2, (name, column)
