"""What every framework's training loop makes of a run: the record fields that describe
its configuration, the record of a finished window, the failure record, and the
training-sanity checks (loss trend, finite values). One module, so the records of one configuration in
any two frameworks say the same things in the same way."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Callable, Sequence

from archbench.core import metrics, provenance
from archbench.core.fields import config_id
from archbench.core.record import make_record
from archbench.workloads.training import frameworks, settings, strategies
from archbench.workloads.training.models import spec
from archbench.workloads.training.settings import TrainRun

# The unit of every training record's throughput: images of all workers per second.
THROUGHPUT_UNIT = "img/s"  # a language model's: tokens/s (ModelSpec.unit)
_HELD: list = []  # a finished run's framework objects, until its record is written


def hold_until_recorded(*objects) -> None:
    """Keep a finished run's framework ``objects`` alive until its record is written
    (:func:`release_held`): destroying a framework's dataset iterator after a window waited
    0.5-2 s without using a CPU, which a one-process run that ends without the framework's
    teardown then never spends."""
    _HELD.extend(objects)


def release_held() -> None:
    """Let go of what :func:`hold_until_recorded` kept."""
    _HELD.clear()


def loss_decreased(losses: Sequence[float]) -> bool | None:
    """Training sanity: the mean loss of the last third of the measured steps is below
    that of the first third (last < first for two steps; None for fewer, or non-finite)."""
    if len(losses) < 2:
        return None
    if not all(math.isfinite(x) for x in losses):
        return False
    third = max(1, len(losses) // 3)
    first, last = losses[:third], losses[-third:]
    return bool(sum(last) / len(last) < sum(first) / len(first))


def finite(x: float | None) -> float | None:
    """``x``, or None when it is missing or not finite (JSON has no NaN)."""
    return x if x is not None and math.isfinite(x) else None


def save_weights(directory: str, name: str, weights: Sequence) -> Path:
    """Save ``weights`` (numpy arrays) as <directory>/<name>.npz."""
    import numpy as np
    path = Path(directory) / f"{name}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, *weights)
    return path


def after_window(config: TrainRun, backend, model) -> tuple[list[str], float | None,
                                                             tuple[int, int], list[str], dict]:
    """What every rank reads once its window has ended, in the same order in both
    frameworks (some are collectives): the devices its tensors lived on (the framework's
    word, not the configuration's), the replicas' weight spread, (nodes, processes per
    node), the hosts and the backend's extra metrics, with the largest rank's peak memory
    (``peak_memory_per_rank``: :meth:`~archbench.workloads.training.strategies.base.Backend.peak_memory`).
    Saves the final weights when asked."""
    devices = backend.step_devices(model)
    spread = backend.weight_spread(model)
    if config.weights_out:
        save_weights(config.weights_out, f"rank{backend.rank}", backend.weights(model))
    layout = backend.layout()
    hosts = backend.hosts()
    extra = backend.metrics(model)
    peak = backend.peak_memory()
    if peak is not None:
        extra["peak_memory_per_rank"] = {"value": int(max(row[0] for row in backend.gather([peak]))),
                                         "unit": "B"}
    return devices, spread, layout, hosts, extra


def base_fields(config: TrainRun, *, framework_version: str = "", nodes: int | None = None,
                processes_per_node: int | None = None, workers: int | None = None) -> dict:
    """Record fields that describe the configuration and where it ran: the recorded
    settings (the framework among them), the layout the run found (the planned one, where
    it did not report its own), its strategy's settings, and stand-ins for the identity
    only the workflow knows (experiment adhoc, system local, an id of these fields,
    repetition 0), which the supervisor of a planned run replaces."""
    nodes = nodes or config.nodes or 1
    ppn = processes_per_node or config.processes_per_node or 1
    workers = workers or nodes * ppn
    conf = dict(kind="train", **settings.record_fields(config), nodes=nodes,
                processes_per_node=ppn, workers=workers,
                global_batch=metrics.global_batch(config.batch_per_process, workers))
    if config.device == "gpu":  # one process per GPU
        conf.update(gpus_per_node=ppn, gpus=workers)
    chosen = strategies.strategy(config.strategy)
    if chosen.parameter_servers:
        conf["parameter_servers"] = config.parameter_servers
    if chosen.variable_updates:
        conf["variable_update"] = config.variable_update or chosen.variable_updates[0]
    return {**provenance.host_fields(config.device), **conf, "experiment": "adhoc", "system": "local",
            "config_id": config_id(conf), "repetition": 0, "framework_version": framework_version}


def failure_record(config: TrainRun, *, status: str, reason: str, start: str,
                   devices: Sequence[str] = ()) -> dict:
    """A record for a run that did not finish: status oom|failed with the reason (and the
    devices the step was placed on, when it got that far)."""
    version = frameworks.framework(config.framework).installed_version()
    return make_record(**base_fields(config, framework_version=version), start_time=start,
                       end_time=provenance.now(), status=status, reason=reason[:500],
                       devices=list(devices))


# What a model's throughput counts (ModelSpec.input): the record's metric of the window's
# count with its unit, and the metric of the training FLOPs of one of them.
COUNTED = {"images": ("images", "img", "flops_per_image"),
           "tokens": ("tokens", "tokens", "flops_per_token")}


def window_metrics(config: TrainRun, *, flops_per_sample: float, wall: float, samples: int,
                   spread: float | None, extra: dict, compile_seconds: float | None = None) -> dict:
    """The record metrics of a measured window: FLOPs per image (or per token of a language
    model: :data:`COUNTED`), the window's wall time and images (tokens), the replicas'
    weight spread, the settings kept as metrics, the strategy's own (``extra``) and, for a
    compiled step, the seconds of its first step, which compiled it (``compile_s``). A
    time-to-accuracy run (``--target-accuracy``) has a clock, not a window of ``--steps``
    steps: its metrics are :func:`to_accuracy`'s, in ``extra``, without window_s and images."""
    count, unit, flops = COUNTED[spec(config.model).input]
    window = {} if config.target_accuracy is not None else {
        "window_s": {"value": wall, "unit": "s"},
        count: {"value": samples, "unit": unit},
    }
    out = {
        flops: {"value": flops_per_sample, "unit": "FLOP"},
        **window,
        **extra,
    }
    if spread is not None:
        out["replica_weight_spread"] = {"value": spread, "unit": ""}
    if config.cores:
        out["cores"] = {"value": config.cores, "unit": "cores"}
    if config.data_format != "NHWC":
        out["data_format"] = {"value": config.data_format, "unit": ""}
    if config.loader_workers is not None:
        out["loader_workers"] = {"value": config.loader_workers, "unit": "processes"}
    if compile_seconds is not None:  # the first step of a compiled run: not warm-up, not window
        out["compile_s"] = {"value": compile_seconds, "unit": "s"}
    return out


def measured_record(fields: dict, *, start: str, times: Sequence[float], losses: Sequence[float],
                    wall: float, samples: int, record_metrics: dict) -> dict:
    """The record of a finished window (status ok, or failed when the loss is not
    finite): throughput = images (tokens) of all workers in the window / its wall time,
    in the model's unit (img/s, tokens/s)."""
    reason = "" if all(math.isfinite(x) for x in losses) else "loss is not finite"
    return make_record(
        **fields, start_time=start, end_time=provenance.now(), step_times_s=list(times),
        loss_first=finite(losses[0]), loss_last=finite(losses[-1]),
        losses=[finite(x) for x in losses],
        loss_decreased=loss_decreased(losses), reason=reason,
        throughput=metrics.window_throughput(samples, wall), throughput_unit=spec(fields["model"]).unit,
        metrics=record_metrics)


def probes(config: TrainRun) -> bool:
    """Whether ``config``'s record gets vendor evidence: a CPU run with the probe on."""
    return config.vendor_probe == "on" and config.device == "cpu"


def early_probe(config: TrainRun):
    """The vendor probe child of a run whose writing process will probe (a CPU run with the
    probe on that names no other run's evidence to state), started now, before this process
    imports its framework (:class:`~archbench.workloads.training.vendor_evidence.probing.ProbeChild`);
    None for any other run or process."""
    if (not probes(config) or config.vendor_evidence_from
            or strategies.launch_rank(config.strategy) != 0):
        return None
    from archbench.workloads.training.vendor_evidence import probing
    return probing.ProbeChild(config)


def add_vendor_evidence(fields: dict, config: TrainRun, *,
                        probe_here: Callable[[], dict] | None = None) -> None:
    """After the window (its timing untouched), for a CPU run with the probe on: which
    implementations ran (``vendor_evidence``), any mismatch with the declared library, and
    the library that ran as ``vendor_library``. The evidence comes from ``probe_here``
    where the framework probes a step of this process
    (:func:`~archbench.workloads.training.vendor_evidence.probing.probe_in_process`), else from the
    record ``--vendor-evidence-from`` names when it holds for this run (naming that record
    as ``source``), else from one probe step in a child process. The run's own evidence
    states the probe's ``settings``."""
    if not probes(config):
        return
    from archbench.workloads.training.vendor_evidence import library, probing, reuse
    settings = probing.probe_settings(config)
    evidence = probe_here() if probe_here is not None else None
    if evidence is None and config.vendor_evidence_from:
        evidence = reuse.shared_evidence(config.vendor_evidence_from, fields,
                                         config.data_format, settings=settings,
                                         output=config.output)
    if evidence is None:
        evidence = probing.probe(config)
    if not evidence.get("source"):
        evidence = {**evidence, "settings": settings}
    fields["vendor_evidence"] = evidence
    declared, enabled = fields["vendor_library"], fields["vendor_library_enabled"]
    fields["vendor_mismatch"] = library.mismatch(declared, enabled, evidence)
    origin = f" (the probe of {evidence['source']})" if evidence.get("source") else ""
    print(f"vendor evidence: {evidence['library']}{origin} {evidence['error']}".rstrip()
          + (f"; MISMATCH: {fields['vendor_mismatch']}" if fields["vendor_mismatch"] else ""),
          file=sys.stderr)
    fields["vendor_library"] = library.recorded_library(declared, enabled, evidence)


def check_quality(config: TrainRun, dataset: str) -> None:
    """ValueError unless a run with ``--target-accuracy`` can be timed to it: real data of
    a model whose dataset has a held-out split (the digits, ``dataset``), one process, a
    target in (0, 1]."""
    if not 0 < config.target_accuracy <= 1:
        raise ValueError("--target-accuracy must be in (0, 1]")
    if config.data != "real" or dataset != "digits":
        raise ValueError("--target-accuracy needs --data real and a digits model "
                         "(digits_cnn: its held-out split is the validation set)")
    if config.strategy != "single":
        raise ValueError("--target-accuracy runs one process (--strategy single)")


def to_accuracy(step: Callable, batches, evaluate: Callable[[], float], *, config: TrainRun,
                batch_size: int, settle: Callable[[], object] = lambda: None,
                compiles: bool = False) -> tuple[list[float], float, int, float | None, dict]:
    """Time to accuracy, as MLPerf Training times a run: train with ``step`` on
    ``batches`` from the first step, evaluating ``evaluate()`` (the validation accuracy)
    every ``config.eval_every`` steps and after the last, until it reaches
    ``config.target_accuracy`` or ``config.steps`` steps have run. The clock runs from the
    first step to the evaluation that reached the target (or the last one), evaluations
    included; off it: ``settle()`` (work beside the run) and, for a compiled step
    (``compiles``), its first step, which compiles it: that step trains (it is step 1)
    but its seconds are returned apart (compile_s), as MLPerf keeps model initialisation
    off the clock.

    The record of such a run states no step times and no window (``measured_steps`` is
    the cap it was planned with; the steps it ran are ``quality_steps``): its throughput
    is the images of the timed steps over the clock, evaluations included.

    Returns (losses, seconds on the clock, images of the timed steps, compile seconds or
    None, the record metrics: target_accuracy, accuracy_reached (1 or 0), steps_to_accuracy
    and time_to_accuracy_s where reached, quality_steps and quality_s (run and clock, reached
    or not), evaluations ("step:accuracy" of each)).
    """
    import time
    settle()
    compile_s = None
    times: list[float] = []
    losses: list[float] = []
    evaluations: list[tuple[int, float]] = []
    reached = False
    clock = 0.0
    for n in range(1, config.steps + 1):
        t0 = time.perf_counter()
        losses.append(float(step(*next(batches))))
        took = time.perf_counter() - t0
        if n == 1 and compiles:
            compile_s = took
        else:
            times.append(took)
            clock += took
        if n % config.eval_every == 0 or n == config.steps:
            t0 = time.perf_counter()
            score = float(evaluate())
            clock += time.perf_counter() - t0
            evaluations.append((n, score))
            if score >= config.target_accuracy:
                reached = True
                break
    steps = len(losses)
    metrics_out = {
        "target_accuracy": {"value": config.target_accuracy, "unit": "fraction"},
        "accuracy_reached": {"value": int(reached), "unit": "1 = yes, 0 = no"},
        "quality_steps": {"value": steps, "unit": "steps"},
        "quality_s": {"value": clock, "unit": "s"},
        "evaluations": {"value": " ".join(f"{n}:{a:.4f}" for n, a in evaluations),
                        "unit": "step:fraction"},
    }
    if reached:
        metrics_out["steps_to_accuracy"] = {"value": steps, "unit": "steps"}
        metrics_out["time_to_accuracy_s"] = {"value": clock, "unit": "s"}
    return losses, clock, len(times) * batch_size, compile_s, metrics_out
