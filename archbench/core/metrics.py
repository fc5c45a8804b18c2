"""Metric definitions. Every table computes its numbers through these functions.

Notation and formulas as docs/metrics.md states them: p_t is img/s with t threads, P_n
img/s on n nodes (or workers/GPUs where that is the unit).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Mapping, Sequence

SPREAD_LIMIT = 0.10  # a configuration whose (max - min) exceeds 10% of its mean is flagged
# a measured window shorter than this is too short to time (docs/metrics.md, "Repetitions
# and the summary"): its edges (the closing barrier, a straggler's finish) vary by up to
# ~10 ms, 2 % of 0.5 s, a fifth of the spread limit
MIN_WINDOW_S = 0.5
# what a campaign's ``statistic:`` reports of a configuration's repetitions
STATISTIC_OF = {"mean": statistics.fmean, "median": statistics.median}
DEFAULT_STATISTIC = "mean"  # what a campaign without ``statistic:`` reports


def global_batch(batch_per_process: int, workers: int) -> int:
    """Images per synchronous step of all workers: global batch = batch per process x workers."""
    return batch_per_process * workers


def layout_counts(configuration: Mapping[str, Any]) -> dict[str, int]:
    """The counts a planned layout fixes: ``workers`` (nodes x processes per node) and
    ``global_batch`` (:func:`global_batch`)."""
    workers = configuration["nodes"] * configuration["processes_per_node"]
    return {"workers": workers, "global_batch": global_batch(configuration["batch_per_process"], workers)}


def training_throughput(images_per_step: int, step_times_s: Sequence[float]) -> float:
    """img/s of a measured window: (images_per_step * steps) / sum(step times).

    ``images_per_step`` is the GLOBAL batch: the images processed by ALL workers in one
    synchronous step. Never sum per-rank rates or multiply one rank's rate by the ranks.
    """
    total = float(sum(step_times_s))
    if not step_times_s or total <= 0:
        raise ValueError("throughput needs at least one measured step with positive time")
    return images_per_step * len(step_times_s) / total


def window_throughput(total_images: int, wall_time_s: float) -> float:
    """img/s = total images processed by all workers in the window / window wall time."""
    if wall_time_s <= 0:
        raise ValueError("wall time must be positive")
    return total_images / wall_time_s


def thread_efficiency(p_t: float, threads: int, p_1: float) -> float:
    """e_t = p_t / (t * p_1)."""
    return p_t / (threads * p_1)


def speedup(p_n: float, p_1: float) -> float:
    """S_n = P_n / P_1."""
    return p_n / p_1


def parallel_efficiency(p_n: float, n: int, p_1: float) -> float:
    """E_n = P_n / (n * P_1)."""
    return p_n / (n * p_1)


def io_overhead_percent(synthetic: float, real: float) -> float:
    """I/O overhead (%) = (img/s synthetic - img/s real) / img/s synthetic * 100."""
    return (synthetic - real) / synthetic * 100.0


def vendor_speedup(with_vendor: float, without_vendor: float) -> float:
    """Vendor-library speedup = img/s with the vendor library / img/s without."""
    return with_vendor / without_vendor


def framework_ratio(other: float, base: float) -> float:
    """Framework ratio = img/s in the other framework / img/s in the base framework of one
    configuration (above 1: the other is faster; e.g. PyTorch / TensorFlow)."""
    return other / base


def joules_per_image(joules: float, images: int) -> float:
    """J/img = energy a sensor measured over the window (and the barriers at its edges) /
    images processed by all workers in the window."""
    if images <= 0:
        raise ValueError("images must be positive")
    return joules / images


def images_per_kwh(joules_per_img: float) -> float:
    """img/kWh = 3.6e6 J/kWh / (J/img)."""
    return 3.6e6 / joules_per_img


def precision_speedup(config: float, twin: float) -> float:
    """Precision speedup = img/s of a precision / math mode / graph configuration / img/s of
    its fp32-strict-eager twin (the same configuration otherwise; above 1: it is faster)."""
    return config / twin


def node_hours(nodes: int, start_time: str, end_time: str) -> float:
    """Node-hours of a run = nodes x (end_time - start_time) in hours (ISO 8601 times; a
    time without a zone reads as UTC)."""
    import datetime as _dt

    def parse(text: str) -> _dt.datetime:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)

    return nodes * (parse(end_time) - parse(start_time)).total_seconds() / 3600.0


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The confidence interval of the mean of ``values`` (as the summary's): mean -/+
    t(1 - (1 - confidence) / 2, n - 1) x s / sqrt(n), s the sample std; ValueError with
    fewer than 2 values."""
    from scipy import stats  # here: planning a campaign imports metrics, not scipy
    n = len(values)
    if n < 2:
        raise ValueError("an interval of the mean needs 2 values")
    mean = math.fsum(values) / n
    s = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) * s / math.sqrt(n)
    return mean - half, mean + half


