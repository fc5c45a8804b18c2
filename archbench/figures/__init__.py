"""Publication figures, one function per figure type, one style (``figures.style``).

Every function takes the tidy measurements table and returns a ``matplotlib`` Figure
(built without pyplot); with no data for its experiment it returns a figure saying so.
``FIGURES`` lists them by the file stem the workflow writes
(``results/figures/<name>.{png,pdf,svg}``); ``archbench.artifacts.save_figure`` writes them.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd
from matplotlib.figure import Figure

from archbench.figures.kernels import kernel_gflops, stream_bandwidth
from archbench.figures.style import NO_DATA, no_data, style
from archbench.figures.training import (
    efficiency_heatmap, horovod_tuning, hybrid_configurations, io_overhead, node_scaling,
    thread_efficiency, thread_scaling, vendor_speedup,
)

FIGURES: dict[str, Callable[[pd.DataFrame], Figure]] = {
    "thread_scaling": thread_scaling,
    "thread_efficiency": thread_efficiency,
    "vendor_speedup": vendor_speedup,
    "hybrid_configurations": hybrid_configurations,
    "node_scaling": node_scaling,
    "efficiency_heatmap": efficiency_heatmap,
    "io_overhead": io_overhead,
    "horovod_tuning": horovod_tuning,
    "kernel_gflops": kernel_gflops,
    "stream_bandwidth": stream_bandwidth,
}


def build_figure(name: str, df: pd.DataFrame) -> Figure:
    """Figure ``name`` of ``FIGURES`` from the tidy table ``df``."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure '{name}' (known: {', '.join(FIGURES)})")
    return FIGURES[name](df)


__all__ = ["FIGURES", "NO_DATA", "build_figure", "no_data", "style", *FIGURES]
