"""Publication figures, one function per figure type, one style (``figures.style``).

Every function takes the tidy measurements table and returns a ``matplotlib`` Figure
(built without pyplot); with no data for its experiment it returns a figure saying so.
``FIGURES`` registers each one, with the caption the report shows, by the file stem the
workflow writes (``results/figures/<name>.{png,pdf,svg}``); ``archbench.artifacts.save_figure``
writes them. A new figure is a function in a module here plus one line below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd
from matplotlib.figure import Figure

from archbench.figures import kernels, training
from archbench.figures.style import NO_DATA, no_data, style
from archbench.tables.common import normalise, summary_of


@dataclass(frozen=True)
class FigureSpec:
    """A registered figure: ``draw(tidy table) -> Figure`` and its report caption (RST)."""

    draw: Callable[[pd.DataFrame], Figure]
    caption: str


FIGURES: dict[str, FigureSpec] = {
    "thread_scaling": FigureSpec(
        training.thread_scaling,
        "Training throughput (img/s) against intra-op threads of one process, one line per "
        "batch size, per model, system and vendor-library setting (experiment 1). Error bars "
        "span min to max of the repetitions."),
    "thread_efficiency": FigureSpec(
        training.thread_efficiency,
        "Thread efficiency e_t = p_t / (t p_1) of one process against threads, per system and"
        " model; 1 is ideal scaling."),
    "vendor_speedup": FigureSpec(
        training.vendor_speedup,
        "Vendor-library speedup: img/s with the vendor math library (oneDNN, MKL, ArmPL) "
        "divided by img/s without, per configuration."),
    "hybrid_configurations": FigureSpec(
        training.hybrid_configurations,
        "Processes x threads configurations filling a node (experiment 2): img/s per "
        "configuration and per-process batch size; the best one per system and model is in "
        "the hybrid_best table."),
    "node_scaling": FigureSpec(
        training.node_scaling,
        "Throughput against nodes (or workers) with synthetic and real data, with the ideal "
        "linear scaling from the smallest count (experiments 4 and 5; a processes-per-node "
        "sweep on one node scales over workers)."),
    "efficiency_heatmap": FigureSpec(
        training.efficiency_heatmap,
        "Parallel efficiency E_n = P_n / (n P_1) as a heat map over system x data x nodes."),
    "io_overhead": FigureSpec(
        training.io_overhead,
        "I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic x 100 against "
        "nodes."),
    "horovod_tuning": FigureSpec(
        training.horovod_tuning,
        "img/s against the allreduce operations one training step needed (counted in "
        "Horovod's timeline over steps after the measured window; a fused batch of tensors "
        "counts once), per HOROVOD_FUSION_THRESHOLD (colour) and HOROVOD_CYCLE_TIME (marker)."),
    "kernel_gflops": FigureSpec(
        kernels.kernel_gflops,
        "HPC kernels in TensorFlow (matmul 2N^3 - N^2, CG iterations x 2N^2, FFT 5 N log2 N "
        "flops): GFLOP/s against workers, one line per problem size (experiment 7)."),
    "stream_bandwidth": FigureSpec(
        kernels.stream_bandwidth,
        "STREAM memory bandwidth (copy, scale, add, triad; GB/s) against array size, and "
        "communication bandwidth between two TensorFlow tasks (MB/s) against message size."),
}


def build_figure(name: str, df: pd.DataFrame, statistic: str | None = None) -> Figure:
    """Figure ``name`` of ``FIGURES`` from the tidy table ``df`` (or its summary), drawing
    ``statistic`` (mean or median of the repetitions; default mean)."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure '{name}' (known: {', '.join(FIGURES)})")
    return FIGURES[name].draw(summary_of(normalise(df) if "variant" not in df else df, statistic))


__all__ = ["FIGURES", "NO_DATA", "FigureSpec", "build_figure", "no_data", "style"]
