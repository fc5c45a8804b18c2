"""Multi-process training: Horovod (MPI or Gloo) and TensorFlow's MultiWorkerMirrored and
ParameterServer strategies, and the launchers that start them.

A *backend* hides the strategy from the training loop of ``archbench.train``: it builds
the compiled step, feeds each worker its shard of the data, synchronises the workers at
the edges of the measured window and combines per-worker values. Throughput follows
DESIGN.md: images processed by ALL workers in the window / the window's wall time, where
the window starts after a barrier and ends after a barrier, and its length is the
maximum over workers.

Launching (``launcher_argv``), by the system's ``launcher``:

* Horovod: ``mpirun`` (launcher local|mpirun; ``horovodrun --gloo`` for the Gloo
  controller, one node) or ``srun`` (launcher srun).
* TF strategies: ``srun`` (the cluster comes from the Slurm environment), or locally
  ``python -m archbench.distributed spawn`` which starts one process per task on free
  127.0.0.1 ports with a TF_CONFIG each::

    python -m archbench.distributed spawn --workers 2 --ps 1 -- -m archbench.train ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

STRATEGIES = ("single", "horovod", "mirrored", "parameter_server")
TF_STRATEGIES = ("mirrored", "parameter_server")
RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "SLURM_LOCALID")
SERVER_GRACE_S = 10  # servers left after the chief finished are stopped after this


class LaunchError(ValueError):
    """A configuration that the chosen launcher cannot start."""


# ---------------------------------------------------------------- process identity

def tf_config() -> dict:
    """The parsed TF_CONFIG of this process ({} when unset)."""
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def launch_rank(strategy: str = "single") -> int:
    """This process's rank as its launcher set it, before any framework initialises.

    TF strategies: 0 for the task that writes the record (the chief, or worker 0 when the
    cluster has no chief), 1 for every other task. Otherwise the MPI/Slurm rank.
    """
    if strategy in TF_STRATEGIES:
        config = tf_config()
        if config:
            task = config.get("task", {})
            has_chief = "chief" in config.get("cluster", {})
            chief = task.get("type") == "chief" or (not has_chief and task.get("type") == "worker"
                                                    and int(task.get("index", 0)) == 0)
            return 0 if chief else 1
        return int(os.environ.get("SLURM_PROCID", 0))
    if strategy == "single":
        return 0
    for name in RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def local_rank() -> int:
    """This process's index among the processes of its node (0 when not launched)."""
    for name in LOCAL_RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def pin_cores(cores: int, index: int = 0) -> list[int]:
    """Restrict this process to ``cores`` CPUs: block ``index`` of the CPUs it may use.

    Call before TensorFlow starts its thread pools. Returns the CPUs chosen.
    """
    allowed = sorted(os.sched_getaffinity(0))
    chosen = allowed[index * cores:(index + 1) * cores]
    if len(chosen) < cores:
        raise ValueError(f"--cores {cores} (block {index}) needs more than the "
                         f"{len(allowed)} CPUs this process may use")
    os.sched_setaffinity(0, chosen)
    return chosen


def _hostname(address: str) -> str:
    host = address.rsplit(":", 1)[0]
    return socket.gethostname() if host in ("127.0.0.1", "localhost", "::1") else host


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------- backends

