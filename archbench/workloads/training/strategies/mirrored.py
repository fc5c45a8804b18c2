"""Strategy ``mirrored``: tf.distribute.MultiWorkerMirroredStrategy, synchronous
all-reduce across worker processes (a TF cluster of workers, see ``tfdistribute``)."""

from __future__ import annotations

from archbench.workloads.training.strategies.base import Launch, Strategy
from archbench.workloads.training.strategies.tfdistribute import tf_cluster_launch
from archbench.workloads.training.tensorflow.cluster import tf_task_rank


def launch(plan: Launch) -> list[str]:
    """A TF cluster of workers only."""
    return tf_cluster_launch(plan)


STRATEGY = Strategy(launch=launch, launch_rank=tf_task_rank,
                    help="tf.distribute MultiWorkerMirrored (synchronous all-reduce)",
                    label="MultiWorkerMirrored")
