"""The worker cluster the kernels run on: TensorFlow servers in local processes or Slurm tasks.

The process that runs a kernel is worker 0 *and* the client: it builds the dataflow graph
and places each worker's ops with ``tf.device(cluster.devices[i])``; those ops execute in
worker i's own process (a ``tf.distribute.Server``), and tensors move between workers over
TensorFlow's gRPC runtime.

- One worker, not under a multi-task Slurm step: no server at all, ops run in this process.
- Local (``--workers N``): this process spawns N-1 servers on 127.0.0.1 free ports, server
  i with local rank i (``ARCHBENCH_LOCAL_RANK``).
- Slurm (``srun --ntasks=N python -m archbench.kernels ...``): every task runs the same
  command; the cluster comes from the job step (every task a worker on its node, at its own
  port: :func:`slurm_spec`); task 0 continues as the client, the other tasks serve and exit
  when task 0 is done.

Workers connect back to a plain TCP *control* socket on the client after their server is
up (the readiness signal) and exit when it closes, so no server outlives its client.

A GPU run (``device`` "gpu") gives every worker process one GPU, bound by its local rank
before TensorFlow loads (:func:`archbench.workloads.gpu.bind_gpu`); worker i's ops go to
``/job:worker/replica:0/task:i/device:GPU:0`` (in-process: ``/device:GPU:0``). Every
worker checks that TensorFlow sees its GPU before it serves; one that sees none reports
"no GPU visible to TensorFlow" over the control socket instead of its hello, and the
client fails the run with that reason once every worker has answered (so all of them are
released). A GPU run never falls back to the CPUs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import NoReturn, Sequence

from archbench.core.net import free_ports
from archbench.workloads import gpu, launch

LOCAL_CPU = "/device:CPU:0"
LOCAL_GPU = "/device:GPU:0"
STARTUP_TIMEOUT_S = 180.0


@dataclass(kw_only=True)
class Cluster:
    """Workers of one kernel run; ``devices[i]`` is the device worker i computes on (its
    GPU in a GPU run, else its CPU), ``host_devices[i]`` its CPU (host memory)."""

    workers: int
    devices: list[str]
    hosts: list[str]
    mode: str  # inprocess | local | slurm
    threads: int  # intra-op threads per worker
    device: str = "cpu"  # cpu | gpu
    host_devices: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)
    control: list[socket.socket] = field(default_factory=list)

    @property
    def nodes(self) -> int:
        """Distinct hosts the workers run on."""
        return len(set(self.hosts))

    @property
    def processes_per_node(self) -> int:
        """Workers per node (the most on any node)."""
        return max(self.hosts.count(h) for h in set(self.hosts))

    def close(self) -> None:
        """Release the workers: close the control connections and reap local servers."""
        for conn in self.control:
            conn.close()
        self.control.clear()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# XLA:CPU's classic runtime hands large fp32 dots to oneDNN's matmul (numpy sgemm speed);
# the thunk runtime, the default in TF 2.18, does not (about half the speed on 2 x86
# cores). The kernels compile their hot loops with XLA.
XLA_CLASSIC_RUNTIME = "--xla_cpu_use_thunk_runtime=false"


def prepare_environment() -> None:
    """Before TensorFlow starts: quiet its C++ INFO chatter and pick XLA's classic CPU
    runtime (unless XLA_FLAGS already chooses)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_thunk_runtime" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_CLASSIC_RUNTIME}".strip()


# absl writes INFO lines (and a multi-line session-options dump) to stderr before TF can
# apply TF_CPP_MIN_LOG_LEVEL; quiet_stderr() drops them and keeps everything else.
_INFO_LINE = re.compile(rb"^I\d{4} |^WARNING: All log messages before absl::InitializeLog")
_PROTO_TEXT = re.compile(rb"^\s*$|^\s*\}\s*$|^\s*[A-Za-z_]+(: .*| \{)\s*$")


