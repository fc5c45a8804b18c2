"""Training benchmark, like tf_cnn_benchmarks for TF2: one compiled training step timed
over a measured window after warm-up, written as one JSON record.

    python -m archbench.train --model resnet50 --batch-size 64 --intra-threads 24 \
        --inter-threads 1 --onednn on --data synthetic --warmup-steps 10 --steps 100 \
        --image-size 224 --output run.json

Multi-process runs start one such process per worker (``--strategy horovod`` under
mpirun/srun/horovodrun; ``mirrored`` and ``parameter_server`` -- its ``--variable-update``
parameter_server, distributed_replicated or ps_async -- under srun or
``python -m archbench.workloads.spawn spawn``); the first worker writes ONE record for the
whole job. ``command_for`` gives the full launcher argv of a measurement.

Throughput follows docs/metrics.md: images processed by ALL workers in the measured window
divided by the window's wall time (warm-up excluded; the window is bounded by barriers
and its length is the longest of the workers').
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from pathlib import Path
from typing import Callable, Sequence

from archbench.core import metrics, provenance, storage
from archbench.core.failures import exception_failure
from archbench.core.record import config_id, make_record, write_record
from archbench.workloads import gpu
from archbench.workloads.tfcluster import local_rank
from archbench.workloads.training import settings, strategies, vendor_evidence
from archbench.workloads.training.data import accuracy, digits_arrays, real_dataset
from archbench.workloads.training.models import (
    build_model,
    check_data_format,
    spec,
    training_flops,
)
from archbench.workloads.training.pinning import pin_cores
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.step import configure_tensorflow, make_train_step, synthetic_batch
from archbench.workloads.training.strategies.horovod import horovod_knobs

EXIT_BENCHMARK_FAILED = 3  # a failure record was written


class DevicePlacementError(RuntimeError):
    """A GPU run whose measured step TensorFlow placed elsewhere (never recorded as ok)."""

    def __init__(self, reason: str, devices: list[str]):
        super().__init__(reason)
        self.devices = devices


def parser() -> argparse.ArgumentParser:
    """The command line: one option per training setting (:mod:`archbench.workloads.training.settings`),
    the strategies registry naming the strategies and their variable updates."""
    p = argparse.ArgumentParser(prog="python -m archbench.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    updates = ", ".join(strategies.strategy("parameter_server").variable_updates)
    settings.add_arguments(p, registered={
        "strategy": dict(choices=list(strategies.STRATEGIES),
                         help="; ".join(f"{name}: {s.help}" for name, s in strategies.STRATEGIES.items())),
        "variable_update": dict(help=f"how strategy parameter_server updates variables: {updates} "
                                     "(default: the first)")})
    return p


def parse_args(argv: Sequence[str] | None = None) -> TrainRun:
    """The training run the command line asks for (model defaults filled in); a bad option
    ends the program with one argparse error line."""
    p = parser()
    try:
        config = TrainRun.from_args(p.parse_args(argv))
        strategies.check(config)
    except ValueError as exc:
        p.error(str(exc))
    return config


def batches_of(tf, config: TrainRun, backend: strategies.Backend):
    """This worker's batches: on a GPU, synthetic data made once on the device (the host
    feeds nothing, :meth:`~archbench.workloads.training.strategies.Backend.device_batches`) where the strategy
    allows; otherwise the tf.data pipeline of :func:`dataset_fn`."""
    if config.device == "gpu" and config.data == "synthetic":
        made = backend.device_batches(lambda shard: synthetic_batch(tf, config, shard))
        if made is not None:
            return made
    return backend.batches(dataset_fn(tf, config))


def dataset_fn(tf, config: TrainRun) -> Callable[[int, int], object]:
    """``fn(shard, shards)`` -> tf.data.Dataset of this worker's (images, labels) batches."""
    def make(shard: int, shards: int):
        if config.data == "real":
            return real_dataset(config, shard_index=shard, num_shards=shards)
        return tf.data.Dataset.from_tensors(synthetic_batch(tf, config, shard)).repeat()
    return make


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


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def save_weights(directory: str, name: str, weights: Sequence) -> Path:
    """Save ``weights`` (numpy arrays) as <directory>/<name>.npz."""
    import numpy as np
    path = Path(directory) / f"{name}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, *weights)
    return path


