"""One training step as both the benchmark and the vendor-probe child build it: TensorFlow
configured for the run (vendor library, thread pools, seed), a synthetic batch, and the
compiled SGD step a backend combines across workers."""

from __future__ import annotations

import os
from typing import Callable

from archbench.workloads import gpu
from archbench.workloads.tfenv import use_framework_env
from archbench.workloads.training import strategies
from archbench.workloads.training.models import input_shape
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.tensorflow.models import keras


def configure_tensorflow(config: TrainRun):
    """Set the vendor-library flag and thread pools, then import and return TensorFlow.

    Thread pools can be set once per process; a second call with other values raises.
    Mixed precision stays off: nothing sets a Keras dtype policy, every run trains in
    float32 (as the studies did).
    """
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if config.onednn == "on" else "0"
    gpu.bind_gpu(strategies.process_device(config))
    use_framework_env()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf
    threading = tf.config.threading
    for getter, setter, value in (
            (threading.get_intra_op_parallelism_threads, threading.set_intra_op_parallelism_threads,
             config.intra_threads),
            (threading.get_inter_op_parallelism_threads, threading.set_inter_op_parallelism_threads,
             config.inter_threads)):
        if getter() != value:
            setter(value)
    tf.keras.utils.set_random_seed(config.seed)
    return tf


def synthetic_batch(tf, config: TrainRun, seed_offset: int = 0):
    """A fixed batch of random images and labels, already in memory."""
    shape = (config.batch_per_process, *input_shape(config.model, config.image_size, config.data_format))
    images = tf.random.stateless_uniform(shape, seed=(config.seed, seed_offset), dtype=tf.float32)
    labels = tf.random.stateless_uniform((config.batch_per_process,), seed=(config.seed + 1, seed_offset),
                                         maxval=config.num_classes, dtype=tf.int32)
    return images, labels


def make_train_step(backend: strategies.Backend, model, learning_rate: float) -> Callable:
    """A compiled SGD training step(images, labels) returning the mean loss; ``backend``
    combines gradients across workers. Create it inside ``backend.scope()``."""
    optimizer = keras().optimizers.SGD(learning_rate=learning_rate)
    loss_fn = keras().losses.SparseCategoricalCrossentropy(from_logits=True)
    return backend.make_step(model, optimizer, loss_fn)
