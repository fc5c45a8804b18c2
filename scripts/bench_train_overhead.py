"""Overhead of the training harness: archbench.train's img/s against a bare tf.function
training loop on the same model, batch and threads, measured side by side in one process
(alternating, several repetitions). Target: ratio >= 0.97.

    python scripts/bench_train_overhead.py --model alexnet --batch-per-process 16 --image-size 224 \
        --threads 2 --steps 10 --repetitions 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from archbench.workloads.tfenv import use_framework_env

use_framework_env()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def bare_loop(tf, args) -> float:
    """img/s of the plainest loop: fixed batch, tf.function step, no per-step host reads."""
    from archbench.workloads.training.tensorflow.models import build_model, keras
    model = build_model(args.model, args.image_size, args.num_classes)
    optimizer = keras().optimizers.SGD(learning_rate=0.01)
    loss_fn = keras().losses.SparseCategoricalCrossentropy(from_logits=True)
    shape = (args.batch_per_process, *model.input_shape[1:])
    images = tf.random.uniform(shape)
    labels = tf.random.uniform((args.batch_per_process,), maxval=args.num_classes, dtype=tf.int32)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss
    for _ in range(args.warmup):
        step(images, labels)
    float(step(images, labels))
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step(images, labels)
    float(loss)
    return args.batch_per_process * args.steps / (time.perf_counter() - start)


def harness(args, output: str) -> float:
    """img/s that archbench.train records for the same configuration."""
    from archbench.workloads.training import benchmark as train
    targs = train.parse_args([
        "--model", args.model, "--batch-per-process", str(args.batch_per_process),
        "--image-size", str(args.image_size), "--num-classes", str(args.num_classes),
        "--intra-threads", str(args.threads), "--inter-threads", "1",
        "--warmup-steps", str(args.warmup + 1), "--steps", str(args.steps), "--output", output])
    return train.run(targs)["throughput"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet")
    p.add_argument("--batch-per-process", type=int, default=16)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repetitions", type=int, default=5)
    args = p.parse_args(argv)
    import tensorflow as tf

    from archbench.workloads.training.tensorflow.models import keras
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repetitions):
            order = ("bare", "harness") if rep % 2 == 0 else ("harness", "bare")
            rates = {}
            for which in order:
                keras().backend.clear_session()
                rates[which] = (bare_loop(tf, args) if which == "bare"
                                else harness(args, os.path.join(tmp, "r.json")))
            ratios.append(rates["harness"] / rates["bare"])
            print(f"rep {rep}: bare {rates['bare']:.2f} img/s, archbench.train "
                  f"{rates['harness']:.2f} img/s, ratio {ratios[-1]:.3f}", flush=True)
    median = statistics.median(ratios)
    print(f"{args.model} b{args.batch_per_process} {args.image_size}px t{args.threads}: median ratio "
          f"{median:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, n {len(ratios)}); "
          f"target >= 0.97: {'PASS' if median >= 0.97 else 'FAIL'}")
    return 0 if median >= 0.97 else 1


if __name__ == "__main__":
    sys.exit(main())
