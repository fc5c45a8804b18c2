"""Derived tables of a campaign, following the metric definitions of DESIGN.md.

Every table function takes the tidy measurements table (``results/tables/measurements.csv``
plus imported rows) and returns a DataFrame with fixed columns and sorted rows; without
data for its experiment it returns an empty table with the same headers. ``TABLES``
registers them by the file stem the workflow writes (``results/tables/<name>.{csv,md,tex}``);
the report's caption of a table is its function's docstring. A new table is a function in
a module here plus one line below.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from archbench.tables import best, kernels, scaling, training
from archbench.tables.best import best_hybrid
from archbench.tables.common import normalise, summarise, summary_of
from archbench.tables.kernels import fraction_of_peak, kernel_gflops, peak_gflops, stream_bandwidth
from archbench.tables.scaling import best_per_size, efficiency_heatmap, io_overhead, node_scaling
from archbench.tables.training import (
    best_inter_intra,
    horovod_tuning,
    hybrid_configurations,
    thread_efficiency,
    vendor_speedup,
)


@dataclass(frozen=True)
class TableSpec:
    """A registered table: ``build(tidy table or summary) -> DataFrame``; ``uses_peak``:
    it also takes the campaign's measured peaks (``peak=`` keyword)."""

    build: Callable[..., pd.DataFrame]
    uses_peak: bool = False

    @property
    def caption(self) -> str:
        """The report caption: the function's docstring, Sphinx roles as plain literals."""
        text = inspect.getdoc(self.build) or ""
        return re.sub(r":\w+:`([^`]*)`", r"``\1``", text)


TABLES: dict[str, TableSpec] = {
    "summary": TableSpec(summary_of),
    "thread_efficiency": TableSpec(training.thread_efficiency),
    "vendor_speedup": TableSpec(training.vendor_speedup),
    "hybrid_configurations": TableSpec(training.hybrid_configurations),
    "hybrid_best": TableSpec(best.best_hybrid),
    "inter_intra_best": TableSpec(training.best_inter_intra),
    "best_per_size": TableSpec(scaling.best_per_size),
    "node_scaling": TableSpec(scaling.node_scaling),
    "efficiency_heatmap": TableSpec(scaling.efficiency_heatmap),
    "io_overhead": TableSpec(scaling.io_overhead),
    "horovod_tuning": TableSpec(training.horovod_tuning),
    "kernel_gflops": TableSpec(kernels.kernel_gflops),
    "stream_bandwidth": TableSpec(kernels.stream_bandwidth),
    "fraction_of_peak": TableSpec(kernels.fraction_of_peak, uses_peak=True),
}


def build_table(name: str, df: pd.DataFrame, peak: dict | None = None, *,
                statistic: str | None = None) -> pd.DataFrame:
    """Table ``name`` of ``TABLES`` from the tidy table (or its summary) ``df``, reporting
    ``statistic`` (mean or median of the repetitions; default mean)."""
    if name not in TABLES:
        raise KeyError(f"unknown table '{name}' (known: {', '.join(TABLES)})")
    spec = TABLES[name]
    summary = summary_of(normalise(df) if "variant" not in df else df, statistic)
    return spec.build(summary, peak=peak or {}) if spec.uses_peak else spec.build(summary)


def build_tables(df: pd.DataFrame, peak: dict | None = None, *,
                 statistic: str | None = None) -> dict[str, pd.DataFrame]:
    """Every table of ``TABLES``, summarising ``df`` once."""
    summary = summary_of(normalise(df) if "variant" not in df else df, statistic)
    return {name: build_table(name, summary, peak) for name in TABLES}


__all__ = [
    "TABLES", "TableSpec", "build_table", "build_tables", "normalise", "summarise", "summary_of",
    "thread_efficiency", "vendor_speedup", "hybrid_configurations", "best_hybrid",
    "best_inter_intra", "best_per_size", "node_scaling", "efficiency_heatmap", "io_overhead", "horovod_tuning",
    "kernel_gflops", "stream_bandwidth", "fraction_of_peak", "peak_gflops",
]
