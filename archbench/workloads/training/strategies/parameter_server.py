"""Strategy ``parameter_server``: variables on parameter-server tasks, in the three ways
its ``--variable-update`` names (tf_cnn_benchmarks' names for the first two):

* ``parameter_server`` (default): synchronous; every step the mean of all workers'
  gradients is applied once on the parameter servers (``sync_ps``);
* ``distributed_replicated``: synchronous; every worker trains a local replica, the
  gradients are aggregated on the parameter servers and the result copied back
  (``sync_ps``);
* ``ps_async``: TensorFlow 2's ParameterServerStrategy: a coordinator (the chief task)
  schedules asynchronous steps on the workers, each applying its own gradients.

Synchronous runs are a TF cluster of workers and parameter servers (worker 0 writes the
record); on Slurm one srun step whose first ``processes_per_node`` tasks of each node are
workers and the rest parameter servers, beside the workers (``--overcommit``) or, with
``tuning.ps_placement: separate``, on nodes of their own.
"""

from __future__ import annotations

import time

from archbench.core.net import hostname_of
from archbench.workloads.srun import srun_argv
from archbench.workloads.tfcluster import (
    LaunchError,
    cluster_resolver,
    planned_task_type,
    serve,
    tf_task_rank,
)
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import Backend, Launch, Strategy, unique
from archbench.workloads.training.strategies.sync_ps import (
    DistributedReplicatedBackend,
    SyncParameterServerBackend,
)
from archbench.workloads.training.strategies.tfdistribute import per_example_loss, tf_cluster_launch

ASYNC = "ps_async"


class AsyncParameterServerBackend(Backend):
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

    def window(self, step, batches, *, warmup, steps, batch_size, settle=lambda: None):
        """Asynchronous steps: ``steps`` per worker are scheduled, the window ends when the
        coordinator has joined them all. No per-step times exist (steps overlap).
        ``settle`` is called before the first warm-up step is scheduled."""
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


VARIABLE_UPDATES: dict[str, type[Backend]] = {
    "parameter_server": SyncParameterServerBackend,
    "distributed_replicated": DistributedReplicatedBackend,
    ASYNC: AsyncParameterServerBackend,
}


def backend(tf, config: TrainRun) -> Backend:
    """The backend of ``config.variable_update`` (default: synchronous parameter_server)."""
    return VARIABLE_UPDATES[config.variable_update or "parameter_server"](tf, config)


def trains(config: TrainRun) -> bool:
    """False for a parameter server (or ps_async's coordinator): it only serves, and in a
    GPU run sees no GPU, so that it never takes a worker's GPU memory (CSCS 2017 ran its
    parameter servers on the CPU)."""
    asynchronous = config.variable_update == ASYNC
    return planned_task_type(
        chief=asynchronous, parameter_servers=config.parameter_servers,
        workers_per_node=None if asynchronous else (config.processes_per_node or 1)) == "worker"


def launch(plan: Launch) -> list[str]:
    """The TF cluster of ``plan``: workers and ``parameter_servers`` ps tasks (default 1),
    plus a chief (the coordinator) for ``ps_async``."""
    servers = plan.parameter_servers or 1
    if plan.variable_update == ASYNC:
        return tf_cluster_launch(plan, chief=True, parameter_servers=servers)
    if plan.launcher != "srun":
        if plan.ps_nodes:
            raise LaunchError(f"parameter servers on nodes of their own need launcher srun, "
                              f"not {plan.launcher}")
        return tf_cluster_launch(plan, parameter_servers=servers)
    # block distribution, balanced over the nodes: each node's first processes_per_node
    # tasks are its workers (tfcluster.slurm_tf_config); the others parameter servers
    argv = srun_argv(nodes=plan.nodes + plan.ps_nodes, tasks=plan.ranks + servers,
                     cpus_per_task=plan.cpus_per_process)
    if not plan.ps_nodes:  # the parameter servers share the workers' cores
        argv.append("--overcommit")
    return argv + list(plan.worker)


STRATEGY = Strategy(backend=backend, launch=launch, launch_rank=tf_task_rank,
                    parameter_servers=True, variable_updates=tuple(VARIABLE_UPDATES), trains=trains,
                    help="variables on parameter servers: synchronous (--variable-update "
                         "parameter_server, distributed_replicated) or ps_async "
                         "(tf.distribute ParameterServerStrategy, a chief)",
                    label="parameter servers")
