"""Conjugate gradient in TensorFlow: A x = b with A symmetric positive definite, fp64,
A split into contiguous row blocks, one per worker.

A is the Kac-Murdock-Szego matrix A[i, j] = rho^|i - j| (rho = 0.99): SPD for any N, with
condition number up to ((1 + rho) / (1 - rho))^2 ~ 4e4, so 500 iterations neither converge
to nothing nor underflow. b[i] = 1 + sin(i) / 2. Each worker generates its rows on its own
device (untimed).

Every iteration (one TensorFlow while loop, timed): each worker gathers the direction p
from all workers, multiplies its row block (q_i = A_i p), and updates its blocks of x, r
and p; the dot products are summed on worker 0, which sends alpha and beta back. The loop
stops after ``iterations`` or once ||r|| <= tolerance * ||b|| (tolerance 0 = always run
all iterations unless r is exactly zero). In a GPU run every worker's blocks, and its
share of each iteration, live on its GPU; the dot products are summed on worker 0's GPU. GFLOP/s counts iterations * 2N^2 flops
(iterations actually run); the final true residual ||b - A x|| / ||b|| is reported.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from archbench.core import metrics as formulas
from archbench.workloads import gpu
from archbench.workloads.kernels.cluster import Cluster
from archbench.workloads.kernels.common import KernelResult, KernelRun, metric, rate, split, timed
from archbench.workloads.kernels.spec import FLOP_RATE, KernelSpec, Setting

RHO = 0.99
GENERATE_CHUNK = 1 << 22  # matrix elements generated per call (bounds temporaries)


def matrix_numpy(n: int, rows: tuple[int, int] | None = None) -> np.ndarray:
    """Rows ``rows`` (default all) of the N x N test matrix, in numpy."""
    r0, r1 = rows or (0, n)
    i = np.arange(r0, r1)[:, None]
    return RHO ** np.abs(i - np.arange(n)[None, :]).astype(np.float64)


def rhs_numpy(n: int) -> np.ndarray:
    """The right-hand side b."""
    return 1.0 + 0.5 * np.sin(np.arange(n, dtype=np.float64))


class ConjugateGradient:
    """Row blocks of A, b and x on the workers; ``solve()`` runs the CG loop."""

    def __init__(self, cluster: Cluster, n: int):
        import tensorflow as tf
        if n < cluster.workers:
            raise ValueError(f"cg needs N >= workers (N={n}, workers={cluster.workers})")
        self.cluster, self.n = cluster, n
        self.rows = split(n, cluster.workers)
        self.a, self.b, self.x = [], [], []
        for device, (r0, r1) in zip(cluster.devices, self.rows):
            with tf.device(device):
                self.a.append(tf.Variable(self._generate(tf, device, (r0, r1))))
                index = tf.range(r0, r1, dtype=tf.float64)
                self.b.append(tf.Variable(1.0 + 0.5 * tf.sin(index)))
                self.x.append(tf.Variable(tf.zeros([r1 - r0], tf.float64)))
        self._solve = tf.function(self._loop)
        self._residual = tf.function(self._true_residual)
        self.devices: list[str] = []  # where the last solve computed each worker's x

    def _generate(self, tf, device: str, rows: tuple[int, int]):
        """Rows r0..r1 of A, computed on ``device`` a chunk of rows at a time (bounded
        temporaries) and joined once: slice-assigning into a variable would switch it to
        copy-on-read and make every later read copy the whole block."""
        (r0, r1), n, step = rows, self.n, max(1, GENERATE_CHUNK // self.n)

        @tf.function
        def block():
            with tf.device(device):
                j = tf.range(n, dtype=tf.int64)[None, :]
                chunks = []
                for start in range(r0, r1, step):
                    i = tf.range(start, min(start + step, r1), dtype=tf.int64)[:, None]
                    distance = tf.cast(tf.abs(i - j), tf.float64)
                    chunks.append(tf.exp(distance * math.log(RHO)))
                return tf.concat(chunks, 0)

        return block()

    def _loop(self, iterations, tolerance):
        import tensorflow as tf
        devices, first = self.cluster.devices, self.cluster.devices[0]

        def dot(u, v):
            return tf.reduce_sum(u * v)

        def summed(parts):
            with tf.device(first):
                return tf.add_n(parts)

        xs, rs, ps, squares = [], [], [], []
        for device, b in zip(devices, self.b):
            with tf.device(device):
                b0 = b.read_value()
                xs.append(tf.zeros_like(b0))
                rs.append(b0)
                ps.append(b0)
                squares.append(dot(b0, b0))
        rr = summed(squares)
        with tf.device(first):
            threshold = tolerance * tolerance * rr  # (tol * ||b||)^2
            k = tf.constant(0)

        def body(*state):  # tf.while_loop passes the loop variables positionally
            k, rr, xs, rs, ps = state
            qs, pqs = [], []
            for device, block, p in zip(devices, self.a, ps):
                with tf.device(device):
                    q = tf.linalg.matvec(block, tf.concat(ps, 0))  # gathers p from all workers
                    qs.append(q)
                    pqs.append(dot(p, q))
            with tf.device(first):
                alpha = rr / summed(pqs)
            new_x, new_r, squares = [], [], []
            for device, x, r, p, q in zip(devices, xs, rs, ps, qs):
                with tf.device(device):
                    new_x.append(x + alpha * p)
                    new_r.append(r - alpha * q)
                    squares.append(dot(new_r[-1], new_r[-1]))
            rr_new = summed(squares)
            with tf.device(first):
                beta = rr_new / rr
            new_p = []
            for device, r, p in zip(devices, new_r, ps):
                with tf.device(device):
                    new_p.append(r + beta * p)
            with tf.device(first):
                k = k + 1
            return k, rr_new, new_x, new_r, new_p

        def cond(*state):
            k, rr = state[:2]
            with tf.device(first):
                return tf.logical_and(k < iterations, rr > threshold)

        k, rr, xs, _, _ = tf.while_loop(cond, body, [k, rr, xs, rs, ps])
        firsts = []
        for device, variable, x in zip(devices, self.x, xs):
            with tf.device(device):
                variable.assign(x)
                firsts.append(x[0])
        return k, rr, firsts

    def _true_residual(self):
        import tensorflow as tf
        parts, norms = [], []
        for device, block, b in zip(self.cluster.devices, self.a, self.b):
            with tf.device(device):
                residual = b - tf.linalg.matvec(block, tf.concat([x.read_value() for x in self.x], 0))
                parts.append(tf.reduce_sum(residual * residual))
                norms.append(tf.reduce_sum(b * b))
        with tf.device(self.cluster.devices[0]):
            return tf.sqrt(tf.add_n(parts) / tf.add_n(norms))

    def solve(self, iterations: int, tolerance: float = 0.0) -> int:
        """Run CG from x = 0; return the iterations done (x stays on the workers)."""
        import tensorflow as tf
        k, _, firsts = self._solve(tf.constant(iterations), tf.constant(tolerance, tf.float64))
        done = int(k.numpy())
        self.devices = gpu.placed_devices(firsts)
        return done

    def residual(self) -> float:
        """True relative residual ||b - A x|| / ||b|| of the current x."""
        return float(self._residual().numpy())

    def solution(self) -> np.ndarray:
        """x gathered from the workers."""
        return np.concatenate([x.numpy() for x in self.x])

    def matrix(self) -> np.ndarray:
        """A gathered from the workers (small N only)."""
        return np.concatenate([a.numpy() for a in self.a])


def work(record: Mapping[str, Any]) -> float | None:
    """GFLOP of one measured solve of a record: iterations x 2N^2 / 1e9, with the
    iterations its metric says each solve did."""
    n = record.get("problem_size")
    iterations = (record.get("metrics") or {}).get("iterations", {}).get("value")
    if n is None or type(iterations) not in (int, float):  # not a bool either
        return None
    return formulas.cg_flops(n, iterations) / 1e9


def run(cluster: Cluster, job: KernelRun) -> KernelResult:
    """CG on the N x N fp64 test matrix; GFLOP/s with iterations * 2N^2 flops."""
    n, iterations, tolerance = job.size, job.option("iterations"), job.option("tolerance")
    solver = ConjugateGradient(cluster, n)
    for _ in range(job.warmup_steps):  # traces the loop; a few iterations suffice
        solver.solve(min(iterations, 3), tolerance)
    done: list[int] = []
    times = timed(lambda: done.append(solver.solve(iterations, tolerance)), 0, job.steps)
    flops = formulas.cg_flops(n, done[-1])
    return KernelResult(
        throughput=rate(flops, times) / 1e9, throughput_unit="GFLOP/s", step_times_s=times,
        warmup_steps=job.warmup_steps, devices=solver.devices, metrics={
            "iterations": metric(done[-1], "count"),
            "residual": metric(solver.residual(), "1"),
            "tolerance": metric(tolerance, "1")})


SPEC = KernelSpec(
    name="cg", help="conjugate gradient, N x N fp64 SPD matrix in row blocks (GFLOP/s)",
    unit="GFLOP/s", measures=FLOP_RATE, size_help="N", run=run, work=work, steps=(1, 1),
    settings=(
        Setting(name="iterations", type=int, default=500, minimum=1, in_tuning=False,
                help="CG iterations per solve"),
        Setting(name="tolerance", type=float, default=0.0, minimum=0,
                help="stop early once ||r|| <= tolerance * ||b||; 0 runs all iterations"),
    ))
