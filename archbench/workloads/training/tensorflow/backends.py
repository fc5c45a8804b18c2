"""TensorFlow's backend of every strategy it runs (the ``backends`` of its entry in
:data:`archbench.workloads.training.frameworks.FRAMEWORKS`): each a
:class:`~archbench.workloads.training.strategies.base.Backend` holding ``tf``.

* :class:`Single`: one process (strategy ``single``); the others extend it;
* :class:`Horovod`: Horovod's TensorFlow binding (strategy ``horovod``);
* :class:`Mirrored`: tf.distribute's MultiWorkerMirroredStrategy (``mirrored``);
* :class:`AsyncParameterServer`: tf.distribute's ParameterServerStrategy (``parameter_server``
  with ``--variable-update ps_async``); the synchronous ones, and the choice by
  ``--variable-update``, are :mod:`~archbench.workloads.training.tensorflow.sync_ps`'s
  (its :func:`~archbench.workloads.training.tensorflow.sync_ps.parameter_server`).
"""

from __future__ import annotations

import itertools
import os
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

import numpy as np

from archbench.core import metrics
from archbench.core.net import hostname_of
from archbench.workloads import gpu
from archbench.workloads.launch import LaunchError
from archbench.workloads.training.horovod_timeline import AllreduceCount, count_allreduces, settled_events
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import Backend, unique
from archbench.workloads.training.strategies.horovod import BARRIER, PROBE_STEPS, horovod_knobs
from archbench.workloads.training.tensorflow.cluster import cluster_resolver, serve
from archbench.workloads.training.tensorflow.models import keras


class Single(Backend):
    """One process, no communication (strategy ``single``), in TensorFlow."""

    loss_scaler = None  # precision fp16: the step's LossScaleOptimizer

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        self.tf = tf

    def make_step(self, model, optimizer, loss_fn: Callable) -> Callable:
        """Compiled step(images, labels) -> loss: forward, backward, update. Graph
        compiled: XLA (``jit_compile``); mixed precision: the loss of the logits in fp32,
        scaled and the gradients unscaled for fp16 (a ``LossScaleOptimizer``)."""
        tf = self.tf
        mixed = self.config.precision != "fp32"
        scaled = self.config.precision == "fp16"
        self.loss_scaler = optimizer if scaled else None

        @tf.function(jit_compile=self.config.graph == "compiled" or None)
        def step(images, labels):
            with tf.GradientTape() as tape:
                logits = model(images, training=True)
                loss = loss_fn(labels, tf.cast(logits, tf.float32) if mixed else logits)
                target = optimizer.get_scaled_loss(loss) if scaled else loss
            grads = self.gradients(tape, target, model.trainable_variables)
            if scaled:
                grads = optimizer.get_unscaled_gradients(grads)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step

    def gradients(self, tape, loss, variables):
        """Gradients of ``loss`` (averaged over workers where they are combined)."""
        return tape.gradient(loss, variables)

    def device_batches(self, make_batch: Callable[[int], Any]) -> Iterator | None:
        """Iterator repeating ONE synthetic batch made on this process's GPU by
        ``make_batch(shard)`` -> (images, labels), so that no step copies data from the
        host; None where the strategy feeds only datasets (then :meth:`batches`)."""
        with self.tf.device("/device:GPU:0"):
            batch = make_batch(self.rank)
        return itertools.repeat(batch)

    def step_devices(self, model) -> list[str]:
        """The devices TensorFlow placed the measured step on: the last measured step's
        loss and the trainable variables (their ``.device``), e.g. ["GPU:0"]."""
        return gpu.placed_devices([getattr(self, "last_loss", None), *model.trainable_variables])

    def predictor(self, model) -> Callable:
        """images -> logits of ``model`` in inference mode, as numpy."""
        return lambda images: np.asarray(model(images, training=False))

    def weights(self, model) -> list:
        """This worker's trainable weights as numpy arrays."""
        return [np.asarray(v) for v in model.trainable_variables]


