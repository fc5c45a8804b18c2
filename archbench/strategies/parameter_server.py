"""Strategy ``parameter_server``: tf.distribute.experimental.ParameterServerStrategy.

Variables live on the parameter servers; this process (the coordinator, the chief of
the TF cluster) schedules asynchronous steps on the workers. Workers and parameter
servers only serve, and never return.
"""

from __future__ import annotations

import time

from archbench.net import hostname_of
from archbench.strategies.base import Backend, Launch, Strategy, unique
from archbench.strategies.tfdistribute import per_example_loss, tf_cluster_launch
from archbench.tfcluster import LaunchError, cluster_resolver, serve, tf_task_rank
from archbench.train_run import TrainRun


class ParameterServerBackend(Backend):
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

    def window(self, step, batches, *, warmup, steps, batch_size):
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


def launch(plan: Launch) -> list[str]:
    """A TF cluster of a chief (the coordinator), the workers and the parameter servers
    (the measurement's ``parameter_servers``, default 1)."""
    return tf_cluster_launch(plan, chief=True, parameter_servers=plan.parameter_servers or 1)


STRATEGY = Strategy(backend=ParameterServerBackend, launch=launch, launch_rank=tf_task_rank,
                    parameter_servers=True,
                    help="tf.distribute ParameterServer (asynchronous workers, a chief)")