def regret(found: float, best: float) -> float:
    """Regret of a tuner = 1 - found / best: ``found`` the img/s of the configuration it
    chose, ``best`` the best img/s of the exhaustive sweep of the same space (0: it found
    the sweep's best; 0.03: 3 % slower)."""
    return 1.0 - found / best


def cost_ratio(tuner_node_hours: float, sweep_node_hours: float) -> float:
    """Cost ratio = node-hours the tuner spent / node-hours the exhaustive sweep spent."""
    return tuner_node_hours / sweep_node_hours


LOSS_TAIL_FRACTION = 1 / 3  # the measured steps whose losses ``loss_tail`` averages
LOSS_TOLERANCE_REL = 0.10  # a loss departs from its twin's by more than 10 % of the twin's...
LOSS_TOLERANCE_ABS = 0.02  # ... and by more than 0.02 (docs/metrics.md, "Precision speedup")


def loss_tail(losses: Sequence[float]) -> float | None:
    """The mean loss of the last third of the measured steps (at least one step), None
    without losses or with one that is not finite."""
    values = [float(x) for x in losses if x is not None]
    if not values or len(values) != len(losses) or not all(math.isfinite(x) for x in values):
        return None
    tail = values[-max(1, math.ceil(len(values) * LOSS_TAIL_FRACTION)):]
    return math.fsum(tail) / len(tail)


def loss_departs(loss: float, twin_loss: float, *, rel: float = LOSS_TOLERANCE_REL,
                 abs_: float = LOSS_TOLERANCE_ABS) -> bool:
    """True when ``loss`` departs from its twin's ``twin_loss`` by more than the tolerance:
    |loss - twin_loss| > max(rel x |twin_loss|, abs_)."""
    return abs(loss - twin_loss) > max(rel * abs(twin_loss), abs_)


def loss_trouble(loss_first: float | None, loss_tail: float | None,
                 decreased: bool | None) -> str:
    """Why a run's losses do not show it training ("" when they may): "not finite" (a
    loss of its series was not, which makes ``decreased`` False and leaves no tail) or
    "rising" (the tail is above the first loss by more than the tolerance of
    :func:`loss_departs`)."""
    present = [x is not None and math.isfinite(x) for x in (loss_first, loss_tail)]
    if decreased is not None and not decreased and not present[1]:
        return "not finite"
    if all(present) and loss_tail > loss_first and loss_departs(loss_tail, loss_first):
        return "rising"
    return ""


def coefficient_of_variation(std: float, mean: float) -> float:
    """CV = s / mean: the sample standard deviation of the repetitions over their mean."""
    return std / mean


def matmul_flops(n: int) -> float:
    """Floating-point operations of an N x N matrix multiply: 2N^3 - N^2."""
    return 2.0 * n**3 - n**2


def cg_flops(n: int, iterations: int) -> float:
    """Conjugate gradient flops as the studies count them: iterations * 2N^2."""
    return iterations * 2.0 * n**2


