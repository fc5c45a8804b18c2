"""Tiled matrix multiply C = A B in TensorFlow (N x N fp32, N = 2^k, tiles T x T).

Set-up (untimed): the workers generate the tiles of A and B and write them to disk, one
TensorFlow checkpoint bundle per tile (SaveV2), in a scratch directory every worker can
read. RestoreV2 reads a tile straight into its tensor's buffer: about 30 ms for a 64 MiB
tile from the page cache, where read_file + parse_tensor copies it twice (75-95 ms).

One multiply (timed): the shared list of tile products A[i,k] B[k,j] (ordered by output
tile, then k) is split into one contiguous share per worker. A worker loads the tiles of
its products from disk into host memory and computes, per output tile, the sum of its
products as one XLA computation on its device (its GPU in a GPU run, as KTH/ORNL 2019
loaded the tiles to GPU memory) (the additions fuse into the dots; on x86 XLA's classic
CPU runtime matches numpy's sgemm where TensorFlow's MatMul kernel reaches about half,
see cluster.XLA_CLASSIC_RUNTIME). These partial results go to the reducer owning the
tile (reducer r owns the tiles with (i * tiles + j) % reducers == r; reducers are
workers 0..reducers-1), which adds them into C[i, j]. Loads run at most one output tile
ahead of the multiplies; a worker loads each tile once per multiply when all it needs
fit in CACHE_BYTES (2 GiB), else once per output tile (then it holds about 4 N T values).
GFLOP/s counts 2N^3 - N^2 flops.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from archbench.core import metrics as formulas
from archbench.workloads import gpu
from archbench.workloads.kernels.cluster import Cluster
from archbench.workloads.kernels.common import (
    KernelResult,
    KernelRun,
    is_power_of_two,
    metric,
    rate,
    split,
    timed,
)
from archbench.workloads.kernels.spec import FLOP_RATE, KernelSpec, Setting, add_verify_option

CACHE_BYTES = 2 << 30  # per worker: loaded tiles kept for reuse within one multiply
TILE = "tile"  # name of the one tensor in a tile's checkpoint bundle


def default_tile(n: int) -> int:
    """Tile size when none is given: N up to 4096, else 4096."""
    return min(n, 4096)


def _sum_of_products(a_tiles, b_tiles):
    """sum_k a_k b_k, one XLA computation (the sums fuse into the dots' output)."""
    import tensorflow as tf
    return tf.add_n([tf.matmul(a, b) for a, b in zip(a_tiles, b_tiles)])


class TiledMatmul:
    """Tiles of A and B on disk, C as tiles on the reducers; ``multiply()`` computes C."""

    def __init__(self, cluster: Cluster, n: int, tile: int | None = None, *, reducers: int = 1,
                 scratch: str | None = None, seed: int = 0, cache_bytes: int = CACHE_BYTES):
        import tensorflow as tf
        tile = tile or default_tile(n)
        if not (is_power_of_two(n) and is_power_of_two(tile)) or tile > n:
            raise ValueError(f"matmul needs N and the tile size as powers of two, tile <= N "
                             f"(got N={n}, tile={tile})")
        if not 1 <= reducers <= cluster.workers:
            raise ValueError(f"reducers must be 1..workers ({cluster.workers}), got {reducers}")
        self.cluster, self.n, self.tile, self.reducers = cluster, n, tile, reducers
        self.cache_bytes = cache_bytes
        self.tiles = n // tile
        self.dir = Path(tempfile.mkdtemp(prefix="archbench-matmul-", dir=scratch))
        self._write_tiles(tf, seed)
        nt, devices = self.tiles, cluster.devices
        self.c_tiles = {}
        for i in range(nt):
            for j in range(nt):
                with tf.device(devices[self.reducer_of(i, j)]):
                    self.c_tiles[i, j] = tf.Variable(tf.zeros([tile, tile], tf.float32))
        self._sum_of_products = tf.function(_sum_of_products, jit_compile=True)
        self._multiply = tf.function(self._build)
        self.devices: list[str] = []  # where the last multiply computed the products

    def path(self, name: str, i: int, j: int) -> str:
        """Checkpoint prefix of tile (i, j) of matrix ``name`` (A or B)."""
        return str(self.dir / f"{name}_{i}_{j}")

    def reducer_of(self, i: int, j: int) -> int:
        """Worker that accumulates output tile C[i, j]."""
        return (i * self.tiles + j) % self.reducers

    def _write_tiles(self, tf, seed: int) -> None:
        """Each worker generates (on its host) and writes its round-robin share of the A and
        B tiles."""
        nt, t = self.tiles, self.tile
        jobs = [(name, i, j) for name in "AB" for i in range(nt) for j in range(nt)]

        @tf.function
        def write():
            saves = []  # SaveV2 has no outputs: tf.function runs it only as a dependency
            for number, (name, i, j) in enumerate(jobs):
                with tf.device(self.cluster.host_devices[number % self.cluster.workers]):
                    values = tf.random.stateless_uniform([t, t], [seed, number], -1.0, 1.0)
                    saves.append(tf.raw_ops.SaveV2(prefix=self.path(name, i, j), tensor_names=[TILE],
                                                   shape_and_slices=[""], tensors=[values]))
            with tf.control_dependencies(saves):
                return tf.constant(0)

        write().numpy()

    def _load(self, tf, key: tuple[str, int, int], directory=None):
        """Read tile ``key`` = (name, i, j); ``directory`` is a string tensor inside the graph
        (a constant file name would let TensorFlow constant-fold the load and the product)."""
        name, i, j = key
        path = self.path(name, i, j) if directory is None else tf.strings.join(
            [directory, f"/{name}_{i}_{j}"])
        data, = tf.raw_ops.RestoreV2(prefix=path, tensor_names=[TILE], shape_and_slices=[""],
                                     dtypes=[tf.float32])
        return tf.ensure_shape(data, [self.tile, self.tile])

    def products(self) -> list[tuple[int, int, int]]:
        """The shared list of tile products (i, j, k), ordered by output tile then k."""
        nt = self.tiles
        return [(i, j, k) for i in range(nt) for j in range(nt) for k in range(nt)]

    def _build(self, directory):
        import tensorflow as tf
        products = self.products()
        partials = defaultdict(list)  # (i, j) -> partial sums from the workers
        firsts = []  # per worker: one element of its last partial sum (where it computed)
        cluster = self.cluster
        for worker, (start, stop) in enumerate(split(len(products), cluster.workers)):
            share = products[start:stop]
            cache = {} if self._fits(share) else None
            pairs = defaultdict(list)  # output tile -> its (A, B) tiles, k ascending
            done = []  # partial sums in order
            for position, (i, j, k) in enumerate(share):
                with tf.device(cluster.host_devices[worker]), tf.control_dependencies(done[-2:-1]):
                    # loads (into host memory) <= one tile ahead of the products
                    pairs[i, j].append((self._tile(tf, ("A", i, k), cache=cache, directory=directory),
                                        self._tile(tf, ("B", k, j), cache=cache, directory=directory)))
                if position + 1 == len(share) or share[position + 1][:2] != (i, j):
                    with tf.device(cluster.devices[worker]):
                        done.append(self._sum_of_products(*zip(*pairs.pop((i, j)))))
                    partials[i, j].append(done[-1])
            if done:
                with tf.device(cluster.devices[worker]):
                    firsts.append(done[-1][0, 0])
        for (i, j), parts in partials.items():
            with tf.device(cluster.devices[self.reducer_of(i, j)]):
                self.c_tiles[i, j].assign(tf.add_n(parts))
        return tf.constant(0), firsts

    def _fits(self, share: list[tuple[int, int, int]]) -> bool:
        """Whether every distinct tile of a worker's share fits its tile cache."""
        distinct = {("A", i, k) for i, _, k in share} | {("B", k, j) for _, j, k in share}
        return len(distinct) * 4 * self.tile**2 <= self.cache_bytes

    def _tile(self, tf, key: tuple[str, int, int], *, cache: dict | None, directory):
        """Tile ``key`` = (name, i, j), loaded once per multiply when the worker caches tiles."""
        if cache is not None and key in cache:
            return cache[key]
        value = self._load(tf, key, directory)
        if cache is not None:
            cache[key] = value
        return value

    def multiply(self) -> None:
        """One tiled multiply; returns when every C tile sits on its reducer."""
        import tensorflow as tf
        done, firsts = self._multiply(tf.constant(str(self.dir)))
        done.numpy()
        self.devices = gpu.placed_devices(firsts)

    def _read(self, name: str, i: int, j: int) -> np.ndarray:
        import tensorflow as tf
        return self._load(tf, (name, i, j)).numpy()

    def _assemble(self, tile_of) -> np.ndarray:
        nt = self.tiles
        return np.block([[tile_of(i, j) for j in range(nt)] for i in range(nt)])

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """A and B as numpy arrays, read back from the tile files."""
        return (self._assemble(lambda i, j: self._read("A", i, j)),
                self._assemble(lambda i, j: self._read("B", i, j)))

    def result(self) -> np.ndarray:
        """C gathered from the reducers as a numpy array."""
        return self._assemble(lambda i, j: self.c_tiles[i, j].numpy())

    def cleanup(self) -> None:
        """Delete the tile files."""
        shutil.rmtree(self.dir, ignore_errors=True)


def work(record: Mapping[str, Any]) -> float | None:
    """GFLOP of one measured multiply of a record: (2N^3 - N^2) / 1e9."""
    n = record.get("problem_size")
    return None if n is None else formulas.matmul_flops(n) / 1e9


def run(cluster: Cluster, job: KernelRun) -> KernelResult:
    """Tiled N x N fp32 multiply on the cluster; GFLOP/s with 2N^3 - N^2 flops."""
    n, tile, reducers = job.size, job.tile_size or default_tile(job.size), job.option("reducers")
    mm = TiledMatmul(cluster, n, tile, reducers=reducers, scratch=job.option("scratch"), seed=job.seed)
    try:
        times = timed(mm.multiply, job.warmup_steps, job.steps)
        flops = formulas.matmul_flops(n)
        result = KernelResult(
            throughput=rate(flops, times) / 1e9, throughput_unit="GFLOP/s", step_times_s=times,
            warmup_steps=job.warmup_steps, tile_size=tile, devices=mm.devices, metrics={
                "tile_products": metric(mm.tiles ** 3, "count"),
                "reducers": metric(reducers, "count"),
                "best": metric(formulas.gflops(flops, min(times)), "GFLOP/s")})
        if job.option("verify"):
            a, b = mm.inputs()
            expected = a @ b
            error = np.abs(mm.result() - expected).max() / np.abs(expected).max()
            result.metrics["max_relative_error"] = metric(error, "1")
    finally:
        mm.cleanup()
    return result


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """matmul's command-line-only options: --verify, --scratch."""
    add_verify_option(parser)
    parser.add_argument("--scratch", default=os.environ.get("ARCHBENCH_SCRATCH"),
                        help="directory for the tile files, readable by all workers "
                             "(default $ARCHBENCH_SCRATCH, else the system temp directory)")


SPEC = KernelSpec(
    name="matmul", help="tiled N x N fp32 matrix multiply (GFLOP/s)", unit="GFLOP/s",
    measures=FLOP_RATE, size_help="N, a power of two", run=run, work=work, steps=(1, 3),
    tile_help="tile edge, a power of two <= N (default min(N, 4096))", power_of_two=True,
    settings=(Setting(name="reducers", type=int, default=1, minimum=1,
                      help="workers accumulating the C tiles, capped at the worker count",
                      adjust=min),),
    add_arguments=_add_arguments)
