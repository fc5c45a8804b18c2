"""A TensorFlow cluster as one of its tasks sees it: TF_CONFIG (set by the local spawner,
``archbench.workloads.spawn``, or built here from the Slurm job step), the task that
writes the record, the cluster resolver of the tf.distribute strategies, and serving as a
non-chief task. Only :func:`cluster_resolver` imports TensorFlow (when called); the
framework-neutral launch helpers are :mod:`archbench.workloads.launch`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from archbench.core.net import reachable
from archbench.workloads import launch
from archbench.workloads.launch import LaunchError


def tf_config() -> dict:
    """The parsed TF_CONFIG of this process ({} when unset)."""
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def tf_task_rank() -> int:
    """This task's rank in a TF cluster, before TensorFlow starts: 0 for the task that writes
    the record (the chief, or worker 0 when the cluster has no chief), 1 for every other
    task; without TF_CONFIG, the Slurm task number."""
    config = tf_config()
    if not config:
        return int(os.environ.get("SLURM_PROCID", 0))
    task = config.get("task", {})
    has_chief = "chief" in config.get("cluster", {})
    chief = task.get("type") == "chief" or (not has_chief and task.get("type") == "worker"
                                            and int(task.get("index", 0)) == 0)
    return 0 if chief else 1


def slurm_tf_config(jobs: dict[str, int], *, workers_per_node: int | None = None) -> dict:
    """TF_CONFIG of this task of a Slurm job step whose tasks form a cluster of ``jobs``.

    Tasks are numbered by SLURM_PROCID over the step's nodes in order (block
    distribution) and assigned to the jobs in sorted name order (chief, ps, worker), as
    TensorFlow's SlurmClusterResolver does; with ``workers_per_node``, by node instead
    (:func:`_roles_by_node`: worker 0 is task 0, the one that writes the record). Unlike
    that resolver (which divides GPUs among tasks and fails with "range() arg 3 must not
    be zero" on nodes without GPUs, and gives tasks on different nodes the same port),
    every task gets its own port (:func:`archbench.workloads.launch.task_addresses`).
    """
    nodes = launch.task_nodes()
    places = launch.task_addresses(nodes)
    if sum(jobs.values()) != len(places):
        raise LaunchError(f"the job step has {len(places)} tasks, the cluster needs "
                          f"{sum(jobs.values())}")
    rank = int(os.environ["SLURM_PROCID"])
    roles = (_roles_by_node(nodes, jobs, workers_per_node) if workers_per_node
             else [job for job in sorted(jobs) for _ in range(jobs[job])])
    cluster: dict[str, list[str]] = {job: [] for job in sorted(jobs)}
    task = {}
    for number, (job, address) in enumerate(zip(roles, places)):
        if number == rank:
            task = {"type": job, "index": len(cluster[job])}
        cluster[job].append(address)
    return {"cluster": cluster, "task": task}


def _roles_by_node(nodes: list[str], jobs: dict[str, int], workers_per_node: int) -> list[str]:
    """The job of each task: the first ``workers_per_node`` tasks of each node are workers
    until there are ``jobs["worker"]``, every other task is a parameter server. So workers
    spread one (or ``workers_per_node``) per node whatever the task distribution, and
    parameter servers take the remaining slots: beside the workers, or nodes of their own."""
    roles, on_node = [], {}
    workers = 0
    for node in nodes:
        on_node[node] = on_node.get(node, 0) + 1
        if on_node[node] <= workers_per_node and workers < jobs.get("worker", 0):
            roles.append("worker")
            workers += 1
        else:
            roles.append("ps")
    if workers != jobs.get("worker", 0) or len(roles) - workers != jobs.get("ps", 0):
        raise LaunchError(f"the job step's tasks per node ({os.environ.get('SLURM_STEP_TASKS_PER_NODE')}) "
                          f"cannot hold {jobs.get('worker', 0)} workers, {workers_per_node} per "
                          f"node, and {jobs.get('ps', 0)} parameter servers")
    return roles


def _slurm_jobs(ntasks: int, chief: bool, parameter_servers: int) -> dict[str, int]:
    """The jobs of a Slurm step of ``ntasks`` tasks: a chief if ``chief``, the parameter
    servers, the rest workers (jobs of no task left out)."""
    workers = ntasks - int(chief) - parameter_servers
    if workers < 1:
        raise LaunchError(f"{ntasks} Slurm tasks cannot hold {'a chief, ' if chief else ''}"
                          f"{parameter_servers} parameter servers and a worker")
    jobs = {"chief": int(chief), "ps": parameter_servers, "worker": workers}
    return {k: n for k, n in jobs.items() if n}


def planned_task_type(*, chief: bool = False, parameter_servers: int = 0,
                      workers_per_node: int | None = None) -> str:
    """This task's job (worker, ps, chief) before TensorFlow starts, as
    :func:`cluster_resolver` will see it: TF_CONFIG's, else the Slurm job step's, else
    worker (one local process)."""
    config = tf_config()
    if config:
        return config.get("task", {}).get("type", "worker")
    ntasks = launch.step_tasks()
    if ntasks:
        config = slurm_tf_config(_slurm_jobs(ntasks, chief, parameter_servers),
                                 workers_per_node=workers_per_node)
        return config["task"].get("type", "worker")
    return "worker"


def cluster_resolver(*, chief: bool = False, parameter_servers: int = 0,
                     workers_per_node: int | None = None):
    """The TF cluster of this run: TF_CONFIG when set, else the Slurm job step (a chief if
    ``chief``, ``parameter_servers`` ps tasks, the other tasks workers; placed by node
    with ``workers_per_node``, see :func:`slurm_tf_config`), else None: one local
    worker, which only a cluster without chief and parameter servers can be."""
    import tensorflow as tf
    if os.environ.get("TF_CONFIG"):
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    ntasks = launch.step_tasks()
    if ntasks:
        os.environ["TF_CONFIG"] = json.dumps(slurm_tf_config(
            _slurm_jobs(ntasks, chief, parameter_servers), workers_per_node=workers_per_node))
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if chief or parameter_servers:
        raise LaunchError("a cluster with a chief or parameter servers needs TF_CONFIG "
                          "(python -m archbench.workloads.spawn spawn) or a Slurm job step (srun)")
    return None


def serve(tf, spec, *, task_type: str, task_id: int, intra: int, inter: int) -> None:
    """Run this task's tf.distribute.Server until the chief (worker 0 in a cluster without
    chief), once seen listening, stops listening (its run is over) or SIGTERM arrives; both
    exit with status 0. Never returns."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # A worker with ONE inter-op thread deadlocks on the first remote step (its receive
    # from the parameter server blocks the only thread): servers get at least two.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra,
                                      inter_op_parallelism_threads=max(inter, 2) if inter else 0)
    server = tf.distribute.Server(spec, job_name=task_type, task_index=task_id,
                                  protocol="grpc", config=config, start=True)
    print(f"archbench.train: {task_type}:{task_id} serving", flush=True)
    # server.join() blocks in C++ where Python signal handlers cannot run: join in a
    # thread and keep the main thread interruptible; leave once the chief has gone.
    threading.Thread(target=server.join, daemon=True).start()
    jobs = spec.as_dict()
    chief = (jobs.get("chief") or jobs.get("worker") or [None])[0]
    seen = False
    while True:
        time.sleep(1)
        if chief is None:
            continue
        up = reachable(chief)
        if seen and not up:
            print(f"archbench.train: {task_type}:{task_id} stops: the chief has finished",
                  flush=True)
            os._exit(0)
        seen = seen or up