def fft_flops(n: int) -> float:
    """1D complex FFT flops: 5 N log2 N."""
    return 5.0 * n * math.log2(n)


def model_flops_per_token(parameters: int, *, layers: int, heads: int, head_width: int,
                          sequence_length: int) -> float:
    """Training FLOPs per token of a decoder transformer by the PaLM paper's appendix B
    (Chowdhery et al. 2022): 6 N + 12 L H Q T, with N the parameters without the position
    embeddings (the token embedding stays: tied, it is also the output projection's matrix
    product), L layers, H heads of width Q and T the sequence length. The attention term
    counts the full T x T products (a causal kernel skips about half: model FLOPs, not
    hardware FLOPs)."""
    return 6.0 * parameters + 12.0 * layers * heads * head_width * sequence_length


def gflops(flops: float, seconds: float) -> float:
    """GFLOP/s = flops / seconds / 1e9."""
    return flops / seconds / 1e9


def fraction_of_peak(achieved: float, peak: float) -> float:
    """Achieved flop rate / measured peak of the same machine (same units)."""
    return achieved / peak


def spread(values: Sequence[float]) -> float:
    """Error as the studies report it: max - min."""
    return max(values) - min(values)


def spread_flag(values: Sequence[float], limit: float = SPREAD_LIMIT) -> bool:
    """True when (max - min) exceeds ``limit`` times the mean."""
    mean = sum(values) / len(values)
    return mean > 0 and spread(values) > limit * mean


def short_window(seconds: float | None) -> bool | None:
    """True when a measured window lasted less than :data:`MIN_WINDOW_S` seconds; None
    when its length is unknown."""
    if seconds is None or math.isnan(seconds):
        return None
    return seconds < MIN_WINDOW_S


MIN_REPETITIONS_TO_COMPARE = 2  # ok runs per side a ratio's interval needs (a sample variance)


def ratio_interval(base: Sequence[float], new: Sequence[float],
                   confidence: float = 0.95) -> tuple[float, float, float, float]:
    """The change from ``base`` to ``new`` runs of one configuration as a ratio new / base
    with its confidence interval: Welch's t interval on log throughput.

        d   = mean(ln new) - mean(ln base)
        se  = sqrt(s_new^2 / n_new + s_base^2 / n_base)       (s: sample std of ln values)
        dof = se^4 / ((s_new^2 / n_new)^2 / (n_new - 1) + (s_base^2 / n_base)^2 / (n_base - 1))
        ratio = exp(d),   interval = exp(d -/+ t(1 - (1 - confidence) / 2, dof) x se)

    exp(d) is the ratio of the geometric means. Returns (ratio, low, high, dof); needs
    ``MIN_REPETITIONS_TO_COMPARE`` positive values per side (ValueError otherwise). Two
    sides without any spread give the interval [ratio, ratio] (dof n_new + n_base - 2)."""
    from scipy import stats  # here: planning a campaign imports metrics, not scipy
    if min(len(base), len(new)) < MIN_REPETITIONS_TO_COMPARE:
        raise ValueError(f"a ratio's interval needs {MIN_REPETITIONS_TO_COMPARE} values per side")
    if min(*base, *new) <= 0:
        raise ValueError("throughputs must be positive")
    logs = [[math.log(v) for v in side] for side in (base, new)]
    means = [math.fsum(side) / len(side) for side in logs]
    variances = [math.fsum((v - m) ** 2 for v in side) / (len(side) - 1) / len(side)
                 for side, m in zip(logs, means)]
    d, var = means[1] - means[0], math.fsum(variances)
    if var == 0:
        return math.exp(d), math.exp(d), math.exp(d), float(len(base) + len(new) - 2)
    dof = var**2 / sum(v**2 / (len(side) - 1) for v, side in zip(variances, logs))
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, dof)) * math.sqrt(var)
    return math.exp(d), math.exp(d - half), math.exp(d + half), dof
