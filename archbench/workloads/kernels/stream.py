"""STREAM in TensorFlow: memory bandwidth of copy/scale/add/triad on every worker, and
communication bandwidth between two TensorFlow tasks.

Memory: each worker holds three fp64 arrays a, b, c of ``n`` elements (per worker) as
variables on its own device and runs, per iteration, the four STREAM operations

    copy  c = a          2 * 8n bytes        scale b = s * c      2 * 8n bytes
    add   c = a + b      3 * 8n bytes        triad a = b + s * c  3 * 8n bytes

each compiled with XLA so it is one in-place pass over memory (TensorFlow's plain ops
would allocate a temporary and merely alias on copy). All workers run an operation at the
same time; bandwidth = bytes moved by ALL workers / wall time (GB/s, 1 GB = 1e9 bytes),
averaged over the measured iterations.

``memory`` says where the arrays of a GPU run live: ``device`` (default) in GPU memory,
updated in place there; ``host`` in the worker's host memory, each operation reading its
arrays from there, computing on the GPU and writing the result back, so every iteration
crosses PCIe (KTH/ORNL 2019 placed STREAM's tensors in host or GPU memory, Sec. VI-A).
A CPU run has only host memory (``host`` is refused there: it means "not on the GPU").

Communication: a vector of ``megabytes`` MiB (2**20 bytes, fp64) lives on task 0;
each step pushes it to task 1, where it is added into a local vector. Bandwidth = bytes
pushed / wall time in MiB/s (the unit says so: tables convert it to GB/s exactly). In a
GPU run both vectors live in GPU memory (the paper's "tensors hosted on GPUs"); its
host-memory case is a CPU run (tensors and the add on the hosts).

Every step returns one element of what each worker computed: the devices those tensors
sit on are the record's ``devices`` (``archbench.workloads.gpu.placed_devices``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

from archbench.workloads import gpu
from archbench.workloads.kernels.cluster import Cluster
from archbench.workloads.kernels.common import KernelResult, KernelRun, metric, rate, timed
from archbench.workloads.kernels.spec import BANDWIDTH, KernelSpec, Setting

SCALAR = 3.0
OPS = ("copy", "scale", "add", "triad")
WORDS_MOVED = {"copy": 2, "scale": 2, "add": 3, "triad": 3}  # arrays read + written
MIB = 2**20
MEMORY = ("device", "host")
# operation -> (arrays read, array written), as indices into (a, b, c)
OPERANDS = {"copy": ((0,), 2), "scale": ((2,), 1), "add": ((0, 1), 2), "triad": ((1, 2), 0)}


def _values(tf):
    """The four STREAM operations as XLA-compiled functions of the arrays they read."""
    @tf.function(jit_compile=True)
    def copy(a):
        return tf.identity(a)

    @tf.function(jit_compile=True)
    def scale(c):
        return SCALAR * c

    @tf.function(jit_compile=True)
    def add(a, b):
        return a + b

    @tf.function(jit_compile=True)
    def triad(b, c):
        return b + SCALAR * c

    return {"copy": copy, "scale": scale, "add": add, "triad": triad}


def _in_place(tf, values):
    """The four STREAM operations as XLA-compiled in-place updates of the variables
    (a, b, c), each returning the first element it wrote."""
    def update(name):
        reads, written = OPERANDS[name]

        @tf.function(jit_compile=True)
        def op(a, b, c):
            arrays = (a, b, c)
            arrays[written].assign(values[name](*(arrays[i] for i in reads)))
            return arrays[written][0]
        return op

    return {name: update(name) for name in OPS}


class StreamMemory:
    """STREAM arrays on every worker; ``run_op(name)`` runs one operation on all workers.

    ``memory`` "device": the arrays live on each worker's compute device and are updated in
    place there; "host": they live in its host memory and every operation computes on its
    compute device (a GPU run only)."""

    def __init__(self, cluster: Cluster, n: int, *, seed: int = 0, memory: str = "device"):
        import tensorflow as tf
        if memory not in MEMORY:
            raise ValueError(f"memory must be one of {', '.join(MEMORY)}, got {memory!r}")
        if memory == "host" and cluster.device != "gpu":
            raise ValueError("stream memory host needs a GPU run (--device gpu)")
        self.cluster, self.n, self.memory = cluster, n, memory
        homes = cluster.devices if memory == "device" else cluster.host_devices
        self.arrays = []
        for w, home in enumerate(homes):
            with tf.device(home):
                self.arrays.append([
                    tf.Variable(tf.random.stateless_uniform([n], [seed, 3 * w + i], dtype=tf.float64))
                    for i in range(3)])
        values = _values(tf)
        in_place = _in_place(tf, values)

        def across_pcie(name, *, home, device, arrays):
            """Read from host memory, compute on ``device``, write back to host memory."""
            reads, written = OPERANDS[name]
            with tf.device(home):
                operands = [arrays[i].read_value() for i in reads]
            with tf.device(device):
                result = values[name](*operands)
                first = result[0]
            with tf.device(home):
                arrays[written].assign(result)
            return first

        def on_all_workers(name):
            @tf.function
            def run():
                firsts = []
                for device, home, arrays in zip(cluster.devices, homes, self.arrays):
                    with tf.device(device):
                        firsts.append(in_place[name](*arrays) if memory == "device"
                                      else across_pcie(name, home=home, device=device,
                                                        arrays=arrays))
                return tf.constant(0), firsts
            return run

        self._ops = {name: on_all_workers(name) for name in OPS}
        self.devices: list[str] = []

    def run_op(self, name: str) -> None:
        """Run STREAM operation ``name`` once on every worker (blocks until done); the
        devices of what it computed become ``devices``."""
        done, firsts = self._ops[name]()
        done.numpy()
        self.devices = gpu.placed_devices(firsts)

    def bytes_moved(self, name: str) -> int:
        """Bytes one execution of ``name`` moves on all workers together."""
        return bytes_moved(name, self.n, self.cluster.workers)

    def values(self) -> list[tuple]:
        """(a, b, c) of every worker as numpy arrays."""
        return [tuple(v.numpy() for v in arrays) for arrays in self.arrays]


def run_memory(cluster: Cluster, job: KernelRun) -> KernelResult:
    """STREAM memory bandwidth with ``job.size`` fp64 elements per array per worker (GB/s)."""
    n, warmup = job.size, job.warmup_steps
    stream = StreamMemory(cluster, n, seed=job.seed, memory=job.option("memory"))
    for _ in range(warmup):
        for name in OPS:
            stream.run_op(name)
    times = {name: [] for name in OPS}
    for _ in range(job.steps):  # STREAM order: copy, scale, add, triad in every iteration
        for name in OPS:
            times[name] += timed(partial(stream.run_op, name), 0, 1)
    gbs = {name: rate(stream.bytes_moved(name), times[name]) / 1e9 for name in OPS}
    metrics = {name: metric(gbs[name], "GB/s") for name in OPS}
    metrics["triad_best"] = metric(stream.bytes_moved("triad") / min(times["triad"]) / 1e9, "GB/s")
    metrics["array_mb"] = metric(8 * n / 1e6, "MB")
    return KernelResult(throughput=gbs["triad"], throughput_unit="GB/s", step_times_s=times["triad"],
                        warmup_steps=warmup, metrics=metrics, devices=stream.devices)


def bytes_moved(name: str, n: int, workers: int) -> int:
    """Bytes one execution of operation ``name`` moves on ``workers`` workers of ``n``
    elements each: words read and written x 8 x n x workers."""
    return WORDS_MOVED[name] * 8 * n * workers


def memory_work(record: Mapping[str, Any]) -> float | None:
    """GB one measured step of a STREAM record moves: its triad's bytes / 1e9."""
    n, workers = record.get("problem_size"), record.get("workers")
    return None if n is None or workers is None else bytes_moved("triad", n, workers) / 1e9