def run(config: TrainRun) -> dict | None:
    """Train ``config.model``; return the complete record (status ok) on the writing worker
    and None on every other worker."""
    start = provenance.now()
    if config.cores:
        pin_cores(config.cores, local_rank())
    tf = configure_tensorflow(config)
    if strategies.process_device(config) == "gpu":
        gpu.require_gpu(tf)  # fails with gpu.NO_GPU: a CPU never stands in for a GPU
    check_data_format(tf, config.data_format)
    backend = strategies.make_backend(tf, config)
    with backend.scope():
        model = build_model(config.model, config.image_size, config.num_classes,
                            data_format=config.data_format)
        step = make_train_step(backend, model, config.learning_rate)
    batches = batches_of(tf, config, backend)
    backend.start(model)
    if config.weights_out:  # the weights every worker starts from
        save_weights(config.weights_out, f"init-rank{backend.rank}", backend.weights(model))
    times, losses, wall, images = backend.window(step, batches, warmup=config.warmup_steps,
                                                 steps=config.steps, batch_size=config.batch_size)
    devices = backend.step_devices(model)  # TensorFlow's, not the configuration's
    spread = backend.weight_spread(model)
    if config.weights_out:
        save_weights(config.weights_out, f"rank{backend.rank}", backend.weights(model))
    nodes, ppn = backend.layout()
    hosts = backend.hosts()
    extra = backend.metrics(model)
    if config.data == "real" and spec(config.model).dataset == "digits" and backend.is_writer:
        _, _, x_test, y_test = digits_arrays(config.image_size, config.data_format)
        extra["accuracy"] = {"value": accuracy(backend.predictor(model), x_test, y_test), "unit": "fraction"}
    if not backend.is_writer:
        return None
    mismatch = gpu.device_mismatch(config.device, devices) if config.device == "gpu" else ""
    if mismatch:
        raise DevicePlacementError(mismatch, devices)
    record_metrics = {
        "flops_per_image": {"value": training_flops(model), "unit": "FLOP"},
        "window_s": {"value": wall, "unit": "s"},
        "images": {"value": images, "unit": "img"},
        **extra,
    }
    if spread is not None:
        record_metrics["replica_weight_spread"] = {"value": spread, "unit": ""}
    if config.cores:
        record_metrics["cores"] = {"value": config.cores, "unit": "cores"}
    if config.data_format != "NHWC":
        record_metrics["data_format"] = {"value": config.data_format, "unit": ""}
    fields = base_fields(config, tf_version=tf.__version__, nodes=nodes, processes_per_node=ppn,
                         workers=backend.workers)
    fields["hosts"] = hosts
    fields["devices"] = devices
    # after the window (its timing is untouched); oneDNN's evidence is about CPU runs
    if config.vendor_probe == "on" and config.device == "cpu":
        evidence = vendor_evidence.probe(config)
        fields["vendor_evidence"] = evidence
        declared, enabled = fields["vendor_library"], fields["vendor_library_enabled"]
        fields["vendor_mismatch"] = vendor_evidence.mismatch(declared, enabled, evidence)
        print(f"vendor evidence: {evidence['library']} {evidence['error']}".rstrip()
              + (f"; MISMATCH: {fields['vendor_mismatch']}" if fields["vendor_mismatch"] else ""),
              file=sys.stderr)
        # what ran, not only what was declared
        fields["vendor_library"] = vendor_evidence.recorded_library(declared, enabled, evidence)
    reason = "" if all(math.isfinite(x) for x in losses) else "loss is not finite"
    return make_record(
        **fields, start_time=start, end_time=provenance.now(), step_times_s=times,
        loss_first=_finite(losses[0]), loss_last=_finite(losses[-1]),
        loss_decreased=loss_decreased(losses), reason=reason,
        throughput=metrics.window_throughput(images, wall), throughput_unit="img/s",
        metrics=record_metrics)


