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
    The numerics (:func:`set_numerics`): math mode bf16 is oneDNN's fpmath mode, which
    oneDNN reads once, so it is set in the environment before the import.
    """
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if config.onednn == "on" else "0"
    if config.math_mode == "bf16":
        os.environ["ONEDNN_DEFAULT_FPMATH_MODE"] = "BF16"
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
    set_numerics(tf, config)
    return tf


POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def set_numerics(tf, config: TrainRun) -> None:
    """The run's precision and fp32 math mode, before any model is built: the Keras dtype
    policy of its precision (mixed: variables fp32, compute bf16/fp16; fp32 sets none, as
    the studies ran), and TensorFloat-32 on only for math mode tf32 (TensorFlow's default
    is on: strict turns it off on a GPU; a CPU run leaves TensorFlow's flag as it was)."""
    if config.precision != "fp32":
        keras().mixed_precision.set_global_policy(POLICIES[config.precision])
    if config.device == "gpu":
        tf.config.experimental.enable_tensor_float_32_execution(config.math_mode == "tf32")


def synthetic_batch(tf, config: TrainRun, seed_offset: int = 0):
    """A fixed batch of random images and labels, already in memory."""
    shape = (config.batch_per_process, *input_shape(config.model, config.image_size, config.data_format))
    images = tf.random.stateless_uniform(shape, seed=(config.seed, seed_offset), dtype=tf.float32)
    labels = tf.random.stateless_uniform((config.batch_per_process,), seed=(config.seed + 1, seed_offset),
                                         maxval=config.num_classes, dtype=tf.int32)
    return images, labels


def make_train_step(backend: strategies.Backend, model, learning_rate: float) -> Callable:
    """A compiled SGD training step(images, labels) returning the mean loss; ``backend``
    combines gradients across workers. Create it inside ``backend.scope()``. Precision
    fp16 scales the loss (Keras' dynamic ``LossScaleOptimizer``)."""
    optimizer = keras().optimizers.SGD(learning_rate=learning_rate)
    if backend.config.precision == "fp16":
        optimizer = keras().mixed_precision.LossScaleOptimizer(optimizer)
    loss_fn = keras().losses.SparseCategoricalCrossentropy(from_logits=True)
    return backend.make_step(model, optimizer, loss_fn)