class Backend:
    """One process, no communication (strategy ``single``)."""

    name = "single"

    def __init__(self, tf, args: argparse.Namespace):
        self.tf = tf
        self.args = args
        self.rank, self.size = 0, 1

    @property
    def is_writer(self) -> bool:
        """True for the one process that writes the record."""
        return self.rank == 0

    @property
    def workers(self) -> int:
        """Training workers (processes that compute gradients)."""
        return self.size

    def layout(self) -> tuple[int, int]:
        """(nodes, processes per node) of the run; ``--nodes``/``--processes-per-node`` win."""
        nodes = self.args.nodes or max(1, len(self.hosts()))
        ppn = self.args.processes_per_node or max(1, self.workers // nodes)
        if nodes * ppn != self.workers:
            raise LaunchError(f"{self.workers} workers started, but nodes x processes per node "
                              f"= {nodes} x {ppn}")
        return nodes, ppn

    def scope(self):
        """Context in which the model and optimizer are created."""
        return contextlib.nullcontext()

    def make_step(self, model, optimizer, loss_fn: Callable) -> Callable:
        """Compiled step(images, labels) -> loss: forward, backward, update."""
        tf = self.tf

        @tf.function
        def step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            grads = self.gradients(tape, loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step

    def gradients(self, tape, loss, variables):
        """Gradients of ``loss`` (averaged over workers where they are combined)."""
        return tape.gradient(loss, variables)

    def batches(self, dataset_fn: Callable[[int, int], Any]) -> Iterator:
        """Iterator over this worker's batches; ``dataset_fn(shard, shards)`` -> tf.data."""
        return iter(dataset_fn(self.rank, self.size))

    def start(self, model) -> None:
        """Called once the model exists, before the first step (e.g. broadcast weights)."""

    def barrier(self) -> None:
        """Return when every worker has reached this point."""

    def gather(self, values: Sequence[float]) -> list[list[float]]:
        """Every worker's ``values`` (same length everywhere), one row per worker."""
        return [list(map(float, values))]

    def hosts(self) -> list[str]:
        """Hosts of all workers, in rank order, each once."""
        return [socket.gethostname()]

    def window(self, step: Callable, batches: Iterator, warmup: int, steps: int,
               batch_size: int) -> tuple[list[float], list[float], float, int]:
        """Warm-up, then the measured window between two barriers.

        Returns (this worker's step times, its losses, window wall time = max over
        workers, images processed by all workers in the window).
        """
        for _ in range(warmup):
            float(step(*next(batches)))
        self.barrier()
        times, losses = [], []
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            losses.append(float(step(*next(batches))))
            times.append(time.perf_counter() - t0)
        self.barrier()
        wall = time.perf_counter() - start
        rows = self.gather([wall, batch_size * steps])
        return times, losses, max(r[0] for r in rows), int(sum(r[1] for r in rows))

    def weight_spread(self, model) -> float | None:
        """Largest difference between workers of per-variable checksums (sum and sum of
        absolute values, in float64) of the trainable weights: 0 when replicas agree;
        None when there are no replicas to compare."""
        if self.workers < 2:
            return None
        tf = self.tf
        sums = []
        for v in model.trainable_variables:
            w = tf.cast(tf.convert_to_tensor(v), tf.float64)
            sums += [float(tf.reduce_sum(w)), float(tf.reduce_sum(tf.abs(w)))]
        rows = self.gather(sums)
        return max((max(col) - min(col) for col in zip(*rows)), default=0.0)

    def metrics(self, model) -> dict:
        """Strategy-specific record metrics."""
        return {}


class HorovodBackend(Backend):
    """Horovod data parallelism: gradients averaged by allreduce (MPI or Gloo)."""

    name = "horovod"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        if args.horovod_cycle_time is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = f"{args.horovod_cycle_time:g}"
        if args.horovod_fusion_threshold is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(args.horovod_fusion_threshold)
        import horovod.tensorflow as hvd
        hvd.init()
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._hosts = _unique(hvd.allgather_object(socket.gethostname()))

    def layout(self) -> tuple[int, int]:
        if self.args.nodes is None and self.args.processes_per_node is None:
            return self.hvd.cross_size(), self.hvd.local_size()
        return super().layout()

    def gradients(self, tape, loss, variables):
        return self.hvd.DistributedGradientTape(tape).gradient(loss, variables)

    def start(self, model) -> None:
        self.hvd.broadcast_variables(model.variables, root_rank=0)

    def barrier(self) -> None:
        self.hvd.allreduce(self.tf.constant(0.0), op=self.hvd.Sum, name="archbench_barrier")

    def gather(self, values):
        row = self.tf.constant([list(map(float, values))], dtype=self.tf.float64)
        return self.hvd.allgather(row).numpy().tolist()

    def hosts(self) -> list[str]:
        return self._hosts

    def metrics(self, model) -> dict:
        variables = model.trainable_variables
        out = {
            "horovod_controller": {"value": "gloo" if self.hvd.gloo_enabled() else "mpi", "unit": ""},
            "allreduce_tensors": {"value": len(variables), "unit": "tensors/step"},
            "allreduce_bytes": {"value": int(sum(v.shape.num_elements() * v.dtype.size
                                                 for v in variables)), "unit": "B/step"},
        }
        if self.args.horovod_cycle_time is not None:
            out["horovod_cycle_time"] = {"value": self.args.horovod_cycle_time, "unit": "ms"}
        if self.args.horovod_fusion_threshold is not None:
            out["horovod_fusion_threshold"] = {"value": self.args.horovod_fusion_threshold,
                                               "unit": "B"}
        return out


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


def slurm_tf_config(jobs: dict[str, int]) -> dict:
    """TF_CONFIG of this task of a Slurm job step whose tasks form a cluster of ``jobs``.

    Tasks are numbered by SLURM_PROCID over the step's nodes in order (block
    distribution) and assigned to the jobs in sorted name order (chief, ps, worker), as
    TensorFlow's SlurmClusterResolver does. Unlike that resolver (which divides GPUs among
    tasks and fails with "range() arg 3 must not be zero" on nodes without GPUs, and gives
    tasks on different nodes the same port), every task gets its own port: a base derived
    from the job id plus the task number, so tasks never collide, not even when several
    Slurm nodes share one host.
    """
    from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import (
        expand_hostlist, expand_tasks_per_node)
    hosts = [node_address(h) for h in expand_hostlist(os.environ["SLURM_STEP_NODELIST"])]
    counts = expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    base = 20000 + (int(os.environ.get("SLURM_JOB_ID") or 0) * 13) % 20000
    places = [host for host, n in zip(hosts, counts) for _ in range(n)]
    if sum(jobs.values()) != len(places):
        raise LaunchError(f"the job step has {len(places)} tasks, the cluster needs "
                          f"{sum(jobs.values())}")
    rank = int(os.environ["SLURM_PROCID"])
    cluster, task, start = {}, {}, 0
    for job in sorted(jobs):
        cluster[job] = [f"{host}:{base + start + i}"
                        for i, host in enumerate(places[start:start + jobs[job]])]
        if start <= rank < start + jobs[job]:
            task = {"type": job, "index": rank - start}
        start += jobs[job]
    return {"cluster": cluster, "task": task}


def cluster_resolver(strategy: str, parameter_servers: int = 0):
    """The cluster of a TF-strategy run: TF_CONFIG when set, else the Slurm job step, else
    a one-worker cluster (mirrored only)."""
    import tensorflow as tf
    if os.environ.get("TF_CONFIG"):
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    ntasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or 0)
    if "SLURM_PROCID" in os.environ and ntasks > 1:
        if strategy == "parameter_server":
            workers = ntasks - 1 - parameter_servers
            if workers < 1:
                raise LaunchError(f"{ntasks} Slurm tasks cannot hold a chief, "
                                  f"{parameter_servers} parameter servers and a worker")
            jobs = {"chief": 1, "ps": parameter_servers, "worker": workers}
        else:
            jobs = {"worker": ntasks}
        os.environ["TF_CONFIG"] = json.dumps(slurm_tf_config(jobs))
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if strategy == "parameter_server":
        raise LaunchError("parameter_server needs a cluster: TF_CONFIG (python -m "
                          "archbench.distributed spawn) or a Slurm job step (srun)")
    return None


class MirroredBackend(Backend):
    """MultiWorkerMirroredStrategy: synchronous all-reduce across worker processes."""

    name = "mirrored"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        resolver = cluster_resolver("mirrored")
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
        resolver = self.strategy.cluster_resolver
        spec = resolver.cluster_spec().as_dict() if resolver else {}
        self._addresses = spec.get("worker", [])
        self.size = max(1, len(self._addresses))
        self.rank = int(resolver.task_id or 0) if resolver and spec else 0
        self.global_batch = args.batch_size * self.size

    def hosts(self) -> list[str]:
        return _unique([_hostname(a) for a in self._addresses]) or [socket.gethostname()]

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

    def gather(self, values):
        tf, strategy = self.tf, self.strategy
        values = list(map(float, values))
        onehot = [[v if i == self.rank else 0.0 for v in values] for i in range(self.size)]

        local = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(onehot, dtype=tf.float64))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None).numpy().tolist()

    def barrier(self) -> None:
        self.gather([0.0])


