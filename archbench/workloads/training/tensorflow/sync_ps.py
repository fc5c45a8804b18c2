"""Synchronous parameter servers as tf_cnn_benchmarks ran them (its ``--variable_update``
``parameter_server`` and ``distributed_replicated``), in TensorFlow's own v1 distributed
runtime: one ``tf.distribute.Server`` per task, graph mode, variables placed on the ``ps``
tasks by ``tf.compat.v1.train.replica_device_setter`` and gradients aggregated every step
in ``tf.compat.v1.ConditionalAccumulator``s that live beside their variables.

One step of N workers (worker 0 is the chief):

1. every worker computes the gradients of the mean loss of its own batch, reading the
   variables from the parameter servers (``parameter_server``) or from its local replica
   (``distributed_replicated``), and applies them to each variable's accumulator, on
   that variable's parameter server (which sums them);
2. the chief takes the mean of the N gradients of every variable (``take_grad`` blocks
   until all N have arrived) and applies it once: ``v -= learning_rate * mean``;
3. every worker passes a barrier the chief enters only after that update;
4. ``distributed_replicated`` only: every worker copies the updated variables into its
   replica.

So each step applies one update holding every worker's gradient: after k steps the
weights are those of one process taking k steps on the concatenated batches
(tests/test_sync_ps.py proves it). The parameter-server tasks only serve; they exit when
worker 0 has finished.
"""

from __future__ import annotations

import itertools
import os
import socket
from types import SimpleNamespace

import numpy as np

from archbench.core.net import hostname_of
from archbench.workloads import energy, gpu
from archbench.workloads.launch import LaunchError
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import unique
from archbench.workloads.training.strategies.parameter_server import ASYNC
from archbench.workloads.training.tensorflow.backends import AsyncParameterServer, Single, per_example_loss
from archbench.workloads.training.tensorflow.cluster import cluster_resolver, serve

ROUND_ROBIN, GREEDY = "round_robin", "greedy"
PLACEMENTS = (ROUND_ROBIN, GREEDY)  # how variables are spread over parameter servers


class GreedyBySize:
    """A ``replica_device_setter`` ps_strategy putting each variable on the parameter
    server holding the fewest bytes so far (tf.contrib's GreedyLoadBalancingStrategy with
    byte_size_load_fn, gone from TensorFlow 2; CSCS 2017 Fig. 4)."""

    def __init__(self, tasks: int):
        self.loads = [0] * tasks

    def __call__(self, op) -> int:
        import tensorflow as tf
        task = min(range(len(self.loads)), key=self.loads.__getitem__)
        size = tf.TensorShape(op.get_attr("shape")).num_elements() or 0
        self.loads[task] += size * tf.as_dtype(op.get_attr("dtype")).size
        return task


def ps_device_setter(tf, tasks: int, placement: str, *, worker_device: str):
    """``replica_device_setter`` putting variables on ``tasks`` parameter servers by
    ``placement`` (round_robin | greedy) and every other op on ``worker_device``."""
    if placement not in PLACEMENTS:
        raise LaunchError(f"unknown variable placement '{placement}' (known: {', '.join(PLACEMENTS)})")
    return tf.compat.v1.train.replica_device_setter(
        ps_tasks=tasks, worker_device=worker_device,
        ps_strategy=GreedyBySize(tasks) if placement == GREEDY else None)


def barrier_op(tf, name: str, *, workers: int, rank: int, after=()):
    """An op returning once all ``workers`` have run it (tf_cnn_benchmarks' sync queues):
    one FIFO queue per worker on ps:0; a worker puts a token in every other worker's
    queue, then takes ``workers - 1`` tokens from its own. Runs after ``after``."""
    with tf.control_dependencies(list(after)):
        if workers == 1:
            return tf.no_op()
        with tf.device("/job:ps/task:0"):
            queues = [tf.queue.FIFOQueue(2 * workers, [tf.bool], shapes=[[]],
                                         shared_name=f"{name}_{i}", name=f"{name}_{i}")
                      for i in range(workers)]
        puts = [q.enqueue(False) for i, q in enumerate(queues) if i != rank]
        with tf.control_dependencies(puts):
            return tf.group(queues[rank].dequeue_many(workers - 1))


