"""Multi-process training backends: Horovod (MPI or Gloo) and TensorFlow's
MultiWorkerMirrored and ParameterServer strategies.

A *backend* hides the strategy from the training loop of ``archbench.train``: it builds
the compiled step, feeds each worker its shard of the data, synchronises the workers at
the edges of the measured window and combines per-worker values. Throughput follows
DESIGN.md: images processed by ALL workers in the window / the window's wall time, where
the window starts after a barrier and ends after a barrier, and its length is the
maximum over workers.

Starting the processes, and finding the TF cluster from inside one, is ``archbench.launch``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Sequence

from archbench.horovod_timeline import AllreduceCount, count_allreduces, settled_events
from archbench.tfcluster import LaunchError, cluster_resolver, serve

STRATEGIES = ("single", "horovod", "mirrored", "parameter_server")
PROBE_STEPS = 3  # Horovod: steps after the window whose allreduces are counted
BARRIER = "archbench_barrier"  # name of the Horovod barrier's tensor


def pin_cores(cores: int, index: int = 0) -> list[int]:
    """Restrict this process to ``cores`` CPUs: block ``index`` of the CPUs it may use.

    Call before TensorFlow starts its thread pools. Returns the CPUs chosen.
    """
    allowed = sorted(os.sched_getaffinity(0))
    chosen = allowed[index * cores:(index + 1) * cores]
    if len(chosen) < cores:
        raise ValueError(f"--cores {cores} (block {index}) needs more than the "
                         f"{len(allowed)} CPUs this process may use")
    os.sched_setaffinity(0, chosen)
    return chosen


def _hostname(address: str) -> str:
    host = address.rsplit(":", 1)[0]
    return socket.gethostname() if host in ("127.0.0.1", "localhost", "::1") else host


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------- backends

class Backend:
    """One process, no communication (strategy ``single``)."""

    name = "single"

    def __init__(self, tf, args: argparse.Namespace):
        self.tf = tf
        self.args = args
        self.rank, self.size = 0, 1

    @property
    def is_writer(self) -> bool:
        """True for the one process that writes the record."""
        return self.rank == 0

    @property
    def workers(self) -> int:
        """Training workers (processes that compute gradients)."""
        return self.size

    def layout(self) -> tuple[int, int]:
        """(nodes, processes per node) of the run; ``--nodes``/``--processes-per-node`` win."""
        nodes = self.args.nodes or max(1, len(self.hosts()))
        ppn = self.args.processes_per_node or max(1, self.workers // nodes)
        if nodes * ppn != self.workers:
            raise LaunchError(f"{self.workers} workers started, but nodes x processes per node "
                              f"= {nodes} x {ppn}")
        return nodes, ppn

    def scope(self):
        """Context in which the model and optimizer are created."""
        return contextlib.nullcontext()

    def make_step(self, model, optimizer, loss_fn: Callable) -> Callable:
        """Compiled step(images, labels) -> loss: forward, backward, update."""
        tf = self.tf

        @tf.function
        def step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            grads = self.gradients(tape, loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step

    def gradients(self, tape, loss, variables):
        """Gradients of ``loss`` (averaged over workers where they are combined)."""
        return tape.gradient(loss, variables)

    def batches(self, dataset_fn: Callable[[int, int], Any]) -> Iterator:
        """Iterator over this worker's batches; ``dataset_fn(shard, shards)`` -> tf.data."""
        return iter(dataset_fn(self.rank, self.size))

    def start(self, model) -> None:
        """Called once the model exists, before the first step (e.g. broadcast weights)."""

    def barrier(self) -> None:
        """Return when every worker has reached this point."""

    def gather(self, values: Sequence[float]) -> list[list[float]]:
        """Every worker's ``values`` (same length everywhere), one row per worker."""
        return [list(map(float, values))]

    def hosts(self) -> list[str]:
        """Hosts of all workers, in rank order, each once."""
        return [socket.gethostname()]

    def window(self, step: Callable, batches: Iterator, warmup: int, steps: int,
               batch_size: int) -> tuple[list[float], list[float], float, int]:
        """Warm-up, then the measured window between two barriers.

        Returns (this worker's step times, its losses, window wall time = max over
        workers, images processed by all workers in the window).
        """
        for _ in range(warmup):
            float(step(*next(batches)))
        self.barrier()
        times, losses = [], []
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            losses.append(float(step(*next(batches))))
            times.append(time.perf_counter() - t0)
        self.barrier()
        wall = time.perf_counter() - start
        rows = self.gather([wall, batch_size * steps])
        return times, losses, max(r[0] for r in rows), int(sum(r[1] for r in rows))

    def weight_spread(self, model) -> float | None:
        """Largest difference between workers of per-variable checksums (sum and sum of
        absolute values, in float64) of the trainable weights: 0 when replicas agree;
        None when there are no replicas to compare."""
        if self.workers < 2:
            return None
        tf = self.tf
        sums = []
        for v in model.trainable_variables:
            w = tf.cast(tf.convert_to_tensor(v), tf.float64)
            sums += [float(tf.reduce_sum(w)), float(tf.reduce_sum(tf.abs(w)))]
        rows = self.gather(sums)
        return max((max(col) - min(col) for col in zip(*rows)), default=0.0)

    def metrics(self, model) -> dict:
        """Strategy-specific record metrics."""
        return {}