def quiet_stderr() -> threading.Thread:
    """Route this process's fd 2 through a filter that drops absl INFO messages.

    Returns the pump thread; close fd 2 and join it to flush before exiting.
    """
    read_fd, write_fd = os.pipe()
    original = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        skipping = False
        with os.fdopen(read_fd, "rb") as source, os.fdopen(original, "wb", buffering=0) as sink:
            for line in source:
                if _INFO_LINE.match(line) or (skipping and _PROTO_TEXT.match(line)):
                    skipping = True
                    continue
                skipping = False
                sink.write(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def flush_and_exit(code: int, pump: threading.Thread | None = None) -> NoReturn:
    """Flush Python's streams (and the stderr filter) and end the process at once."""
    sys.stdout.flush()
    sys.stderr.flush()
    if pump is not None:
        os.close(2)
        pump.join(timeout=2)
    os._exit(code)


def configure_threads(threads: int) -> None:
    """Intra-op threads of this process's TensorFlow runtime (0 = TensorFlow decides)."""
    import tensorflow as tf
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:  # runtime already initialised (e.g. a second kernel in one process)
        pass


def session_config(threads: int):
    """A ConfigProto with ``threads`` intra-op threads for a worker server's runtime."""
    import tensorflow as tf
    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads)


def available_cpus() -> int:
    """CPUs this process may use (its affinity mask, capped by SLURM_CPUS_PER_TASK)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    slurm = int(os.environ.get("SLURM_CPUS_PER_TASK") or 0)
    return min(cpus, slurm) if slurm else cpus


def default_threads(processes_here: int) -> int:
    """Intra-op threads per worker when ``processes_here`` workers share this process's CPUs."""
    return max(1, available_cpus() // max(1, processes_here))


def start(workers: int, *, threads: int = 0, mode: str = "auto", device: str = "cpu",
          node_gpus: str | None = None, timeout_s: float = STARTUP_TIMEOUT_S) -> Cluster:
    """Start (or join) the cluster of ``workers`` workers and connect this process as worker 0.

    ``mode``: auto (Slurm when in a multi-task step, else local), local, or slurm. On a
    Slurm task other than 0 this serves until the client is done and exits the process.
    ``threads`` = intra-op threads per worker; 0 shares this process's CPUs among the
    workers on this node (Slurm: each task's own CPUs). ``device`` "gpu": one GPU per
    worker, gpu.NoGPUError (or WorkerError naming the worker) when one has none;
    ``node_gpus`` is the ``CUDA_VISIBLE_DEVICES`` this process had before it bound its own
    GPU (the node's GPUs, which local workers pick theirs from by local rank).
    """
    if device not in gpu.DEVICES:
        raise ValueError(f"device must be one of {', '.join(gpu.DEVICES)}, got {device!r}")
    prepare_environment()
    if mode == "auto":
        mode = "slurm" if launch.step_tasks() else "local"
    if mode == "slurm":
        return _slurm_cluster(workers, threads=threads, timeout_s=timeout_s, device=device)
    threads = threads or default_threads(workers)
    configure_threads(threads)
    if workers == 1:
        if device == "gpu":
            import tensorflow as tf
            gpu.require_gpu(tf)
        return Cluster(workers=1, devices=[LOCAL_GPU if device == "gpu" else LOCAL_CPU],
                       host_devices=[LOCAL_CPU], hosts=[socket.gethostname()], mode="inprocess",
                       threads=threads, device=device)
    return _local_cluster(workers, threads=threads, timeout_s=timeout_s, device=device,
                          node_gpus=node_gpus)


class WorkerError(RuntimeError):
    """A worker server that could not serve (e.g. it sees no GPU), named with its reason."""


def _listen(host: str, port: int = 0) -> socket.socket:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(64)
    return server


def _hello(conn: socket.socket, timeout_s: float) -> str:
    """A worker's first line: "<task>" once its server is up, or "<task> error <reason>"."""
    conn.settimeout(timeout_s)
    data = b""
    while not data.endswith(b"\n") and len(data) < 4096:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    conn.settimeout(None)
    return data.decode(errors="replace").strip()


def _await_workers(server: socket.socket, count: int, *, timeout_s: float,
                   procs: Sequence[subprocess.Popen] = ()) -> list[socket.socket]:
    """Accept one control connection per worker (each sent after its server started, or
    with the reason it cannot serve: then, once every worker has answered, all are
    released and WorkerError names the first)."""
    conns: list[socket.socket] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    server.settimeout(1.0)
    try:
        while len(conns) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(conns)} of {count} workers started in {timeout_s:.0f} s")
            failed = [p for p in procs if p.poll() is not None]  # crashed: no answer coming
            if failed:
                raise (WorkerError(errors[0]) if errors else
                       RuntimeError(f"worker server exited during start-up: {failed[0].args}"))
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conns.append(conn)  # the hello is read so that closing sends FIN, not RST
            task, _, problem = _hello(conn, timeout_s).partition(" error ")
            if problem:
                errors.append(f"worker {task}: {problem}")
    except BaseException:
        _release(conns)
        raise
    finally:
        server.close()
    if errors:
        _release(conns)
        raise WorkerError(errors[0])
    return conns