def base_fields(config: TrainRun, *, tf_version: str = "", nodes: int | None = None,
                processes_per_node: int | None = None, workers: int | None = None) -> dict:
    """Record fields that describe the configuration and where it ran: the recorded
    settings, the layout the run found (the planned one, where it did not report its own),
    its strategy's settings, and stand-ins for the identity only the workflow knows
    (experiment adhoc, system local, an id of these fields, repetition 0), which the
    supervisor of a planned run replaces."""
    nodes = nodes or config.nodes or 1
    ppn = processes_per_node or config.processes_per_node or 1
    workers = workers or nodes * ppn
    conf = dict(kind="train", **settings.record_fields(config), nodes=nodes,
                processes_per_node=ppn, workers=workers,
                global_batch=metrics.global_batch(config.batch_size, workers))
    if config.device == "gpu":  # one process per GPU
        conf.update(gpus_per_node=ppn, gpus=workers)
    chosen = strategies.strategy(config.strategy)
    if chosen.parameter_servers:
        conf["parameter_servers"] = config.parameter_servers
    if chosen.variable_updates:
        conf["variable_update"] = config.variable_update or chosen.variable_updates[0]
    return {**provenance.host_fields(), **conf, "experiment": "adhoc", "system": "local",
            "config_id": config_id(conf), "repetition": 0, "framework": "tensorflow",
            "framework_version": tf_version}


def failure_record(config: TrainRun, *, status: str, reason: str, start: str,
                   devices: Sequence[str] = ()) -> dict:
    """A record for a run that did not finish: status oom|failed with the reason (and the
    devices the step was placed on, when it got that far)."""
    return make_record(**base_fields(config), start_time=start, end_time=provenance.now(),
                       status=status, reason=reason[:500], devices=list(devices))


def worker_argv(measurement: dict, system: dict) -> list[str]:
    """argv of one worker process of ``measurement`` (interpreter first, no launcher): its
    planned settings, and the system's data directory for real data."""
    argv = [sys.executable, "-m", "archbench.train", *settings.planned_argv(measurement)]
    if measurement["data"] == "real" and system.get("data_dir"):
        argv += ["--data-dir", system["data_dir"]]
    return argv


def setting_metrics(measurement: dict) -> dict:
    """The settings a run of ``measurement`` is given that its record keeps as metrics (a
    failure record too, so a setting that only failed is still named in its table)."""
    tuning = measurement.get("tuning") or {}
    return horovod_knobs(tuning.get("horovod_cycle_time_ms"), tuning.get("horovod_fusion_threshold_bytes"))


def command_for(measurement: dict, system: dict) -> list[str]:
    """Full argv that runs ``measurement`` on ``system``, launcher included (mpirun, srun,
    horovodrun or the local TF-cluster spawner for multi-process strategies); the
    supervisor appends ``--output PATH``."""
    if measurement.get("best_of"):
        raise ValueError(f"measurement {measurement.get('config_id')} is a placeholder for the "
                         f"best configuration of '{measurement['best_of']}'; resolve it first "
                         "(archbench.results.tables.best.resolve_best)")
    return strategies.launcher_argv(measurement, system, worker_argv(measurement, system))


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run, write the record; on OOM or error the writing worker writes a
    failure record (other workers only report the error and exit non-zero). A record the
    file system refuses raises storage.Unwritable."""
    config = parse_args(argv)
    start = provenance.now()
    writer = strategies.launch_rank(config.strategy) == 0
    try:
        record = run(config)
    except Exception as exc:  # noqa: BLE001 - any framework error becomes a failure record
        status, summary = exception_failure(exc)  # MemoryError, ResourceExhaustedError: oom
        if not isinstance(exc, (MemoryError, gpu.NoGPUError, DevicePlacementError)):
            traceback.print_exc(file=sys.stderr)
        if writer:
            write_record(config.output, failure_record(config, status=status, reason=summary,
                                                       start=start,
                                                       devices=getattr(exc, "devices", ())))
        print(f"archbench.train: {status}: {summary}", file=sys.stderr)
        return EXIT_BENCHMARK_FAILED
    if record is None:
        return 0
    write_record(config.output, record)
    trend = {True: "decreasing", False: "NOT decreasing", None: "n/a"}[record["loss_decreased"]]
    print(f"{record['model']}: {record['throughput']:.2f} img/s, {record['strategy']} x "
          f"{record['workers']} (loss {record['loss_first']} -> {record['loss_last']}, {trend})")
    return 0


if __name__ == "__main__":
    sys.exit(storage.exit_status(main))  # a record the disk refuses: one line, exit 73