def horovod_knobs(cycle_time_ms: float | None, fusion_threshold_bytes: int | None) -> dict:
    """The Horovod settings a run was given, as record metrics (also on failure records,
    so a setting that only failed is still named in the tuning table)."""
    out = {}
    if cycle_time_ms is not None:
        out["horovod_cycle_time"] = {"value": cycle_time_ms, "unit": "ms"}
    if fusion_threshold_bytes is not None:
        out["horovod_fusion_threshold"] = {"value": fusion_threshold_bytes, "unit": "B"}
    return out


class HorovodBackend(Backend):
    """Horovod data parallelism: gradients averaged by allreduce (MPI or Gloo)."""

    name = "horovod"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        if args.horovod_cycle_time is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = f"{args.horovod_cycle_time:g}"
        if args.horovod_fusion_threshold is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(args.horovod_fusion_threshold)
        # a timeline that starts and stops on request (the allreduce count after the window)
        os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")
        import horovod.tensorflow as hvd
        hvd.init()
        self.allreduces: AllreduceCount | None = None
        # compiled, so the op (and the timeline) carries the name; eager ops lose it
        self._barrier = tf.function(lambda: hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name=BARRIER))
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._hosts = _unique(hvd.allgather_object(socket.gethostname()))

    def layout(self) -> tuple[int, int]:
        if self.args.nodes is None and self.args.processes_per_node is None:
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

    def window(self, step, batches, warmup, steps, batch_size):
        measured = super().window(step, batches, warmup, steps, batch_size)
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
        out.update(horovod_knobs(self.args.horovod_cycle_time, self.args.horovod_fusion_threshold))
        return out


class MirroredBackend(Backend):
    """MultiWorkerMirroredStrategy: synchronous all-reduce across worker processes."""

    name = "mirrored"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        resolver = cluster_resolver("mirrored")
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
        resolver = self.strategy.cluster_resolver
        spec = resolver.cluster_spec().as_dict() if resolver else {}
        self._addresses = spec.get("worker", [])
        self.size = max(1, len(self._addresses))
        self.rank = int(resolver.task_id or 0) if resolver and spec else 0
        self.global_batch = args.batch_size * self.size

    def hosts(self) -> list[str]:
        return _unique([_hostname(a) for a in self._addresses]) or [socket.gethostname()]

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

    def gather(self, values):
        tf, strategy = self.tf, self.strategy
        values = list(map(float, values))
        onehot = [[v if i == self.rank else 0.0 for v in values] for i in range(self.size)]

        local = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(onehot, dtype=tf.float64))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None).numpy().tolist()

    def barrier(self) -> None:
        self.gather([0.0])


def per_example_loss(loss_fn):
    """The unreduced (per example) version of a Keras loss."""
    from archbench.models import keras
    config = {**loss_fn.get_config(), "reduction": keras().losses.Reduction.NONE}
    return type(loss_fn).from_config(config)


class ParameterServerBackend(Backend):
    """ParameterServerStrategy: variables on parameter servers, asynchronous workers
    driven by this process (the coordinator/chief). Other tasks serve and never return."""

    name = "parameter_server"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        resolver = cluster_resolver("parameter_server", args.parameter_servers)
        spec = resolver.cluster_spec()
        task_type, task_id = resolver.task_type, resolver.task_id
        if task_type in ("worker", "ps"):
            serve(tf, spec, task_type=task_type, task_id=int(task_id), intra=args.intra_threads,
                  inter=args.inter_threads)
        if len(spec.as_dict().get("ps", [])) != args.parameter_servers:
            raise LaunchError(f"cluster has {len(spec.as_dict().get('ps', []))} parameter "
                              f"servers, --parameter-servers says {args.parameter_servers}")
        self._spec = spec.as_dict()
        self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        self.size = len(self._spec.get("worker", []))

    def hosts(self) -> list[str]:
        order = self._spec.get("chief", []) + self._spec.get("worker", []) + self._spec.get("ps", [])
        return _unique([_hostname(a) for a in order])

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

    def window(self, step, batches, warmup, steps, batch_size):
        """Asynchronous steps: ``steps`` per worker are scheduled, the window ends when the
        coordinator has joined them all. No per-step times exist (steps overlap)."""
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


BACKENDS = {"single": Backend, "horovod": HorovodBackend, "mirrored": MirroredBackend,
            "parameter_server": ParameterServerBackend}


def make_backend(tf, args: argparse.Namespace) -> Backend:
    """The backend of ``args.strategy`` (initialises Horovod or the TF cluster)."""
    return BACKENDS[args.strategy](tf, args)