class Horovod(Single):
    """Horovod data parallelism: gradients averaged by allreduce (MPI or Gloo)."""

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        if config.horovod_cycle_time is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = f"{config.horovod_cycle_time:g}"
        if config.horovod_fusion_threshold is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(config.horovod_fusion_threshold)
        # a timeline that starts and stops on request (the allreduce count after the window)
        os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")
        import horovod.tensorflow as hvd
        hvd.init()
        self.allreduces: AllreduceCount | None = None
        # compiled, so the op (and the timeline) carries the name; eager ops lose it
        self._barrier = tf.function(lambda: hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name=BARRIER))
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._hosts = unique(hvd.allgather_object(socket.gethostname()))

    def layout(self) -> tuple[int, int]:
        if self.config.nodes is None and self.config.processes_per_node is None:
            return self.hvd.cross_size(), self.hvd.local_size()
        return super().layout()

    def gradients(self, tape, loss, variables):
        return self.hvd.DistributedGradientTape(tape).gradient(loss, variables)

    def start(self, model) -> None:
        self.hvd.broadcast_variables(model.variables, root_rank=0)

    def barrier(self) -> None:
        self._barrier()

    def gather(self, values):
        row = self.tf.constant([list(map(float, values))], dtype=self.tf.float64)
        return self.hvd.allgather(row).numpy().tolist()

    def hosts(self) -> list[str]:
        return self._hosts

    def window(self, step, batches, *, warmup, steps, batch_size, settle=lambda: None,
               compiles=False):
        measured = super().window(step, batches, warmup=warmup, steps=steps, batch_size=batch_size,
                                  settle=settle, compiles=compiles)
        self.allreduces = self._count_allreduces(step, batches)
        return measured

    def _count_allreduces(self, step, batches) -> AllreduceCount | None:
        """Allreduces of PROBE_STEPS more steps, from Horovod's timeline (recorded after the
        measured window; armed but off inside it, see scripts/bench_timeline_overhead.py).
        None off rank 0, when the user records a timeline of their own (HOROVOD_TIMELINE
        set to a file), or when the count fails: it never costs the measurement itself."""
        if os.environ.get("HOROVOD_TIMELINE") != "DYNAMIC":
            return None
        with tempfile.TemporaryDirectory(prefix="archbench-timeline-") as tmp:
            path = os.path.join(tmp, "timeline.json")
            try:  # fails on every rank alike (Horovod not set up for a dynamic timeline)
                self.hvd.start_timeline(path)
            except ValueError as exc:
                print(f"archbench: no allreduce count ({exc})", file=sys.stderr)
                return None
            self.barrier()  # the timeline is on in every rank's background loop
            for _ in range(PROBE_STEPS):
                float(step(*next(batches)))
            self.barrier()
            self.hvd.stop_timeline()
            if self.rank != 0:
                return None
            try:
                count = count_allreduces(settled_events(path), skip=BARRIER)
            except (OSError, ValueError, KeyError) as exc:  # an unreadable timeline
                print(f"archbench: no allreduce count ({exc!r})", file=sys.stderr)
                return None
        return AllreduceCount(count.tensors / PROBE_STEPS, count.collectives / PROBE_STEPS)

    def metrics(self, model) -> dict:
        variables = model.trainable_variables
        out = {
            "horovod_controller": {"value": "gloo" if self.hvd.gloo_enabled() else "mpi", "unit": ""},
            "allreduce_tensors": {"value": len(variables), "unit": "tensors/step"},
            "allreduce_bytes": {"value": int(sum(v.shape.num_elements() * v.dtype.size
                                                 for v in variables)), "unit": "B/step"},
        }
        if self.allreduces is not None:
            out["allreduces_per_step"] = {"value": self.allreduces.collectives, "unit": "allreduces/step"}
            out["allreduce_tensors_timeline"] = {"value": self.allreduces.tensors, "unit": "tensors/step"}
        if self.config.device == "gpu":  # GPU tensors go through NCCL when Horovod was built with it
            out["horovod_nccl"] = {"value": "built" if self.hvd.nccl_built() else "not built", "unit": ""}
        out.update(horovod_knobs(self.config.horovod_cycle_time, self.config.horovod_fusion_threshold))
        return out