def _release(conns: list[socket.socket]) -> None:
    """Close the control connections: their workers exit."""
    for conn in conns:
        conn.close()


def worker_device(task: int, kind: str) -> str:
    """Worker ``task``'s device of ``kind`` (CPU or GPU), e.g. /job:worker/replica:0/task:1/device:GPU:0."""
    return f"/job:worker/replica:0/task:{task}/device:{kind}:0"


def _connect(spec: dict, threads: int, device: str) -> tuple[list[str], list[str]]:
    """Make this process worker 0 of ``spec`` (after checking its GPU in a GPU run) and
    return every worker's compute and host device names."""
    import tensorflow as tf
    if device == "gpu":
        gpu.require_gpu(tf)
    configure_threads(threads)  # also sent to the workers' eager contexts
    tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(spec), job_name="worker",
                                              task_index=0)
    tasks = range(len(spec["worker"]))
    return ([worker_device(i, device.upper()) for i in tasks],
            [worker_device(i, "CPU") for i in tasks])


def _worker_env(task: int, node_gpus: str | None) -> dict:
    """Environment of local worker server ``task``: its local rank, and the node's GPUs to
    pick its own from (this process already narrowed its own CUDA_VISIBLE_DEVICES)."""
    env = {**os.environ, "ARCHBENCH_LOCAL_RANK": str(task)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if node_gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = node_gpus
    return env


def _local_cluster(workers: int, *, threads: int, timeout_s: float, device: str,
                   node_gpus: str | None) -> Cluster:
    control = _listen("127.0.0.1")
    ports = free_ports(workers)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    address = "127.0.0.1:%d" % control.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "archbench.workloads.kernels.cluster",
                               "--spec", json.dumps(spec), "--task", str(task),
                               "--control", address, "--threads", str(threads),
                               "--device", device], env=_worker_env(task, node_gpus))
             for task in range(1, workers)]
    conns: list[socket.socket] = []
    try:
        conns = _await_workers(control, workers - 1, timeout_s=timeout_s, procs=procs)
        devices, host_devices = _connect(spec, threads, device)
    except BaseException:
        _release(conns)
        for proc in procs:
            proc.kill()
            proc.wait()
        raise
    host = socket.gethostname()
    return Cluster(workers=workers, devices=devices, host_devices=host_devices,
                   hosts=[host] * workers, mode="local", threads=threads, device=device,
                   procs=procs, control=conns)


def slurm_spec(tasks: int) -> tuple[dict, list[str], int, int]:
    """(cluster spec, node name per task, this task's rank, control port) of the Slurm step
    of ``tasks`` tasks: every task a worker, on its own port
    (:func:`archbench.workloads.launch.task_addresses`); the control port is the one after
    the workers'."""
    names = launch.task_nodes()
    if len(names) != tasks:
        raise ValueError(f"the Slurm step places {len(names)} tasks, not {tasks}")
    return ({"worker": launch.task_addresses(names)}, names, int(os.environ["SLURM_PROCID"]),
            launch.port_base() + tasks)


