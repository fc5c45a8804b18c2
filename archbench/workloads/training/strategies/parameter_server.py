"""Strategy ``parameter_server``: variables on parameter-server tasks, in the three ways
its ``--variable-update`` names (tf_cnn_benchmarks' names for the first two):

* ``parameter_server`` (default): synchronous; every step the mean of all workers'
  gradients is applied once on the parameter servers (``sync_ps``);
* ``distributed_replicated``: synchronous; every worker trains a local replica, the
  gradients are aggregated on the parameter servers and the result copied back
  (``sync_ps``);
* ``ps_async``: tf.distribute's ParameterServerStrategy: a coordinator (the chief task)
  schedules asynchronous steps on the workers, each applying its own gradients.

Synchronous runs are a TF cluster of workers and parameter servers (worker 0 writes the
record); on Slurm one srun step whose first ``processes_per_node`` tasks of each node are
workers and the rest parameter servers, beside the workers (``--overcommit``) or, with
``tuning.ps_placement: separate``, on nodes of their own.
"""

from __future__ import annotations

from archbench.workloads.launch import LaunchError, srun_argv
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import Launch, Strategy
from archbench.workloads.training.strategies.tfdistribute import tf_cluster_launch
from archbench.workloads.training.tensorflow.cluster import planned_task_type, tf_task_rank

ASYNC = "ps_async"


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
    # tasks are its workers (tensorflow.cluster.slurm_tf_config); the others parameter servers
    argv = srun_argv(nodes=plan.nodes + plan.ps_nodes, tasks=plan.ranks + servers,
                     cpus_per_task=plan.cpus_per_process)
    if not plan.ps_nodes:  # the parameter servers share the workers' cores
        argv.append("--overcommit")
    return argv + list(plan.worker)


STRATEGY = Strategy(launch=launch, launch_rank=tf_task_rank,
                    parameter_servers=True, variable_updates=("parameter_server", "distributed_replicated", ASYNC),
                    cpu_only_updates=(ASYNC,), trains=trains,
                    help="variables on parameter servers: synchronous (--variable-update "
                         "parameter_server, distributed_replicated) or ps_async "
                         "(tf.distribute ParameterServerStrategy, a chief)",
                    label="parameter servers")
