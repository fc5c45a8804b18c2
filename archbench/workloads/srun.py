"""What a Slurm job step tells its tasks, and the one ``srun`` command line archbench uses.

Ports: task i of a job listens on :func:`port_base` + i, a base derived from the job id
below Linux's ephemeral range, so tasks never collide, not even when several Slurm nodes
share one host.
"""

from __future__ import annotations

import os
import socket
import subprocess

PORT_LOW, PORT_SPAN = 20000, 12000  # 20000-31999, below the ephemeral range 32768-60999


def step_tasks() -> int:
    """Tasks of the current Slurm step, or 0 outside a multi-task step.

    A batch script also has SLURM_JOB_ID and SLURM_PROCID=0, so a single task counts as
    "not a Slurm cluster".
    """
    if "SLURM_JOB_ID" not in os.environ or "SLURM_PROCID" not in os.environ:
        return 0
    tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or 1)
    return tasks if tasks > 1 else 0


def task_nodes() -> list[str]:
    """The node of each task of this Slurm job step, by task number (block distribution)."""
    from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import (
        expand_hostlist,
        expand_tasks_per_node,
    )
    nodes = expand_hostlist(os.environ["SLURM_STEP_NODELIST"])
    counts = expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    return [node for node, n in zip(nodes, counts) for _ in range(n)]


def port_base() -> int:
    """First TCP port of this job's tasks: ARCHBENCH_PORT_BASE, else from the job id."""
    if os.environ.get("ARCHBENCH_PORT_BASE"):
        return int(os.environ["ARCHBENCH_PORT_BASE"])
    return PORT_LOW + (int(os.environ.get("SLURM_JOB_ID") or 0) * 13) % PORT_SPAN


def node_address(node: str) -> str:
    """A Slurm node name as a reachable address: the name when it resolves, else the
    node's NodeAddr from scontrol (nodes named apart from their hosts)."""
    try:
        socket.getaddrinfo(node, None)
        return node
    except OSError:
        pass
    try:
        out = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return node
    for field in out.split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1] or node
    return node


def srun_argv(*, nodes: int, tasks: int, cpus_per_task: int,
              tasks_per_node: int | None = None) -> list[str]:
    """``srun`` starting ``tasks`` tasks over ``nodes`` nodes in block order (task i on the
    node its number falls in), each with ``cpus_per_task`` CPUs; one failed task ends the
    step. CPU binding: the site's TaskPlugin defaults, or SLURM_CPU_BIND.

    A one-task step gets ``--overlap`` (Slurm >= 20.11): a one-task job runs inside the
    executor plugin's own ``srun -n1`` step, which holds the job's CPUs; without sharing
    them the inner step would wait forever (a one-rank Horovod run, say)."""
    argv = ["srun", f"--nodes={nodes}", f"--ntasks={tasks}", *(["--overlap"] if tasks == 1 else [])]
    if tasks_per_node is not None:
        argv.append(f"--ntasks-per-node={tasks_per_node}")
    return argv + [f"--cpus-per-task={cpus_per_task}", "--distribution=block", "--export=ALL",
                   "--kill-on-bad-exit=1"]