def _slurm_cluster(workers: int, *, threads: int, timeout_s: float, device: str) -> Cluster:
    tasks = launch.step_tasks() or 1
    if tasks != workers:
        raise ValueError(f"--workers {workers} but the Slurm step has {tasks} tasks")
    spec, names, rank, control_port = slurm_spec(tasks)
    if not threads:  # SLURM_CPUS_PER_TASK, else the node's CPUs shared by its tasks
        here = 1 if os.environ.get("SLURM_CPUS_PER_TASK") else names.count(names[rank])
        threads = default_threads(here)
    control_host = spec["worker"][0].rsplit(":", 1)[0]
    if rank != 0:
        serve(spec, task=rank, control=f"{control_host}:{control_port}", threads=threads,
              device=device)
    configure_threads(threads)
    control = _listen("0.0.0.0", control_port)
    conns = _await_workers(control, workers - 1, timeout_s=timeout_s)
    try:  # worker 0's own GPU check: the other workers are released when it fails
        devices, host_devices = _connect(spec, threads, device)
    except BaseException:
        _release(conns)
        raise
    return Cluster(workers=workers, devices=devices, host_devices=host_devices, hosts=names,
                   mode="slurm", threads=threads, device=device, control=conns)


def _unusable(tf, device: str) -> str:
    """Why this worker cannot serve a ``device`` run ("" when it can)."""
    if device != "gpu":
        return ""
    try:
        gpu.require_gpu(tf)
    except gpu.NoGPUError as exc:
        return str(exc)
    return ""


def serve(spec: dict, *, task: int, control: str, threads: int = 0, device: str = "cpu") -> NoReturn:
    """Run worker ``task`` of ``spec`` until the client's control connection closes; a
    worker that cannot serve a ``device`` run (no GPU) tells the client why and exits."""
    prepare_environment()
    pump = quiet_stderr()
    import tensorflow as tf
    problem = _unusable(tf, device)
    if problem:
        print(f"worker {task}: {problem}", file=sys.stderr, flush=True)
        server = None
    else:
        server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name="worker",
                                      task_index=task, config=session_config(threads), start=True)
    host, port = control.rsplit(":", 1)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:  # the client may not listen yet (Slurm tasks start in any order)
        try:
            conn = socket.create_connection((host, int(port)), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                print(f"worker {task}: no client at {control}", file=sys.stderr)
                flush_and_exit(2, pump)
            time.sleep(0.2)
    conn.settimeout(None)
    try:
        conn.sendall((f"{task} error {problem}\n" if problem else f"{task}\n").encode())
        while conn.recv(1024):  # b"" (or a reset) when the client closes or dies
            pass
    except OSError:
        pass
    del server
    flush_and_exit(1 if problem else 0, pump)  # skip TensorFlow's teardown: the servers' threads never join


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m archbench.workloads.kernels.cluster --spec JSON --task I --control HOST:PORT``."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m archbench.workloads.kernels.cluster",
                                description="Run one kernel worker server (started by the client).")
    p.add_argument("--spec", required=True, help='cluster spec JSON {"worker": [host:port, ...]}')
    p.add_argument("--task", type=int, required=True, help="this worker's index (> 0)")
    p.add_argument("--control", required=True, help="client control address host:port")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = TF default)")
    p.add_argument("--device", choices=list(gpu.DEVICES), default="cpu",
                   help="gpu: bind the GPU of this worker's local rank (ARCHBENCH_LOCAL_RANK)")
    args = p.parse_args(argv)
    gpu.bind_gpu(args.device)  # before TensorFlow loads
    serve(json.loads(args.spec), task=args.task, control=args.control, threads=args.threads,
          device=args.device)


if __name__ == "__main__":
    main()
