"""Derived tables of a campaign, following the metric definitions of DESIGN.md.

Every table function takes the tidy measurements table (``results/tables/measurements.csv``
plus imported rows) and returns a DataFrame with fixed columns and sorted rows; without
data for its experiment it returns an empty table with the same headers. ``TABLES`` lists
them by the file stem the workflow writes (``results/tables/<name>.{csv,md,tex}``).
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from archbench.tables.common import normalise, summarise, summary_of
from archbench.tables.kernels import fraction_of_peak, kernel_gflops, peak_gflops, stream_bandwidth
from archbench.tables.training import (
    best_hybrid, best_inter_intra, efficiency_heatmap, horovod_tuning, hybrid_configurations,
    io_overhead, node_scaling, thread_efficiency, vendor_speedup,
)

TableFunction = Callable[..., pd.DataFrame]

TABLES: dict[str, TableFunction] = {
    "summary": summary_of,
    "thread_efficiency": thread_efficiency,
    "vendor_speedup": vendor_speedup,
    "hybrid_configurations": hybrid_configurations,
    "hybrid_best": best_hybrid,
    "inter_intra_best": best_inter_intra,
    "node_scaling": node_scaling,
    "efficiency_heatmap": efficiency_heatmap,
    "io_overhead": io_overhead,
    "horovod_tuning": horovod_tuning,
    "kernel_gflops": kernel_gflops,
    "stream_bandwidth": stream_bandwidth,
    "fraction_of_peak": fraction_of_peak,
}


def build_table(name: str, df: pd.DataFrame, peak: dict | None = None) -> pd.DataFrame:
    """Table ``name`` of ``TABLES`` from the tidy table (or its summary) ``df``."""
    if name not in TABLES:
        raise KeyError(f"unknown table '{name}' (known: {', '.join(TABLES)})")
    if name == "fraction_of_peak":
        return fraction_of_peak(df, peak or {})
    return TABLES[name](df)


def build_tables(df: pd.DataFrame, peak: dict | None = None) -> dict[str, pd.DataFrame]:
    """Every table of ``TABLES``, summarising ``df`` once."""
    summary = summary_of(normalise(df) if "variant" not in df else df)
    return {name: build_table(name, summary, peak) for name in TABLES}


__all__ = [
    "TABLES", "build_table", "build_tables", "normalise", "summarise", "summary_of",
    "thread_efficiency", "vendor_speedup", "hybrid_configurations", "best_hybrid",
    "best_inter_intra", "node_scaling", "efficiency_heatmap", "io_overhead", "horovod_tuning",
    "kernel_gflops",
    "stream_bandwidth", "fraction_of_peak", "peak_gflops",
]
