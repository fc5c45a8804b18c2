"""Strategy ``mirrored``: tf.distribute.MultiWorkerMirroredStrategy, synchronous
all-reduce across worker processes (a TF cluster of workers, see ``tfdistribute``)."""

from __future__ import annotations

import socket

from archbench.core import metrics
from archbench.core.net import hostname_of
from archbench.workloads import gpu
from archbench.workloads.tfcluster import cluster_resolver, tf_task_rank
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import Backend, Launch, Strategy, unique
from archbench.workloads.training.strategies.tfdistribute import per_example_loss, tf_cluster_launch


class MirroredBackend(Backend):
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


def launch(plan: Launch) -> list[str]:
    """A TF cluster of workers only."""
    return tf_cluster_launch(plan)


STRATEGY = Strategy(backend=MirroredBackend, launch=launch, launch_rank=tf_task_rank,
                    help="tf.distribute MultiWorkerMirrored (synchronous all-reduce)",
                    label="MultiWorkerMirrored")
