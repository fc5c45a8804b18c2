"""Derived tables of a campaign, following the metric definitions of docs/metrics.md.

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
from typing import Callable, Mapping

import pandas as pd

from archbench.core.metrics import DEFAULT_STATISTIC
from archbench.results.tables import (
    batches,
    best,
    energy,
    evidence,
    frameworks,
    hosts,
    inter_intra,
    kernels,
    platforms,
    precision,
    processes,
    quality,
    scaling,
    training,
    tuning,
    vs_published,
)
from archbench.results.tables.batches import batch_scaling
from archbench.results.tables.best import best_hybrid
from archbench.results.tables.common import is_summary, normalise, summarise, summary_of
from archbench.results.tables.frameworks import framework_comparison
from archbench.results.tables.inter_intra import inter_intra_best, inter_intra_sweep
from archbench.results.tables.kernels import fraction_of_peak, kernel_gflops, peak_gflops, stream_bandwidth
from archbench.results.tables.platforms import platform
from archbench.results.tables.processes import process_layout
from archbench.results.tables.scaling import best_per_size, efficiency_heatmap, io_overhead, node_scaling
from archbench.results.tables.training import (
    horovod_tuning,
    hybrid_configurations,
    thread_efficiency,
    vendor_speedup,
)


@dataclass(frozen=True)
class TableSpec:
    """A registered table: ``build(summary) -> DataFrame``; ``uses_peak``: it also takes the
    campaign's measured peaks (``peak=`` keyword); ``uses_systems``: it also takes the
    campaign's resolved systems (``systems=`` keyword, name -> system definition);
    ``uses_runs``: it takes the tidy table itself (one row per run), not the summary;
    ``uses_published``: it also takes the published values (``published=`` keyword, a table
    of :func:`archbench.results.claims.load_published`) and the ``statistic=`` to report;
    ``uses_statistic``: it takes the ``statistic=`` to report (mean unless the campaign
    says median); ``uses_bases``: it takes each experiment's base framework (``bases=``,
    experiment -> framework, from the experiments' ``framework_base``)."""

    build: Callable[..., pd.DataFrame]
    uses_peak: bool = False
    uses_systems: bool = False
    uses_runs: bool = False
    uses_published: bool = False
    uses_statistic: bool = False
    uses_bases: bool = False

    @property
    def caption(self) -> str:
        """The report caption: the function's docstring, Sphinx roles as plain literals."""
        text = inspect.getdoc(self.build) or ""
        return re.sub(r":\w+:`([^`]*)`", r"``\1``", text)


TABLES: dict[str, TableSpec] = {
    "summary": TableSpec(summary_of),
    "thread_efficiency": TableSpec(training.thread_efficiency),
    "vendor_speedup": TableSpec(training.vendor_speedup),
    "vendor_evidence": TableSpec(evidence.vendor_evidence, uses_runs=True),
    "hybrid_configurations": TableSpec(training.hybrid_configurations),
    "hybrid_best": TableSpec(best.best_hybrid),
    "inter_intra_sweep": TableSpec(inter_intra.inter_intra_sweep),
    "inter_intra_best": TableSpec(inter_intra.inter_intra_best),
    "process_layout": TableSpec(processes.process_layout),
    "batch_scaling": TableSpec(batches.batch_scaling),
    "platform": TableSpec(platforms.platform, uses_systems=True, uses_runs=True),
    "best_per_size": TableSpec(scaling.best_per_size),
    "node_scaling": TableSpec(scaling.node_scaling),
    "efficiency_heatmap": TableSpec(scaling.efficiency_heatmap),
    "io_overhead": TableSpec(scaling.io_overhead),
    "horovod_tuning": TableSpec(training.horovod_tuning),
    "framework_comparison": TableSpec(frameworks.framework_comparison, uses_runs=True,
                                      uses_statistic=True, uses_bases=True),
    "kernel_gflops": TableSpec(kernels.kernel_gflops),
    "stream_bandwidth": TableSpec(kernels.stream_bandwidth),
    "fraction_of_peak": TableSpec(kernels.fraction_of_peak, uses_peak=True),
    "vs_published": TableSpec(vs_published.vs_published, uses_runs=True, uses_published=True),
    "host_outliers": TableSpec(hosts.host_outliers, uses_runs=True, uses_statistic=True),
    "energy": TableSpec(energy.energy, uses_runs=True, uses_statistic=True),
    "precision_speedup": TableSpec(precision.precision_speedup, uses_runs=True, uses_statistic=True),
    "time_to_accuracy": TableSpec(quality.time_to_accuracy),
    "tuning": TableSpec(tuning.tuning, uses_runs=True, uses_statistic=True),
}


def build_table(name: str, df: pd.DataFrame, peak: dict | None = None, *,
                statistic: str | None = None, systems: dict | None = None,
                published: pd.DataFrame | None = None,
                framework_bases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Table ``name`` of ``TABLES`` from the tidy table (or its summary) ``df``, reporting
    ``statistic`` (mean or median of the repetitions; default mean); ``systems``: the
    campaign's resolved systems, for the tables that take them; ``published``: the
    published values (:func:`archbench.results.claims.load_published`), for ``vs_published``;
    ``framework_bases``: the base framework of each experiment that names one
    (:func:`archbench.results.artifacts.framework_bases`), for ``framework_comparison``."""
    if name not in TABLES:
        raise KeyError(f"unknown table '{name}' (known: {', '.join(TABLES)})")
    spec = TABLES[name]
    tidy = normalise(df) if "variant" not in df else df
    if spec.uses_runs and is_summary(tidy):
        raise ValueError(f"table '{name}' is built from the tidy table (one row per run), not a summary")
    data = tidy if spec.uses_runs else summary_of(tidy, statistic)
    extra = {"peak": peak or {}} if spec.uses_peak else {}
    if spec.uses_systems:
        extra["systems"] = systems or {}
    if spec.uses_published:
        extra.update(published=published, statistic=statistic)
    if spec.uses_statistic:
        extra["statistic"] = statistic or DEFAULT_STATISTIC
    if spec.uses_bases:
        extra["bases"] = framework_bases or {}
    return spec.build(data, **extra)


def build_tables(df: pd.DataFrame, peak: dict | None = None, *,
                 statistic: str | None = None, systems: dict | None = None,
                 framework_bases: Mapping[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Every table of ``TABLES``, summarising ``df`` once."""
    tidy = normalise(df) if "variant" not in df else df
    summary = summary_of(tidy, statistic)
    return {name: build_table(name, tidy if spec.uses_runs else summary, peak,
                              statistic=statistic, systems=systems, framework_bases=framework_bases)
            for name, spec in TABLES.items()}


__all__ = [
    "TABLES", "TableSpec", "build_table", "build_tables", "normalise", "summarise", "summary_of",
    "thread_efficiency", "vendor_speedup", "hybrid_configurations", "best_hybrid",
    "best_per_size", "node_scaling", "efficiency_heatmap", "io_overhead", "horovod_tuning",
    "kernel_gflops", "stream_bandwidth", "fraction_of_peak", "peak_gflops",
    "inter_intra_sweep", "inter_intra_best", "process_layout", "batch_scaling", "platform",
    "vs_published", "framework_comparison",
]
