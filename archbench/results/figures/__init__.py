"""Publication figures, one function per figure type, one style (``figures.style``).

Every function takes the per-configuration summary (``archbench.results.tables.common.summary_of``)
and returns a ``matplotlib`` Figure (built without pyplot); its numbers come from the table
function ``FigureSpec.table`` names (the values that table prints: lines and bars at
``img_s``, the campaign's statistic, error bars from ``img_s_min`` to ``img_s_max``). With
no data for its experiment it returns a figure saying so. Every axis that varies in the
data is a panel, a colour or a line style with a legend label a reader understands
(``figures.labels``): two configurations never share a line. ``FIGURES`` registers each
figure, with the caption the report shows, by the file stem the workflow writes
(``results/figures/<name>.{png,pdf,svg}``); ``archbench.results.artifacts.save_figure`` writes
them. A new figure is a function in a module here plus one line below.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Mapping

import pandas as pd

from archbench.results.tables.common import normalise, summary_of
from archbench.core.metrics import DEFAULT_STATISTIC

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# what every figure says with no data for its experiment (figures.style draws it)
NO_DATA = "no data for this experiment in the campaign"

STAT = ("Values are the campaign's statistic (mean or median of the repetitions, named on "
        "the axis); error bars span min to max of the repetitions.")


@dataclass(frozen=True)
class FigureSpec:
    """A registered figure: its drawing function (``"<module>.<function>"`` of this package,
    imported when first drawn: planning a campaign needs no matplotlib), its report caption
    (RST) and the table (a name of ``archbench.results.tables.TABLES``) its numbers come from;
    ``uses_bases``: it takes each experiment's base framework (``bases=``, as its table);
    ``uses_runs``: it takes the tidy table itself (one row per run), not the summary (a
    summary gives it no runs to draw), and the ``statistic=`` to draw of them."""

    function: str
    caption: str
    table: str = ""
    uses_bases: bool = False
    uses_runs: bool = False

    def draw(self, summary: pd.DataFrame, framework_bases: Mapping[str, str] | None = None,
             statistic: str | None = None) -> Figure:
        """The figure of a per-configuration summary (of the tidy table where ``uses_runs``)."""
        module, name = self.function.rsplit(".", 1)
        extra = {"bases": framework_bases or {}} if self.uses_bases else {}
        if self.uses_runs:
            extra["statistic"] = statistic or DEFAULT_STATISTIC
        return getattr(import_module(f"archbench.results.figures.{module}"), name)(summary, **extra)


FIGURES: dict[str, FigureSpec] = {
    "thread_scaling": FigureSpec(
        "training.thread_scaling",
        "Training throughput (img/s = images of all workers / wall time of the measured "
        "window) against intra-op threads of one process, a colour per batch size, a line "
        "style per vendor-library setting, a panel per system and model (experiment 1). "
        + STAT, "thread_efficiency"),
    "thread_efficiency": FigureSpec(
        "training.thread_efficiency",
        "Thread efficiency e_t = p_t / (t p_1) of one process against threads t (p_t: img/s "
        "with t threads), every system in one panel per model, each at the batch size "
        "delivering its best performance (the batch whose highest img/s over the thread "
        "counts is the highest, as BSC 2019 Fig. 7); 1 is ideal scaling. p is the campaign's "
        "statistic of the repetitions (named on the axis).", "thread_efficiency"),
    "vendor_speedup": FigureSpec(
        "training.vendor_speedup",
        "Vendor-library speedup = img/s with the vendor math library the system declares (oneDNN, oneDNN+ACL, MKL; "
        "what really ran is in the vendor_evidence table) / "
        "img/s without, per configuration of the one-process sweeps, against intra-op "
        "threads; 1 is no change; img/s is the campaign's statistic (named on the axis).",
        "vendor_speedup"),
    "batch_scaling": FigureSpec(
        "training.batch_scaling",
        "img/s against the batch size per process, a line per thread count and every other "
        "setting that varies, a panel per system and model (OSU 2019 Figs. 1b and 11). "
        + STAT, "batch_scaling"),
    "hybrid_configurations": FigureSpec(
        "training.hybrid_configurations",
        "Processes x threads configurations filling a node (experiment 2): img/s per "
        "configuration, a bar per per-process batch size and setting (or the batch printed "
        "on the bar where each configuration ran its own); the best one per system and "
        "model is in the hybrid_best table. " + STAT, "hybrid_configurations"),
    "process_layout": FigureSpec(
        "training.process_layout",
        "Single vs multi process per node (experiment 5, OSU 2019 Figs. 6 and 10): img/s per "
        "processes-per-node x intra-op-threads layout; above each bar the speedup over one "
        "process per node S = P_ppn / P_1ppn of the same nodes, batch and settings. " + STAT,
        "process_layout"),
    "inter_intra_sweep": FigureSpec(
        "inter_intra.inter_intra_sweep",
        "Inter/intra-op sweep (experiment 3, CESGA 2018 Figs. 2-5 and 7): img/s of one "
        "process against the cores it is pinned to, a line per intra-op setting (0 = "
        "TensorFlow decides, 1, = cores), a column per inter-op setting, a row per system, "
        "model and MKL/OpenMP settings (on: the variables named in the title). A "
        "configuration where a setting equals the cores belongs to both series and is "
        "drawn in both. " + STAT, "inter_intra_sweep"),
    "inter_intra_best": FigureSpec(
        "inter_intra.inter_intra_best",
        "Best intra-op setting of each inter-op setting (CESGA 2018 Fig. 6 and Table 2): "
        "img/s against cores used of the intra-op setting whose configuration reached the "
        "highest img/s (inter_intra_best table), a line per inter-op setting; a star marks "
        "that best configuration. " + STAT, "inter_intra_best"),
    "node_scaling": FigureSpec(
        "scaling.node_scaling",
        "Throughput against the scaling series' count (nodes, workers or GPUs), a line per "
        "series (a line style per input data), each with its ideal linear "
        "scaling P_b n / b from its smallest count b (dotted); where several parameter-"
        "server counts or variable updates were tried, each point is the best one, named "
        "next to it (CSCS 2017 Figs. 8-10, BSC 2019 Figs. 14-15). " + STAT, "node_scaling"),
    "scaling_speedup": FigureSpec(
        "scaling.scaling_speedup",
        "img/s (left axis, solid) and speedup S = P_n / P_b (right axis, dashed) against "
        "the series' count n with b its smallest count, and the ideal speedup n / b "
        "(dotted) (CESGA 2018 Fig. 10). " + STAT, "node_scaling"),
    "efficiency_heatmap": FigureSpec(
        "scaling.efficiency_heatmap",
        "Parallel efficiency E = P_n / ((n / b) P_b) as a heat map: a row per scaling series "
        "(system, model, series), a column per count n (nodes, workers or GPUs); b is the "
        "series' smallest count, P the campaign's statistic of img/s (named on the colour "
        "bar); a failed cell shows its status.", "efficiency_heatmap"),
    "io_overhead": FigureSpec(
        "scaling.io_overhead",
        "I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic x 100 against "
        "the scaling series' count (nodes, workers or GPUs; a panel per unit) or, for one "
        "process, against intra-op threads; a line per system, model and series; img/s is "
        "the campaign's statistic (named on the axis).", "io_overhead"),
    "horovod_tuning": FigureSpec(
        "horovod.horovod_tuning",
        "img/s against the allreduce operations one training step needed (counted in "
        "Horovod's timeline over steps after the measured window; a fused batch of tensors "
        "counts once), a colour per HOROVOD_FUSION_THRESHOLD and setting, a marker per "
        "HOROVOD_CYCLE_TIME. " + STAT, "horovod_tuning"),
    "horovod_cycle_time": FigureSpec(
        "horovod.horovod_cycle_time",
        "img/s (left axis, solid) and allreduce operations per step (right axis, dashed) "
        "against HOROVOD_CYCLE_TIME, a line per model, fusion threshold and setting, a "
        "panel per system and layout (OSU 2019 Fig. 18). " + STAT, "horovod_tuning"),
    "framework_comparison": FigureSpec(
        "frameworks.framework_comparison",
        "Each framework against its experiment's base framework (TensorFlow unless the "
        "campaign names another, e.g. TensorFlow vs PyTorch): img/s of every configuration "
        "run in both frameworks (the same model, batch, layout = nodes x processes or GPUs "
        "per node, threads, data and settings), a bar per framework, a panel per system and "
        "device; above each framework's bar the ratio = img/s framework / img/s base, e.g. "
        "PyTorch / TensorFlow (above 1: it is faster; its 95 % interval is in the "
        "framework_comparison table). " + STAT, "framework_comparison", uses_bases=True),
    "kernel_gflops": FigureSpec(
        "kernels.kernel_gflops",
        "HPC kernels in TensorFlow (matmul 2N^3 - N^2, CG iterations x 2N^2, FFT 5 N log2 N "
        "flops): GFLOP/s against workers, one line per problem size (experiment 7). " + STAT,
        "kernel_gflops"),
    "stream_bandwidth": FigureSpec(
        "kernels.stream_bandwidth",
        "STREAM memory bandwidth (copy, scale, add, triad; GB/s = bytes moved / s) against "
        "array size, and communication bandwidth between two TensorFlow tasks against "
        "message size. " + STAT, "stream_bandwidth"),
    "energy": FigureSpec(
        "energy.energy",
        "Throughput against energy per image: img/s over J/img (energy a sensor measured over "
        "the window / images of all workers in it; the mean of the runs that measured it), a "
        "point per training configuration and sensor (colour and marker: NVML GPU board, RAPL "
        "CPU package or DRAM, Slurm node; sensors overlap and are never summed), a panel per "
        "system, device and model, each point named by the settings that vary (in panels "
        "of a dozen points or fewer); up and left is better. Configurations no sensor measured are not "
        "drawn (the energy table says why). " + STAT, "energy"),
    "precision_speedup": FigureSpec(
        "precision.precision_speedup",
        "Precision speedup = img/s of a precision (bf16, fp16), fp32 math mode (bf16, tf32) "
        "or graph (compiled) configuration / img/s of its fp32-strict-eager twin (the same "
        "system, device, framework, model, layout, threads and batch), a bar per "
        "configuration, a colour per framework; error bars: from min / twin max to max / "
        "twin min of the repetitions (the 95 % interval is in the precision_speedup "
        "table); above each bar the "
        "evidence label where what the vendor probe saw execute is not what was asked "
        "(\"bf16 asked, fp32 executed\") and \"loss departs\" where the mean loss of the "
        "last third of the measured steps departs from the twin's by more than max(10 %, "
        "0.02); 1 (dashed) is as fast as fp32 strict eager.", "precision_speedup"),
    "time_to_accuracy": FigureSpec(
        "quality.time_to_accuracy",
        "Time to accuracy (quality gate, as MLPerf Training measures a run): seconds from "
        "the first training step to the evaluation that reached the target validation "
        "accuracy of the digits (evaluations on the clock; a compiled graph's compiling "
        "first step off it), per requested precision, fp32 math mode and graph, a bar per "
        "framework; above each bar the steps it took, \"not reached\" where no run reached "
        "the target within its step cap, and the evidence label where a precision asked for "
        "did not execute. Values are the mean over the runs that reached it.",
        "time_to_accuracy"),
    "tuning": FigureSpec(
        "tuning.tuning",
        "The tuner's progress (experiment type tune), a panel per tuning study (experiment, "
        "system, device, framework, model, input and numerics): img/s against the node-hours "
        "spent (nodes x (end - start) summed over the study's runs in start order, failed "
        "ones included), a marker per successive-halving rung for each run's own img/s "
        "(lower rungs measure fewer steps and only decide what is promoted), crosses on the "
        "axis for failed runs, and the best so far (solid step line): the highest img/s "
        "(the campaign's statistic, mean or median, as the legend says) of a configuration "
        "over its top-rung (full-fidelity) runs completed by then; its last value is the "
        "tuning table's img_s. Dashed: the best img/s (the same statistic) of the "
        "exhaustive sweep the trials name, where it ran in the same data (regret and cost "
        "ratio are in the tuning table).", "tuning", uses_runs=True),
}


def build_figure(name: str, df: pd.DataFrame, statistic: str | None = None,
                 framework_bases: Mapping[str, str] | None = None) -> Figure:
    """Figure ``name`` of ``FIGURES`` from the tidy table ``df`` (or its summary), drawing
    ``statistic`` (mean or median of the repetitions; default mean); ``framework_bases``:
    the base framework of each experiment that names one, for ``framework_comparison``."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure '{name}' (known: {', '.join(FIGURES)})")
    tidy = normalise(df) if "variant" not in df else df
    spec = FIGURES[name]
    if spec.uses_runs:
        return spec.draw(tidy, framework_bases, statistic)
    return spec.draw(summary_of(tidy, statistic), framework_bases)


__all__ = ["FIGURES", "NO_DATA", "FigureSpec", "build_figure"]