def per_example_loss(loss_fn):
    """The unreduced (per example) version of a Keras loss."""
    from archbench.models import keras
    config = {**loss_fn.get_config(), "reduction": keras().losses.Reduction.NONE}
    return type(loss_fn).from_config(config)


class ParameterServerBackend(Backend):
    """ParameterServerStrategy: variables on parameter servers, asynchronous workers
    driven by this process (the coordinator/chief). Other tasks serve and never return."""

    name = "parameter_server"

    def __init__(self, tf, args: argparse.Namespace):
        super().__init__(tf, args)
        resolver = cluster_resolver("parameter_server", args.parameter_servers)
        spec = resolver.cluster_spec()
        task_type, task_id = resolver.task_type, resolver.task_id
        if task_type in ("worker", "ps"):
            serve(tf, spec, task_type, int(task_id), args.intra_threads, args.inter_threads)
        if len(spec.as_dict().get("ps", [])) != args.parameter_servers:
            raise LaunchError(f"cluster has {len(spec.as_dict().get('ps', []))} parameter "
                              f"servers, --parameter-servers says {args.parameter_servers}")
        self._spec = spec.as_dict()
        self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        self.size = len(self._spec.get("worker", []))

    def hosts(self) -> list[str]:
        order = self._spec.get("chief", []) + self._spec.get("worker", []) + self._spec.get("ps", [])
        return _unique([_hostname(a) for a in order])

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

    def window(self, step, batches, warmup, steps, batch_size):
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


