"""Strategy ``ddp``: DistributedDataParallel, gradients averaged by allreduce over gloo
(CPUs) or NCCL (GPUs); the frameworks that run it say so in their registry entry.

Ranks are started by the same launchers as Horovod's (mpirun, or srun on a Slurm
system); each finds the others through a TCP store on rank 0's host (``env://``
rendezvous): under srun the first node of the job step at the job's port base
(:func:`archbench.workloads.launch.port_base`), under mpirun the host that runs mpirun (where
rank 0 is placed, first in the allocation) at a port free there when the command is built.
The framework's process group does not use MPI: mpirun only starts the processes.
"""

from __future__ import annotations

import os
import socket

from archbench.workloads.launch import hostnames, node_address, port_base, process_rank, srun_argv
from archbench.workloads.training.strategies.base import Launch, Strategy
from archbench.workloads.training.strategies.horovod import mpirun_env

ADDRESS = "ARCHBENCH_DDP_ADDRESS"  # host:port of the rendezvous, set by an mpirun launch


def free_port() -> int:
    """A TCP port free on this host now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def rendezvous() -> tuple[str, int]:
    """(host, port) of this run's TCP store, as a rank sees it: the mpirun launch's
    :data:`ADDRESS`, else under srun the first node of the job step at the job's port
    base, else this host at a free port (one process)."""
    if os.environ.get(ADDRESS):
        host, port = os.environ[ADDRESS].rsplit(":", 1)
        return host, int(port)
    nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if nodes and "SLURM_PROCID" in os.environ:
        return node_address(hostnames(nodes)[0]), port_base()
    return "127.0.0.1", free_port()


def launch(plan: Launch) -> list[str]:
    """srun, or mpirun with the rendezvous address, + the worker."""
    plan.require_one_node_if_local()
    worker = list(plan.worker)
    if plan.launcher == "srun":
        return srun_argv(nodes=plan.nodes, tasks=plan.ranks, cpus_per_task=plan.cpus_per_process,
                         tasks_per_node=plan.processes_per_node) + worker
    host = "127.0.0.1" if plan.launcher == "local" else socket.gethostname()
    argv = ["mpirun"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(plan.ranks)]
    if plan.launcher == "local":
        argv += ["--oversubscribe", "--bind-to", "none"]
    else:
        argv += ["--map-by", f"ppr:{plan.processes_per_node}:node:PE={plan.cpus_per_process}",
                 "--bind-to", "core"]
    env = {**plan.env, ADDRESS: f"{host}:{free_port()}"}
    return argv + mpirun_env(env) + worker


STRATEGY = Strategy(launch=launch, launch_rank=process_rank,
                    help="DistributedDataParallel (gloo on CPUs, NCCL on GPUs)", label="DDP")
