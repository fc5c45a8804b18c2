"""How a process of a multi-process run was launched, whatever its framework: its rank,
its local rank and the run's size as MPI or Slurm set them, what a Slurm job step tells
its tasks (the node and the address of each), and the one ``srun`` command line archbench
uses. It imports no framework: the launchers, the planner and every framework's backends
read it. (A TensorFlow cluster built from the job step is TensorFlow's:
:mod:`archbench.workloads.training.tensorflow.cluster`.)

Ports: task i of a job listens on :func:`port_base` + i, a base derived from the job id
below Linux's ephemeral range, so tasks never collide, not even when several Slurm nodes
share one host.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import subprocess

RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("ARCHBENCH_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "SLURM_LOCALID")
SIZE_VARIABLES = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
                  "SLURM_NTASKS")

PORT_LOW, PORT_SPAN = 20000, 12000  # 20000-31999, below the ephemeral range 32768-60999

# one name of a Slurm host list: text and bracketed ranges ("n[01-04,7]", "r[1-2]n[1-8]")
HOST_PATTERN = r"(?:[^,\[\]]|\[\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*\])+"


class LaunchError(ValueError):
    """A configuration that the chosen launcher cannot start."""


def process_rank() -> int:
    """This process's rank as MPI or Slurm set it (0 when not launched by either)."""
    return _first_number(RANK_VARIABLES, 0)


def process_count() -> int:
    """Processes of this run as MPI or Slurm counted them (1 when not launched by either)."""
    return _first_number(SIZE_VARIABLES, 1)


def local_rank() -> int:
    """This process's index among the processes of its node (0 when not launched)."""
    return _first_number(LOCAL_RANK_VARIABLES, 0)


def _first_number(names: tuple[str, ...], default: int) -> int:
    """The value of the first of ``names`` set to a number in the environment, else ``default``."""
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return default


def step_tasks() -> int:
    """Tasks of the current Slurm step, or 0 outside a multi-task step.

    A batch script also has SLURM_JOB_ID and SLURM_PROCID=0, so a single task counts as
    "not a Slurm cluster".
    """
    if "SLURM_JOB_ID" not in os.environ or "SLURM_PROCID" not in os.environ:
        return 0
    tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or 1)
    return tasks if tasks > 1 else 0


def hostnames(hostlist: str) -> list[str]:
    """The hosts of a Slurm host list, in order, as ``scontrol show hostnames`` prints them:
    "n[1-3,7],gpu[08-09]" -> n1 n2 n3 n7 gpu08 gpu09 (a range keeps its first bound's zero
    padding; a name with several brackets expands to their product). ValueError when
    ``hostlist`` is not one."""
    if not re.fullmatch(rf"{HOST_PATTERN}(?:,{HOST_PATTERN})*", hostlist):
        raise ValueError(f"not a Slurm host list: {hostlist!r}")
    hosts = []
    for name in re.findall(HOST_PATTERN, hostlist):
        pieces = re.split(r"\[([^\]]*)\]", name)  # text, ranges, text, ..., text
        choices = [_range_values(p) if i % 2 else [p] for i, p in enumerate(pieces)]
        hosts += ["".join(parts) for parts in itertools.product(*choices)]
    return hosts


def _range_values(ranges: str) -> list[str]:
    """The values of a host list's bracket: "1-3,07" -> 1 2 3 07."""
    values = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        values += [str(n).zfill(len(low)) for n in range(int(low), int(high or low) + 1)]
    return values


def _task_counts(counts: str) -> list[int]:
    """A Slurm tasks-per-node list, node by node: "2(x3),1" -> 2 2 2 1. ValueError when
    ``counts`` is not one."""
    found = []
    for part in counts.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if match is None:
            raise ValueError(f"not a Slurm tasks-per-node list: {counts!r}")
        found += [int(match[1])] * int(match[2] or 1)
    return found


def task_nodes() -> list[str]:
    """The node of each task of this Slurm job step, by task number (block distribution)."""
    nodes = hostnames(os.environ["SLURM_STEP_NODELIST"])
    counts = _task_counts(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    return [node for node, n in zip(nodes, counts) for _ in range(n)]


def task_addresses(nodes: list[str]) -> list[str]:
    """host:port of each task of this Slurm job step, by task number, the tasks on
    ``nodes`` (:func:`task_nodes`): its node's :func:`node_address` and its own port,
    :func:`port_base` plus the task number."""
    addresses = {node: node_address(node) for node in set(nodes)}
    base = port_base()
    return [f"{addresses[node]}:{base + number}" for number, node in enumerate(nodes)]


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
