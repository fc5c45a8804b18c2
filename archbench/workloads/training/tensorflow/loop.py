"""The TensorFlow training loop: one compiled training step timed over a measured window
after warm-up, like tf_cnn_benchmarks for TF2 (the framework ``tensorflow`` of
:mod:`archbench.workloads.training.frameworks`)."""

from __future__ import annotations

from typing import Callable

from archbench.core import provenance
from archbench.core.marks import mark
from archbench.workloads import gpu
from archbench.workloads.launch import local_rank
from archbench.workloads.training import outcome, strategies
from archbench.workloads.training.datasets import accuracy
from archbench.workloads.training.models import spec
from archbench.workloads.training.pinning import pin_cores
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.tensorflow.backends import make_backend
from archbench.workloads.training.tensorflow.data import digits_arrays, real_dataset
from archbench.workloads.training.tensorflow.models import build_model, check_data_format, training_flops
from archbench.workloads.training.tensorflow.step import (
    configure_tensorflow,
    make_train_step,
    synthetic_batch,
)


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


def probe_step(config: TrainRun):
    """The run's compiled step in one process and its synthetic batch (vendor probe)."""
    tf = configure_tensorflow(config)
    backend = make_backend(tf, config)
    with backend.scope():
        model = build_model(config.model, config.image_size, config.num_classes,
                            data_format=config.data_format)
        step = make_train_step(backend, model, config.learning_rate)
    return step, synthetic_batch(tf, config)


def run(config: TrainRun) -> dict | None:
    """Train ``config.model``; return the complete record (status ok) on the writing worker
    and None on every other worker."""
    start = provenance.now()
    if config.cores:
        pin_cores(config.cores, local_rank())
    probe = outcome.early_probe(config)  # its start-up overlaps this process's own
    try:
        return train(config, start=start, probe=probe)
    finally:
        if probe is not None:
            probe.stop()


def await_probe(probe) -> None:
    """Wait for the vendor probe child, if any: the rest of the warm-up and the window run
    alone."""
    if probe is not None:
        probe.evidence()
        mark("probe-awaited")


def train(config: TrainRun, *, start: str, probe) -> dict | None:
    """:func:`run` after pinning, with the vendor probe child ``probe`` (or None) running
    beside the framework's import, the model build and the first step, which traces it:
    it has finished before the rest of the warm-up and the window."""
    if config.target_accuracy is not None:
        outcome.check_quality(config, spec(config.model).dataset)
    tf = configure_tensorflow(config)
    mark("framework-imported")
    if strategies.process_device(config) == "gpu":
        gpu.require_gpu(tf)  # fails with gpu.NO_GPU: a CPU never stands in for a GPU
    check_data_format(tf, config.data_format)
    backend = make_backend(tf, config)
    with backend.scope():
        model = build_model(config.model, config.image_size, config.num_classes,
                            data_format=config.data_format)
        step = make_train_step(backend, model, config.learning_rate)
    batches = batches_of(tf, config, backend)
    backend.start(model)
    mark("model-built")
    if config.weights_out:  # the weights every worker starts from
        outcome.save_weights(config.weights_out, f"init-rank{backend.rank}", backend.weights(model))
    quality = {}
    if config.target_accuracy is None:
        times, losses, wall, images = backend.window(step, batches, warmup=config.warmup_steps,
                                                     steps=config.steps, batch_size=config.batch_per_process,
                                                     settle=lambda: await_probe(probe),
                                                     compiles=config.graph == "compiled")
    else:  # the quality gate: time to the validation accuracy
        _, _, x_test, y_test = digits_arrays(config.image_size, config.data_format)
        times = []  # a clock, not a window of steps (outcome.to_accuracy)
        losses, wall, images, backend.compile_seconds, quality = outcome.to_accuracy(
            step, batches, lambda: accuracy(backend.predictor(model), x_test, y_test), config=config,
            batch_size=config.batch_per_process, settle=lambda: await_probe(probe),
            compiles=config.graph == "compiled")
    outcome.hold_until_recorded(batches, step, model, backend)
    devices, spread, (nodes, ppn), hosts, extra = outcome.after_window(config, backend, model)
    extra.update(quality)
    if getattr(backend, "loss_scaler", None) is not None:  # fp16: the scale the window ended with
        extra["loss_scale"] = {"value": float(backend.loss_scaler.loss_scale), "unit": ""}
    if config.data == "real" and spec(config.model).dataset == "digits" and backend.is_writer:
        _, _, x_test, y_test = digits_arrays(config.image_size, config.data_format)
        extra["accuracy"] = {"value": accuracy(backend.predictor(model), x_test, y_test), "unit": "fraction"}
    if not backend.is_writer:
        return None
    mismatch = gpu.device_mismatch(config.device, devices) if config.device == "gpu" else ""
    if mismatch:
        raise gpu.DevicePlacementError(mismatch, devices)
    record_metrics = outcome.window_metrics(config, flops_per_sample=training_flops(model), wall=wall,
                                            samples=images, spread=spread, extra=extra,
                                            compile_seconds=backend.compile_seconds)
    fields = outcome.base_fields(config, framework_version=tf.__version__, nodes=nodes,
                                 processes_per_node=ppn, workers=backend.workers)
    fields["hosts"] = hosts
    fields["devices"] = devices
    fields["energy"] = backend.energy  # the window's (strategies/base.py Backend.window)
    mark("record-fields")
    outcome.add_vendor_evidence(fields, config, probe_here=probe.evidence if probe else None)
    mark("vendor-probe")
    return outcome.measured_record(fields, start=start, times=times, losses=losses, wall=wall,
                                   samples=images, record_metrics=record_metrics)
