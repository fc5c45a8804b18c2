"""What the tf.distribute strategies share: how their TF cluster is started (``srun``, or
locally ``python -m archbench.workloads.spawn spawn``, one process per task with its TF_CONFIG),
and the per-example loss their replica steps reduce themselves.
"""

from __future__ import annotations

from archbench.workloads.launch import LaunchError, srun_argv
from archbench.workloads.spawn import SERVER_GRACE_S, spawn_argv
from archbench.workloads.training.strategies.base import Launch


def tf_cluster_launch(plan: Launch, *, chief: bool = False, parameter_servers: int = 0) -> list[str]:
    """argv starting a TF cluster of ``plan.ranks`` workers, a chief if ``chief`` and
    ``parameter_servers`` ps tasks: srun on a Slurm system (the tasks find the cluster from
    the job step), else the local spawner (one node)."""
    plan.require_one_node_if_local()
    worker = list(plan.worker)
    if plan.launcher == "srun":
        argv = srun_argv(nodes=plan.nodes, tasks=plan.ranks + parameter_servers + int(chief),
                         cpus_per_task=plan.cpus_per_process)
        if chief:  # chief and parameter servers share the workers' cores; the servers
            # never exit on their own: stop them once the chief is done
            argv += ["--overcommit", f"--wait={SERVER_GRACE_S}"]
        return argv + worker
    if plan.nodes > 1:
        raise LaunchError(f"a TF cluster on {plan.nodes} nodes needs launcher srun "
                          "(the cluster comes from the Slurm job step)")
    return spawn_argv(worker, workers=plan.ranks, ps=parameter_servers, chief=chief)
