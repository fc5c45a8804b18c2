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

Communication: a vector of ``megabytes`` MiB (2**20 bytes, fp64) lives on task 0;
each step pushes it to task 1, where it is added into a local vector. Bandwidth = bytes
pushed / wall time in MiB/s (the unit says so: tables convert it to GB/s exactly).
"""

from __future__ import annotations

from functools import partial

from archbench.kernels.cluster import Cluster
from archbench.kernels.common import KernelResult, KernelRun, metric, rate, timed
from archbench.kernels.spec import BANDWIDTH, KernelSpec

SCALAR = 3.0
OPS = ("copy", "scale", "add", "triad")
WORDS_MOVED = {"copy": 2, "scale": 2, "add": 3, "triad": 3}  # arrays read + written
MIB = 2**20


def _xla_ops(tf):
    """The four STREAM operations, each one XLA-compiled in-place update of variables."""
    @tf.function(jit_compile=True)
    def copy(a, b, c):
        c.assign(a)

    @tf.function(jit_compile=True)
    def scale(a, b, c):
        b.assign(SCALAR * c)

    @tf.function(jit_compile=True)
    def add(a, b, c):
        c.assign(a + b)

    @tf.function(jit_compile=True)
    def triad(a, b, c):
        a.assign(b + SCALAR * c)

    return {"copy": copy, "scale": scale, "add": add, "triad": triad}


class StreamMemory:
    """STREAM arrays on every worker; ``run_op(name)`` runs one operation on all workers."""

    def __init__(self, cluster: Cluster, n: int, seed: int = 0):
        import tensorflow as tf
        self.cluster, self.n = cluster, n
        self.arrays = []
        for w, device in enumerate(cluster.devices):
            with tf.device(device):
                self.arrays.append([
                    tf.Variable(tf.random.stateless_uniform([n], [seed, 3 * w + i], dtype=tf.float64))
                    for i in range(3)])
        kernels = _xla_ops(tf)

        def on_all_workers(op):
            @tf.function
            def run():
                for device, (a, b, c) in zip(cluster.devices, self.arrays):
                    with tf.device(device):
                        op(a, b, c)
                return tf.constant(0)
            return run

        self._ops = {name: on_all_workers(kernels[name]) for name in OPS}

    def run_op(self, name: str) -> None:
        """Run STREAM operation ``name`` once on every worker (blocks until done)."""
        self._ops[name]().numpy()

    def bytes_moved(self, name: str) -> int:
        """Bytes one execution of ``name`` moves on all workers together."""
        return WORDS_MOVED[name] * 8 * self.n * self.cluster.workers

    def values(self) -> list[tuple]:
        """(a, b, c) of every worker as numpy arrays."""
        return [tuple(v.numpy() for v in arrays) for arrays in self.arrays]


def run_memory(cluster: Cluster, job: KernelRun) -> KernelResult:
    """STREAM memory bandwidth with ``job.size`` fp64 elements per array per worker (GB/s)."""
    n, warmup = job.size, job.warmup_steps
    stream = StreamMemory(cluster, n, seed=job.seed)
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
                        warmup_steps=warmup, metrics=metrics)


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
            with tf.device(cluster.devices[dst]):
                self.received.assign_add(self.message)  # read on src, sent, added on dst
            return tf.constant(0)

        self._push = push

    def push(self) -> None:
        """Send the vector once and add it at the destination (blocks until done)."""
        self._push().numpy()


def run_comm(cluster: Cluster, job: KernelRun) -> KernelResult:
    """Bandwidth of pushing ``job.size`` MiB from worker 0 to worker 1 (MiB/s)."""
    megabytes = job.size
    comm = StreamComm(cluster, megabytes, seed=job.seed)
    times = timed(comm.push, job.warmup_steps, job.steps)
    metrics = {"message_mb": metric(megabytes, "MiB"),
               "best": metric(megabytes / min(times), "MiB/s"),
               "time_per_message": metric(sum(times) / len(times), "s")}
    return KernelResult(throughput=rate(megabytes, times), throughput_unit="MiB/s", step_times_s=times,
                        warmup_steps=job.warmup_steps, metrics=metrics)


STREAM = KernelSpec(
    name="stream", help="STREAM copy/scale/add/triad memory bandwidth (GB/s)", unit="GB/s",
    measures=BANDWIDTH, size_help="fp64 elements per array per worker", run=run_memory,
    steps=(2, 10))

STREAM_COMM = KernelSpec(
    name="stream_comm", help="bandwidth of a vector pushed from task 0 to task 1 (MiB/s)",
    unit="MiB/s", measures=BANDWIDTH, size_help="message size in MiB (2**20 bytes)", run=run_comm,
    steps=(2, 10), workers=2)