class Mirrored(Single):
    """MultiWorkerMirroredStrategy: synchronous all-reduce across worker processes."""

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver())
        resolver = self.strategy.cluster_resolver
        spec = resolver.cluster_spec().as_dict() if resolver else {}
        self._addresses = spec.get("worker", [])
        self.size = max(1, len(self._addresses))
        self.rank = int(resolver.task_id or 0) if resolver and spec else 0
        self.global_batch = metrics.global_batch(config.batch_per_process, self.size)

    def hosts(self) -> list[str]:
        return unique([hostname_of(a) for a in self._addresses]) or [socket.gethostname()]

    def scope(self):
        return self.strategy.scope()

    def make_step(self, model, optimizer, loss_fn):
        tf, strategy = self.tf, self.strategy
        per_example = per_example_loss(loss_fn)
        global_batch = self.global_batch

        def replica_step(images, labels):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)),
                                                  global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        @tf.function
        def step(images, labels):
            losses = strategy.run(replica_step, args=(images, labels))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        return step

    def batches(self, dataset_fn):
        dist = self.strategy.distribute_datasets_from_function(
            lambda ctx: dataset_fn(ctx.input_pipeline_id, ctx.num_input_pipelines))
        return iter(dist)

    def step_devices(self, model) -> list[str]:
        """Where the replica's variables live (and its update ran): the reduced loss is
        copied to the host, so it says nothing about the step's device."""
        return gpu.placed_devices(model.trainable_variables)

    def gather(self, values):
        tf, strategy = self.tf, self.strategy
        values = list(map(float, values))
        onehot = [[v if i == self.rank else 0.0 for v in values] for i in range(self.size)]
        local = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(onehot, dtype=tf.float64))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None).numpy().tolist()

    def barrier(self) -> None:
        self.gather([0.0])


class AsyncParameterServer(Single):
    """ParameterServerStrategy: variables on parameter servers, asynchronous workers
    driven by this process (the coordinator/chief). Other tasks serve and never return."""

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        resolver = cluster_resolver(chief=True, parameter_servers=config.parameter_servers)
        spec = resolver.cluster_spec()
        task_type, task_id = resolver.task_type, resolver.task_id
        if task_type in ("worker", "ps"):
            serve(tf, spec, task_type=task_type, task_id=int(task_id), intra=config.intra_threads,
                  inter=config.inter_threads)
        servers = len(spec.as_dict().get("ps", []))
        if servers != config.parameter_servers:
            raise LaunchError(f"cluster has {servers} parameter servers, "
                              f"--parameter-servers says {config.parameter_servers}")
        self._spec = spec.as_dict()
        self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        self.size = len(self._spec.get("worker", []))

    def hosts(self) -> list[str]:
        order = self._spec.get("chief", []) + self._spec.get("worker", []) + self._spec.get("ps", [])
        return unique([hostname_of(a) for a in order])

    def scope(self):
        return self.strategy.scope()

    def make_step(self, model, optimizer, loss_fn):
        tf, strategy = self.tf, self.strategy
        per_example = per_example_loss(loss_fn)

        def replica_step(images, labels):
            with tf.GradientTape() as tape:  # each worker steps alone: mean over its batch
                loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        @tf.function
        def step(iterator):
            images, labels = next(iterator)
            return strategy.run(replica_step, args=(images, labels))
        return step

    def batches(self, dataset_fn):
        strategy = self.strategy

        def per_worker():
            return strategy.distribute_datasets_from_function(lambda ctx: dataset_fn(0, 1))
        return iter(self.coordinator.create_per_worker_dataset(per_worker))

    def device_batches(self, make_batch):
        return None  # the coordinator feeds its workers per-worker datasets

    def step_devices(self, model) -> list[str]:
        return []  # the steps ran on remote workers: no placement seen here

    def window(self, step, batches, *, warmup, steps, batch_size, settle=lambda: None,
               compiles=False):
        """Asynchronous steps: ``steps`` per worker are scheduled, the window ends when the
        coordinator has joined them all. No per-step times exist (steps overlap).
        ``settle`` is called before the first warm-up step is scheduled. A compiled step
        is not planned here (the registry's ``runs_with``): ``compiles`` is ignored."""
        settle()
        schedule = self.coordinator.schedule
        for _ in range(warmup * self.size):
            schedule(step, args=(batches,))
        self.coordinator.join()
        start = time.perf_counter()
        remote = [schedule(step, args=(batches,)) for _ in range(steps * self.size)]
        self.coordinator.join()
        wall = time.perf_counter() - start
        losses = [float(r.fetch()) for r in remote]
        return [], losses, wall, batch_size * steps * self.size

    def weight_spread(self, model) -> float | None:
        return None  # one copy of the variables, on the parameter servers

    def metrics(self, model) -> dict:
        return {"parameter_servers": {"value": len(self._spec.get("ps", [])), "unit": "tasks"}}


def per_example_loss(loss_fn):
    """The unreduced (per example) version of a Keras loss."""
    config = {**loss_fn.get_config(), "reduction": keras().losses.Reduction.NONE}
    return type(loss_fn).from_config(config)


def make_backend(tf, config: TrainRun) -> Backend:
    """The backend of ``config.strategy`` (initialises Horovod or the TF cluster)."""
    from archbench.workloads.training import frameworks
    return frameworks.framework("tensorflow").backend(config.strategy)(tf, config)