class SyncParameterServerBackend(Single):
    """``parameter_server``: the variables live on the parameter servers only; every step
    each worker reads them there, and the chief applies the mean of all workers'
    gradients once (see the module docstring)."""

    replicated = False  # distributed_replicated: a local replica per worker

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        resolver = cluster_resolver(parameter_servers=config.parameter_servers,
                                    workers_per_node=config.processes_per_node or 1)
        if resolver is None:
            raise LaunchError("a parameter-server cluster needs TF_CONFIG (python -m "
                              "archbench.workloads.spawn spawn) or a Slurm job step (srun)")
        spec = resolver.cluster_spec()
        self._spec = spec.as_dict()
        servers = len(self._spec.get("ps", []))
        if servers != config.parameter_servers:
            raise LaunchError(f"cluster has {servers} parameter servers, "
                              f"--parameter-servers says {config.parameter_servers}")
        node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        print(f"archbench.train: {resolver.task_type}:{resolver.task_id} on node {node}", flush=True)
        if resolver.task_type == "ps":
            serve(tf, spec, task_type="ps", task_id=int(resolver.task_id),
                  intra=config.intra_threads, inter=config.inter_threads)
        self.rank, self.size = int(resolver.task_id), len(self._spec["worker"])
        tf.compat.v1.disable_eager_execution()  # graph mode from here on in this process
        tf.compat.v1.set_random_seed(config.seed)
        # the run's thread pools, as asked (graph-mode remote reads need no extra thread)
        threads = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=config.intra_threads,
            inter_op_parallelism_threads=config.inter_threads)
        self.server = tf.distribute.Server(spec, job_name="worker", task_index=self.rank,
                                           protocol="grpc", config=threads, start=True)
        self.session_config = tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{self.rank}"])
        self.session_config.MergeFrom(threads)
        self.device = f"/job:worker/task:{self.rank}"
        self.placement = config.ps_variable_placement
        self._setter = None
        self._step = 0

    def _ps_setter(self):
        """Device function: variables round-robin or greedily by size over the parameter
        servers, every other op on this worker (one for the run: it counts the loads)."""
        if self._setter is None:
            self._setter = ps_device_setter(self.tf, len(self._spec["ps"]), self.placement,
                                            worker_device=self.device)
        return self._setter

    def scope(self):
        return self.tf.compat.v1.device(self.device if self.replicated else self._ps_setter())

    def make_step(self, model, optimizer, loss_fn):
        """The step runs the graph :meth:`batches` builds (it needs the input tensors);
        ``optimizer`` is not used: plain SGD at the run's learning rate is applied on the
        parameter servers."""
        self._model, self._loss_fn = model, loss_fn
        return self._run_step

    def batches(self, dataset_fn):
        """Build the training graph on this worker's shard; the step takes no arguments."""
        tf = self.tf
        with tf.device(self.device):
            self._iterator = tf.compat.v1.data.make_initializable_iterator(
                dataset_fn(self.rank, self.size))
            images, labels = self._iterator.get_next()
        self._build(images, labels)
        return itertools.repeat(())

    def device_batches(self, make_batch):
        """Synthetic data made in the graph on this worker (its GPU in a GPU run, where the
        random ops run), the same values every step; the step takes no arguments."""
        with self.tf.device(self.device):
            images, labels = make_batch(self.rank)
        self._iterator = None
        self._build(images, labels)
        return itertools.repeat(())

    def step_devices(self, model) -> list[str]:
        """Where this worker's loss op ran in one traced forward pass of the step's graph
        (no update, no barrier: the weights stay as the window left them): TensorFlow's
        placement, not the requested device (graph tensors only name their task)."""
        tf = self.tf
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        self.session.run(self._forward_loss, options=options, run_metadata=metadata)
        name = self._forward_loss.op.name
        return gpu.placed_devices(SimpleNamespace(device=stats.device)
                                  for stats in metadata.step_stats.dev_stats
                                  if any(node.node_name == name for node in stats.node_stats))

    def _build(self, images, labels) -> None:
        tf, model = self.tf, self._model
        with self.scope():
            logits = model(images, training=True)
            loss = tf.reduce_mean(per_example_loss(self._loss_fn)(labels, logits))
            self._forward_loss = loss  # the step's loss before any update (step_devices)
            # e.g. batch-norm moving statistics (the graph-mode model's updates of this call)
            updates = model.get_updates_for(images) if hasattr(model, "get_updates_for") else []
        variables = model.trainable_variables
        self._ps_variables = [] if self.replicated else list(model.variables)
        self._local_variables = list(model.variables) if self.replicated else []
        if self.replicated:  # the shared copy on the parameter servers
            with tf.compat.v1.device(self._ps_setter()):
                targets = [tf.compat.v1.get_variable(
                    f"archbench_ps/{v.name.split(':')[0]}", shape=v.shape, dtype=v.dtype.base_dtype,
                    initializer=tf.compat.v1.zeros_initializer(), trainable=False, use_resource=True)
                    for v in variables]
            self._ps_variables += targets
        else:
            targets = variables
        self._step_ph = tf.compat.v1.placeholder(tf.int64, [], name="archbench_step")
        with tf.device(self.device):  # the backward pass on this worker, like the forward
            grads = tf.compat.v1.gradients(loss, variables, colocate_gradients_with_ops=True)
        applied, accumulators = [], []
        for i, (grad, target) in enumerate(zip(grads, targets)):
            with tf.device(target.device):
                acc = tf.compat.v1.ConditionalAccumulator(
                    target.dtype.base_dtype, shape=target.shape, shared_name=f"archbench_acc_{i}")
            accumulators.append(acc)
            applied.append(acc.apply_grad(tf.convert_to_tensor(grad), local_step=self._step_ph))
        done = applied + list(updates)
        if self.rank == 0:
            with tf.control_dependencies(done):
                done = []
                for acc, target in zip(accumulators, targets):
                    with tf.device(target.device):
                        mean = acc.take_grad(self.size)
                        done.append(target.assign_sub(self.config.learning_rate * mean))
        barrier = barrier_op(tf, "archbench_step", workers=self.size, rank=self.rank, after=done)
        if self.replicated:
            with tf.control_dependencies([barrier]):
                barrier = tf.group([v.assign(t) for v, t in zip(variables, targets)])
        with tf.control_dependencies([barrier]), tf.device(self.device):
            self._loss = tf.identity(loss)
        self._build_sync(len(variables))
        if self.replicated:
            self._publish = tf.group([t.assign(v) for v, t in zip(variables, targets)])
            self._fetch = tf.group([v.assign(t) for v, t in zip(variables, targets)])

    def _build_sync(self, n_variables: int) -> None:
        """The window's barrier and the gather table (one row per worker on ps:0)."""
        tf = self.tf
        self._barrier = barrier_op(tf, "archbench_window", workers=self.size, rank=self.rank)
        self._width = max(2 + energy.GATHERED, 2 * n_variables)  # the window's gather, weights
        with tf.device("/job:ps/task:0"):
            self._table = tf.compat.v1.get_variable(
                "archbench_gather", shape=(self.size, self._width), dtype=tf.float64,
                initializer=tf.compat.v1.zeros_initializer(), trainable=False, use_resource=True)
        self._ps_variables.append(self._table)
        self._row = tf.compat.v1.placeholder(tf.float64, [self._width])
        self._put = self._table.scatter_update(tf.IndexedSlices(self._row[None, :],
                                                                tf.constant([self.rank])))
        self._rows = self._table.read_value()

    def start(self, model) -> None:
        """Open the session; the chief initialises the shared variables (and publishes its
        replica), every worker its own ones, then all copy the shared ones."""
        tf = self.tf
        self.session = tf.compat.v1.Session(self.server.target, config=self.session_config)
        run = self.session.run
        if self._iterator is not None:  # a dataset (not data made on the device)
            run(self._iterator.initializer)
        if self._local_variables:
            run(tf.compat.v1.variables_initializer(self._local_variables))
        if self.rank == 0:
            run(tf.compat.v1.variables_initializer(self._ps_variables))
            if self.replicated:
                run(self._publish)
        self.barrier()
        if self.replicated:
            run(self._fetch)

    def _run_step(self) -> float:
        loss = self.session.run(self._loss, {self._step_ph: self._step})
        self._step += 1
        return float(loss)

    def barrier(self) -> None:
        self.session.run(self._barrier)

    def gather(self, values):
        values = list(map(float, values))
        if len(values) > self._width:
            raise ValueError(f"gather of {len(values)} values, the table holds {self._width}")
        self.session.run(self._put, {self._row: values + [0.0] * (self._width - len(values))})
        self.barrier()
        rows = self.session.run(self._rows)
        self.barrier()  # nobody writes the next gather before all have read this one
        return [list(map(float, row[:len(values)])) for row in rows]

    def predictor(self, model):
        tf = self.tf
        with tf.device(self.device):
            images = tf.compat.v1.placeholder(tf.float32, [None, *model.input_shape[1:]])
            logits = model(images, training=False)
        return lambda batch: self.session.run(logits, {images: batch})

    def weights(self, model) -> list[np.ndarray]:
        return self.session.run(list(model.trainable_variables))

    def weight_spread(self, model) -> float | None:
        return super().weight_spread(model) if self.replicated else None  # one copy on the PS

    def worker_hosts(self) -> list[str]:
        """Hosts of the workers, in rank order, each once."""
        return unique([hostname_of(a) for a in self._spec["worker"]])

    def hosts(self) -> list[str]:
        return unique(self.worker_hosts() + [hostname_of(a) for a in self._spec["ps"]])

    def layout(self) -> tuple[int, int]:
        nodes = self.config.nodes or len(self.worker_hosts())
        ppn = self.config.processes_per_node or max(1, self.size // nodes)
        if nodes * ppn != self.size:
            raise LaunchError(f"{self.size} workers started, but nodes x processes per node "
                              f"= {nodes} x {ppn}")
        return nodes, ppn

    def metrics(self, model) -> dict:
        ps_hosts = {hostname_of(a) for a in self._spec["ps"]}
        return {"parameter_servers": {"value": len(self._spec["ps"]), "unit": "tasks"},
                "parameter_server_only_hosts": {
                    "value": len(ps_hosts - set(self.worker_hosts())), "unit": "nodes"},
                "ps_variable_placement": {"value": self.placement, "unit": ""}}


class DistributedReplicatedBackend(SyncParameterServerBackend):
    """``distributed_replicated``: every worker trains its own replica; the mean gradient
    is aggregated and applied on the parameter servers' copy, which every worker copies
    back into its replica each step."""

    replicated = True


def variable_updates() -> dict[str, type[Single]]:
    """The backend of each variable update of strategy ``parameter_server``."""
    return {"parameter_server": SyncParameterServerBackend,
            "distributed_replicated": DistributedReplicatedBackend,
            ASYNC: AsyncParameterServer}


def parameter_server(tf, config: TrainRun) -> Single:
    """The backend of ``config.variable_update`` (default: synchronous parameter_server)."""
    return variable_updates()[config.variable_update or "parameter_server"](tf, config)