def comm_work(record: Mapping[str, Any]) -> float | None:
    """MiB one measured step of a stream_comm record pushes: its problem size."""
    return record.get("problem_size")


class StreamComm:
    """A vector on task ``src`` pushed to task ``dst`` and added into a vector there."""

    def __init__(self, cluster: Cluster, megabytes: int, *, src: int = 0, dst: int = 1,
                 seed: int = 0):
        import tensorflow as tf
        if cluster.workers < 2:
            raise ValueError("stream_comm needs two workers (--workers 2)")
        self.nbytes = megabytes * MIB
        n = self.nbytes // 8
        with tf.device(cluster.devices[src]):
            self.message = tf.Variable(tf.random.stateless_uniform([n], [seed, 1], dtype=tf.float64))
        with tf.device(cluster.devices[dst]):
            self.received = tf.Variable(tf.zeros([n], tf.float64))

        @tf.function
        def push():
            with tf.device(cluster.devices[src]):
                sent = self.message[0]  # where the message lives
            with tf.device(cluster.devices[dst]):
                self.received.assign_add(self.message)  # read on src, sent, added on dst
                added = self.received[0]
            return tf.constant(0), [sent, added]

        self._push = push
        self.devices: list[str] = []

    def push(self) -> None:
        """Send the vector once and add it at the destination (blocks until done); the
        devices of the message and of the sum become ``devices``."""
        done, firsts = self._push()
        done.numpy()
        self.devices = gpu.placed_devices(firsts)


def run_comm(cluster: Cluster, job: KernelRun) -> KernelResult:
    """Bandwidth of pushing ``job.size`` MiB from worker 0 to worker 1 (MiB/s)."""
    megabytes = job.size
    comm = StreamComm(cluster, megabytes, seed=job.seed)
    times = timed(comm.push, job.warmup_steps, job.steps)
    metrics = {"message_mb": metric(megabytes, "MiB"),
               "best": metric(megabytes / min(times), "MiB/s"),
               "time_per_message": metric(sum(times) / len(times), "s")}
    return KernelResult(throughput=rate(megabytes, times), throughput_unit="MiB/s", step_times_s=times,
                        warmup_steps=job.warmup_steps, metrics=metrics, devices=comm.devices)


STREAM = KernelSpec(
    name="stream", help="STREAM copy/scale/add/triad memory bandwidth (GB/s)", unit="GB/s",
    measures=BANDWIDTH, size_help="fp64 elements per array per worker", run=run_memory,
    work=memory_work,
    steps=(2, 10),
    settings=(Setting(name="memory", type=str, default="device", choices=MEMORY, gpu_only=("host",),
                      help="where a GPU run keeps the arrays: device (GPU memory) or host "
                           "(host memory, every operation crossing PCIe; GPU runs only)"),))

STREAM_COMM = KernelSpec(
    name="stream_comm", help="bandwidth of a vector pushed from task 0 to task 1 (MiB/s)",
    unit="MiB/s", measures=BANDWIDTH, size_help="message size in MiB (2**20 bytes)", run=run_comm,
    work=comm_work,
    steps=(2, 10), workers=2)