def serve(tf, spec, task_type: str, task_id: int, intra: int, inter: int) -> None:
    """Run this task's tf.distribute.Server until terminated; SIGTERM exits with status 0
    (the launcher stops servers once the chief is done). Never returns."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # A worker with ONE inter-op thread deadlocks on the first remote step (its receive
    # from the parameter server blocks the only thread): servers get at least two.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra,
                                      inter_op_parallelism_threads=max(inter, 2) if inter else 0)
    server = tf.distribute.Server(spec, job_name=task_type, task_index=task_id,
                                  protocol="grpc", config=config, start=True)
    print(f"archbench.train: {task_type}:{task_id} serving", flush=True)
    # server.join() blocks in C++ where Python signal handlers cannot run: join in a
    # thread and keep the main thread interruptible.
    import threading
    threading.Thread(target=server.join, daemon=True).start()
    while True:
        time.sleep(3600)


BACKENDS = {"single": Backend, "horovod": HorovodBackend, "mirrored": MirroredBackend,
            "parameter_server": ParameterServerBackend}


def make_backend(tf, args: argparse.Namespace) -> Backend:
    """The backend of ``args.strategy`` (initialises Horovod or the TF cluster)."""
    return BACKENDS[args.strategy](tf, args)


# ---------------------------------------------------------------- launchers

def _tuning(m: dict) -> dict:
    return m.get("tuning") or {}


def controller(m: dict) -> str:
    """Horovod controller of a measurement: mpi (default) or gloo (``tuning``)."""
    return _tuning(m).get("horovod_controller", "mpi")


def parameter_servers(m: dict) -> int:
    """Parameter servers of a measurement (``tuning.parameter_servers``, default 1)."""
    return int(_tuning(m).get("parameter_servers", 1))


def cpus_per_process(m: dict, system: dict) -> int:
    """Cores each process of a node gets: cores per node // processes per node (>= 1)."""
    cores = system.get("sockets", 1) * system.get("cores_per_socket", os.cpu_count() or 1)
    if not isinstance(cores, int):
        cores = os.cpu_count() or 1
    return max(1, cores // m["processes_per_node"])


def horovodrun() -> str:
    """horovodrun next to this interpreter (a venv), else from PATH."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else (shutil.which("horovodrun") or "horovodrun")


def _mpirun_env(m: dict) -> list[str]:
    env = {"TF_USE_LEGACY_KERAS": "1", **{k: str(v) for k, v in (m.get("env") or {}).items()}}
    out = []
    for name, value in env.items():
        out += ["-x", f"{name}={value}"]
    for name in ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV"):
        if name in os.environ and name not in env:
            out += ["-x", name]
    return out


def launcher_argv(m: dict, system: dict, worker: list[str]) -> list[str]:
    """Full argv of measurement ``m`` on ``system``: launcher + ``worker`` (the worker's
    argv, starting with the interpreter)."""
    strategy = m.get("strategy", "single")
    launcher = system.get("launcher", "local")
    nodes, ppn = int(m.get("nodes", 1)), int(m.get("processes_per_node", 1))
    ranks = nodes * ppn
    if strategy == "single":
        if ranks != 1:
            raise LaunchError(f"strategy single runs one process, not {nodes} x {ppn}")
        return worker
    if launcher == "local" and nodes > 1:
        raise LaunchError(f"launcher local runs on one node, not {nodes}")
    cpus = cpus_per_process(m, system)
    if strategy == "horovod":
        if controller(m) == "gloo":
            if nodes > 1 or launcher == "srun":
                raise LaunchError("the Gloo controller is launched with horovodrun on one node; "
                                  "use the MPI controller for several nodes or srun")
            return [horovodrun(), "--gloo", "-np", str(ranks), "-H", f"localhost:{ranks}",
                    *worker]
        if launcher == "srun":
            # MPI ranks started by srun find each other through PMIx unless the system
            # names another plugin (SLURM_MPI_TYPE in its env, which srun reads)
            mpi = [] if "SLURM_MPI_TYPE" in {**os.environ, **(m.get("env") or {})} else ["--mpi=pmix"]
            return _srun(nodes, ranks, cpus, ppn) + mpi + worker
        argv = ["mpirun"]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        argv += ["-np", str(ranks)]
        if launcher == "local":
            argv += ["--oversubscribe", "--bind-to", "none"]
        else:
            argv += ["--map-by", f"ppr:{ppn}:node:PE={cpus}", "--bind-to", "core"]
        return argv + _mpirun_env(m) + worker
    if strategy in TF_STRATEGIES:
        ps = parameter_servers(m) if strategy == "parameter_server" else 0
        coordinator = 1 if strategy == "parameter_server" else 0
        if launcher == "srun":
            argv = _srun(nodes, ranks + ps + coordinator, cpus, None)
            if coordinator:  # chief and parameter servers share the workers' cores; the
                # servers never exit on their own: stop them once the chief is done
                argv += ["--overcommit", f"--wait={SERVER_GRACE_S}"]
            return argv + worker
        if nodes > 1:
            raise LaunchError(f"{strategy} on several nodes needs launcher srun "
                              "(the cluster comes from the Slurm job step)")
        at = worker.index(sys.executable) if sys.executable in worker else 0
        return (worker[:at + 1] + ["-m", "archbench.distributed", "spawn", "--workers",
                                   str(ranks), "--ps", str(ps)]
                + (["--chief"] if coordinator else []) + ["--"] + worker[at + 1:])
    raise LaunchError(f"unknown strategy '{strategy}'")


def _srun(nodes: int, tasks: int, cpus: int, ppn: int | None) -> list[str]:
    argv = ["srun", f"--nodes={nodes}", f"--ntasks={tasks}", f"--cpus-per-task={cpus}",
            "--export=ALL", "--kill-on-bad-exit=1"]  # binding: the site's TaskPlugin defaults or SLURM_CPU_BIND
    if ppn is not None:
        argv.insert(3, f"--ntasks-per-node={ppn}")
    return argv


# ---------------------------------------------------------------- local spawner

def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (bound and released)."""
    sockets, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


def local_cluster(workers: int, ps: int = 0, chief: bool = False) -> dict[str, list[str]]:
    """A cluster spec of local tasks on free ports."""
    ports = iter(free_ports(workers + ps + int(chief)))
    cluster = {}
    if chief:
        cluster["chief"] = [f"127.0.0.1:{next(ports)}"]
    cluster["worker"] = [f"127.0.0.1:{next(ports)}" for _ in range(workers)]
    if ps:
        cluster["ps"] = [f"127.0.0.1:{next(ports)}" for _ in range(ps)]
    return cluster


def spawn(workers: int, ps: int, chief: bool, argv: list[str], grace_s: float = SERVER_GRACE_S) -> int:
    """Run one local process per task of a TF cluster (``sys.executable`` + ``argv``, each
    with its TF_CONFIG) and return the exit status.

    The run is over when the chief (parameter servers) or every worker (mirrored) has
    exited; remaining servers get SIGTERM. A main task failing stops all tasks.
    """
    cluster = local_cluster(workers, ps, chief)
    procs: dict[tuple[str, int], subprocess.Popen] = {}
    for task_type, addresses in cluster.items():
        for index in range(len(addresses)):
            env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": task_type, "index": index}})}
            procs[(task_type, index)] = subprocess.Popen([sys.executable, *argv], env=env)
    main_tasks = [k for k in procs if k[0] == ("chief" if chief else "worker")]
    code = 0

    def on_term(signum, _frame):  # the spawner is stopped (e.g. timeout): stop the tasks
        _stop([p for p in procs.values() if p.poll() is None], 2)
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        while True:
            done = {k: p.poll() for k, p in procs.items()}
            failed = [k for k, c in done.items() if c not in (None, 0)]
            if failed:
                code = done[failed[0]]
                print(f"archbench.distributed: task {failed[0][0]}:{failed[0][1]} exited with "
                      f"{code}; stopping the others", file=sys.stderr, flush=True)
                break
            if all(done[k] == 0 for k in main_tasks):
                break
            time.sleep(0.2)
    finally:
        _stop([p for p in procs.values() if p.poll() is None], grace_s)
    return code if code >= 0 else 128 - code


def _stop(procs: list[subprocess.Popen], grace_s: float) -> None:
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``spawn`` starts a local TF cluster running ``sys.executable ARGS...``."""
    p = argparse.ArgumentParser(prog="python -m archbench.distributed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spawn", help="run a local TF cluster (TF_CONFIG per process)")
    s.add_argument("--workers", type=int, required=True)
    s.add_argument("--ps", type=int, default=0, help="parameter servers")
    s.add_argument("--chief", action="store_true", help="add a chief (the PS coordinator)")
    s.add_argument("args", nargs=argparse.REMAINDER, help="-- then the interpreter's arguments")
    args = p.parse_args(argv)
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    if args.workers < 1 or args.ps < 0 or not rest:
        p.error("need --workers >= 1, --ps >= 0 and the command after --")
    return spawn(args.workers, args.ps, args.chief, rest)


if __name__ == "__main__":
    sys.exit(main())
