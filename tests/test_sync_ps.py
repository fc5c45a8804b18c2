"""Synchrony proven: k steps of the synchronous parameter-server updates on 2 workers + 1
parameter server (real processes, TF's distributed runtime) end with the weights of k
plain SGD steps of one process on the two workers' batches concatenated; TF2's
asynchronous ParameterServerStrategy (``ps_async``) ends elsewhere.

small_cnn has no randomness in training (no dropout, no batch norm); each worker's
synthetic batch is fixed (seeded by its shard), so the reference knows every batch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from archbench.core.record import read_record
from archbench.workloads.tfenv import FRAMEWORK_ENV
from archbench.workloads.training import benchmark as train
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.tensorflow.step import synthetic_batch

SYSTEM = {"launcher": "local", "sockets": 1, "cores_per_socket": 2, "nodes": 1}
WARMUP, STEPS, BATCH, LEARNING_RATE = 1, 3, 4, 0.1
TINY = {
    "kind": "train", "model": "small_cnn", "batch_per_process": BATCH, "intra_threads": 1,
    "inter_threads": 1, "vendor_library_enabled": True, "data": "synthetic",
    "warmup_steps": WARMUP, "measured_steps": STEPS, "image_size": 32, "num_classes": 10,
    "data_format": "NHWC", "nodes": 1, "processes_per_node": 2, "env": {}, "tuning": {},
    "strategy": "parameter_server", "parameter_servers": 1,
}
ATOL, RTOL = 1e-5, 1e-4


def run_two_workers(variable_update: str, tmp_path: Path) -> tuple[dict, list, list]:
    """Run TINY with ``variable_update`` as the supervisor would; return the record, worker
    0's initial and final weights."""
    out = tmp_path / "rec.json"
    m = {**TINY, "variable_update": variable_update}
    argv = train.command_for(m, SYSTEM) + [
        "--output", str(out), "--weights-out", str(tmp_path / "w"), "--vendor-probe", "off",
        "--learning-rate", str(LEARNING_RATE)]
    env = {**os.environ, **FRAMEWORK_ENV, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    load = lambda name: [a for _, a in sorted(np.load(tmp_path / "w" / name).items(),
                                              key=lambda kv: int(kv[0].split("_")[1]))]
    return read_record(out), load("init-rank0.npz"), load("rank0.npz")


def one_process_reference(initial: list, steps: int) -> list:
    """``steps`` SGD steps of one eager process from ``initial`` on the concatenation of
    worker 0's and worker 1's batches (what synchronous training must equal)."""
    import tensorflow as tf

    from archbench.workloads.training.tensorflow.models import build_model
    config = TrainRun(model="small_cnn", batch_per_process=BATCH, output="-", image_size=32,
                      num_classes=10)
    parts = [synthetic_batch(tf, config, shard) for shard in (0, 1)]
    images = tf.concat([p[0] for p in parts], 0)
    labels = tf.concat([p[1] for p in parts], 0)
    model = build_model("small_cnn", 32, 10)
    model.set_weights(initial)
    optimizer = tf.keras.optimizers.SGD(learning_rate=LEARNING_RATE)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


def largest_difference(a: list, b: list) -> float:
    assert [x.shape for x in a] == [y.shape for y in b]
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.mark.parametrize("variable_update", ["parameter_server", "distributed_replicated"])
def test_synchronous_updates_equal_one_process_on_the_concatenated_batch(variable_update, tmp_path):
    record, initial, final = run_two_workers(variable_update, tmp_path)
    # the loss op ran on worker 0's CPU, as TensorFlow placed it in a traced forward pass
    assert (record["device"], record["devices"]) == ("cpu", ["task0/CPU:0"])
    assert record["status"] == "ok", record["reason"]
    assert record["variable_update"] == variable_update and record["workers"] == 2
    assert record["metrics"]["parameter_servers"]["value"] == 1
    # throughput: images of both workers in the window / the window's wall time
    assert record["metrics"]["images"]["value"] == 2 * BATCH * STEPS
    assert record["throughput"] == pytest.approx(2 * BATCH * STEPS
                                                 / record["metrics"]["window_s"]["value"])
    assert len(record["step_times_s"]) == STEPS
    reference = one_process_reference(initial, WARMUP + STEPS)
    # the test can tell: training moved the weights far beyond the tolerance, and one
    # step fewer is visibly elsewhere
    assert largest_difference(reference, initial) > 100 * ATOL
    assert largest_difference(one_process_reference(initial, WARMUP + STEPS - 1), final) > 10 * ATOL
    for got, want in zip(final, reference):
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=RTOL)
    if variable_update == "distributed_replicated":  # the replicas agree
        assert record["metrics"]["replica_weight_spread"]["value"] == 0.0
        other = [a for _, a in sorted(np.load(tmp_path / "w" / "rank1.npz").items(),
                                      key=lambda kv: int(kv[0].split("_")[1]))]
        assert largest_difference(other, final) == 0.0


def test_asynchronous_updates_differ_from_one_process(tmp_path):
    record, initial, final = run_two_workers("ps_async", tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert record["variable_update"] == "ps_async" and record["step_times_s"] == []
    reference = one_process_reference(initial, WARMUP + STEPS)
    # each worker applies its own gradients, one update per worker step: twice the updates
    assert largest_difference(final, reference) > 100 * ATOL
