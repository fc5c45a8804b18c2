"""Training benchmark, like tf_cnn_benchmarks for TF2: one compiled training step timed
over a measured window after warm-up, written as one JSON record.

    python -m archbench.train --model resnet50 --batch-size 64 --intra-threads 24 \
        --inter-threads 1 --onednn on --data synthetic --warmup-steps 10 --steps 100 \
        --image-size 224 --output run.json

Throughput follows DESIGN.md: images processed by ALL workers in the measured window
divided by the window's wall time (warm-up excluded).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Sequence

from archbench import provenance
from archbench.record import make_record, write_record

EXIT_BENCHMARK_FAILED = 3  # a failure record was written


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options of the training benchmark."""
    p = argparse.ArgumentParser(prog="python -m archbench.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="model name (archbench.models.MODELS)")
    p.add_argument("--batch-size", type=int, required=True, help="batch per process")
    p.add_argument("--intra-threads", type=int, default=0, help="intra-op threads (0 = TF default)")
    p.add_argument("--inter-threads", type=int, default=1, help="inter-op threads (0 = TF default)")
    p.add_argument("--onednn", choices=["on", "off"], default="on",
                   help="vendor library: sets TF_ENABLE_ONEDNN_OPTS before TensorFlow loads")
    p.add_argument("--data", choices=["synthetic", "real"], default="synthetic")
    p.add_argument("--data-dir", default=None, help="TFRecord directory for --data real")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=100, help="measured steps")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--learning-rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--output", required=True, help="where to write the JSON record")
    args = p.parse_args(argv)
    for name in ("batch_size", "steps", "image_size", "num_classes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("intra_threads", "inter_threads", "warmup_steps"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    return args


def configure_tensorflow(args: argparse.Namespace):
    """Set the vendor-library flag and thread pools, then import and return TensorFlow."""
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if args.onednn == "on" else "0"
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    tf.keras.utils.set_random_seed(args.seed)
    return tf


def synthetic_batch(tf, args: argparse.Namespace):
    """A fixed batch of random images and labels, already in memory."""
    images = tf.random.uniform((args.batch_size, args.image_size, args.image_size, 3),
                               dtype=tf.float32, seed=args.seed)
    labels = tf.random.uniform((args.batch_size,), maxval=args.num_classes, dtype=tf.int32,
                               seed=args.seed)
    return images, labels


def make_train_step(tf, model, learning_rate: float):
    """A compiled SGD training step returning the mean loss."""
    from archbench.models import keras
    optimizer = keras().optimizers.SGD(learning_rate=learning_rate)
    loss_fn = keras().losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss
    return train_step


def timed_steps(step, batches, warmup: int, steps: int) -> tuple[list[float], list[float], float]:
    """Run warm-up then measured steps; return (step times, losses, window wall time).

    Each step ends with a host read of its loss, so a step's time includes its compute.
    """
    for _ in range(warmup):
        float(step(*next(batches)))
    times, losses = [], []
    window_start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        losses.append(float(step(*next(batches))))
        times.append(time.perf_counter() - t0)
    return times, losses, time.perf_counter() - window_start


def run(args: argparse.Namespace) -> dict:
    """Train ``args.model`` and return a complete record (status ok)."""
    from archbench import metrics
    start = provenance.now()
    tf = configure_tensorflow(args)
    from archbench.models import build_model, training_flops_per_image
    model = build_model(args.model, args.image_size, args.num_classes)
    step = make_train_step(tf, model, args.learning_rate)
    if args.data == "synthetic":
        fixed = synthetic_batch(tf, args)
        batches = iter(lambda: fixed, None)
    else:
        from archbench.data import real_batches
        batches = real_batches(args)
    times, losses, wall = timed_steps(step, batches, args.warmup_steps, args.steps)
    return make_record(
        **base_fields(args, tf.__version__), start_time=start, end_time=provenance.now(),
        step_times_s=times, loss_first=losses[0], loss_last=losses[-1],
        loss_decreased=bool(losses[-1] < losses[0]),
        throughput=metrics.window_throughput(args.batch_size * args.steps, wall),
        throughput_unit="img/s",
        metrics={"flops_per_image": {"value": training_flops_per_image(args.model, args.image_size),
                                     "unit": "FLOP"},
                 "window_s": {"value": wall, "unit": "s"}})


def base_fields(args: argparse.Namespace, tf_version: str = "") -> dict:
    """Record fields that describe the configuration and where it ran."""
    from archbench.campaign import config_id
    conf = dict(kind="train", model=args.model, data=args.data, strategy="single", nodes=1,
                processes_per_node=1, workers=1, intra_threads=args.intra_threads,
                inter_threads=args.inter_threads, batch_per_process=args.batch_size,
                global_batch=args.batch_size, image_size=args.image_size,
                vendor_library="onednn", vendor_library_enabled=args.onednn == "on")
    return {**provenance.host_fields(), **conf, "experiment": "adhoc", "system": "local",
            "config_id": config_id(conf), "repetition": 0, "framework": "tensorflow",
            "framework_version": tf_version, "warmup_steps": args.warmup_steps,
            "measured_steps": args.steps}


def failure_record(args: argparse.Namespace, status: str, reason: str, start: str) -> dict:
    """A record for a run that did not finish: status oom|failed with the reason."""
    return make_record(**base_fields(args), start_time=start, end_time=provenance.now(),
                       status=status, reason=reason[:500])


def command_for(measurement: dict, system: dict) -> list[str]:
    """argv that runs ``measurement`` (a single-process training configuration); the
    supervisor appends ``--output PATH``."""
    m = measurement
    argv = [sys.executable, "-m", "archbench.train", "--model", m["model"],
            "--batch-size", str(m["batch_per_process"]), "--intra-threads", str(m["intra_threads"]),
            "--inter-threads", str(m["inter_threads"]),
            "--onednn", "on" if m.get("vendor_library_enabled", True) else "off",
            "--data", m["data"], "--warmup-steps", str(m["warmup_steps"]),
            "--steps", str(m["measured_steps"]), "--image-size", str(m["image_size"]),
            "--num-classes", str(m.get("num_classes", 1000))]
    if m["data"] == "real" and system.get("data_dir"):
        argv += ["--data-dir", system["data_dir"]]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run, write the record; on OOM or error write a failure record."""
    args = parse_args(argv)
    start = provenance.now()
    try:
        record = run(args)
    except MemoryError as exc:
        write_record(args.output, failure_record(args, "oom", f"MemoryError: {exc}", start))
        return EXIT_BENCHMARK_FAILED
    except Exception as exc:  # noqa: BLE001 - any framework error becomes a failure record
        status = "oom" if type(exc).__name__ == "ResourceExhaustedError" else "failed"
        first_line = (str(exc).strip().splitlines() or [""])[0]
        write_record(args.output, failure_record(args, status, f"{type(exc).__name__}: {first_line}", start))
        print(f"archbench.train: {status}: {type(exc).__name__}: {first_line}", file=sys.stderr)
        return EXIT_BENCHMARK_FAILED
    write_record(args.output, record)
    print(f"{record['model']}: {record['throughput']:.2f} img/s "
          f"(loss {record['loss_first']:.3f} -> {record['loss_last']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
