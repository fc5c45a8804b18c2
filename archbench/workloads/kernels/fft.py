"""1D complex128 FFT in TensorFlow, N = 2^k split into interleaved tiles over the workers.

The input x (N complex128 values) is split into P = N / T interleaved tiles of T
elements, tile m = x[m::P]; tile m lives on worker m % workers, which generates it
(untimed). One transform (timed): every worker FFTs its tiles (tf.signal.fft, batched);
worker 0 merges them with twiddle factors in vectorised code (the four-step algorithm):

    Y[m, k1] = FFT_T(x[m::P])[k1]
    X[k1 + T k2] = sum_m  Y[m, k1] * exp(-2 pi i m k1 / N) * exp(-2 pi i m k2 / P)

i.e. one elementwise twiddle multiply and P-point FFTs across the tiles. The result stays
on worker 0. In a GPU run the tiles, their FFTs and the merge live on the workers' GPUs. GFLOP/s counts 5 N log2 N flops. With ``merge`` 0 the timed transform stops
once worker 0 holds every tile's spectrum, unmerged: KTH/ORNL 2019 (Sec. VI-D) timed "from
the beginning of the application to when all tiles are collected by the merger".
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from archbench.core import metrics as formulas
from archbench.workloads import gpu
from archbench.workloads.kernels.cluster import Cluster
from archbench.workloads.kernels.common import KernelResult, KernelRun, is_power_of_two, metric, rate, timed
from archbench.workloads.kernels.spec import FLOP_RATE, KernelSpec, Setting, add_verify_option


def default_tile(n: int, workers: int) -> int:
    """Tile size when none is given: one tile per worker (N / next power of two >= workers)."""
    tiles = 1
    while tiles < workers and tiles < n:
        tiles *= 2
    return n // tiles


def twiddles(n: int, tiles: int) -> np.ndarray:
    """exp(-2 pi i m k1 / N) for tile m and in-tile frequency k1, shape (tiles, N / tiles)."""
    m = np.arange(tiles, dtype=np.int64)[:, None]
    k1 = np.arange(n // tiles, dtype=np.int64)[None, :]
    return np.exp(-2j * np.pi * ((m * k1) % n) / n)  # exact integer phase, then one rounding


def _merge_function():
    import tensorflow as tf

    @tf.function(jit_compile=True)  # XLA fuses the twiddle product with the transposes
    def merge(y, twiddle):
        """X[k1 + T k2] from the tile spectra y (P, T): twiddle, then P-point FFTs."""
        z = tf.transpose(y * twiddle)  # (T, P)
        return tf.reshape(tf.transpose(tf.signal.fft(z)), [-1])

    return merge


class TiledFFT:
    """Interleaved input tiles on the workers; ``transform()`` leaves X on worker 0."""

    def __init__(self, cluster: Cluster, n: int, tile: int | None = None, *, seed: int = 0,
                 merge: bool = True):
        import tensorflow as tf
        tile = tile or default_tile(n, cluster.workers)
        if not (is_power_of_two(n) and is_power_of_two(tile)) or tile > n:
            raise ValueError(f"fft needs N and the tile size as powers of two, tile <= N "
                             f"(got N={n}, tile={tile})")
        self.cluster, self.n, self.tile, self.merge = cluster, n, tile, merge
        self.tiles = n // tile
        workers = cluster.workers
        # Tile m lives on worker m % workers, as row m // workers of its stack.
        self.owned = [list(range(w, self.tiles, workers)) for w in range(workers)]
        self.stacks = {}
        for w, device in enumerate(cluster.devices):
            if not self.owned[w]:
                continue
            with tf.device(device):
                shape = [len(self.owned[w]), tile]
                real = tf.random.stateless_normal(shape, [seed, 2 * w], dtype=tf.float64)
                imag = tf.random.stateless_normal(shape, [seed, 2 * w + 1], dtype=tf.float64)
                self.stacks[w] = tf.Variable(tf.complex(real, imag))
        with tf.device(cluster.devices[0]):
            self.twiddle = tf.Variable(twiddles(n, self.tiles))
            self.output = tf.Variable(tf.zeros([n], tf.complex128))
        order = [m for w in range(workers) for m in self.owned[w]]  # tile of each stacked row
        self.gather = np.argsort(order)  # row of tile m in the concatenated stacks
        self._merge = _merge_function()
        self._transform = tf.function(self._build)
        self.devices: list[str] = []  # where the last transform computed the tile spectra

    def _build(self):
        import tensorflow as tf
        spectra, firsts = [], []
        for w, stack in self.stacks.items():
            with tf.device(self.cluster.devices[w]):
                spectra.append(tf.signal.fft(stack))  # T-point FFT of each local tile
                firsts.append(spectra[-1][0, 0])
        with tf.device(self.cluster.devices[0]):
            if self.tiles == 1:
                merged = spectra[0][0]
            elif not self.merge:  # collected on worker 0, in stack order
                merged = tf.reshape(tf.concat(spectra, 0), [-1])
            else:
                y = tf.concat(spectra, 0)
                if not np.array_equal(self.gather, np.arange(self.tiles)):
                    y = tf.gather(y, self.gather)  # (P, T) in tile order
                merged = self._merge(y, self.twiddle)
            self.output.assign(merged)
        return tf.constant(0), firsts

    def transform(self) -> None:
        """One FFT of x; returns when X sits on worker 0."""
        done, firsts = self._transform()
        done.numpy()
        self.devices = gpu.placed_devices(firsts)

    def input(self) -> np.ndarray:
        """x reassembled from the tiles (numpy)."""
        x = np.empty(self.n, np.complex128)
        for w, stack in self.stacks.items():
            for row, values in enumerate(stack.numpy()):
                x[self.owned[w][row]::self.tiles] = values
        return x

    def result(self) -> np.ndarray:
        """X = FFT(x) as a numpy array (with merge off: the tile spectra, stack order)."""
        return self.output.numpy()


def work(record: Mapping[str, Any]) -> float | None:
    """GFLOP of one measured transform of a record: 5 N log2 N / 1e9."""
    n = record.get("problem_size")
    return None if n is None else formulas.fft_flops(n) / 1e9


def run(cluster: Cluster, job: KernelRun) -> KernelResult:
    """Tiled 1D FFT of N complex128 values; GFLOP/s with 5 N log2 N flops."""
    n, tile = job.size, job.tile_size or default_tile(job.size, job.workers)
    merge = bool(job.option("merge"))
    if job.option("verify") and not merge:
        raise ValueError("fft --verify needs the merge (--merge 1)")
    fft = TiledFFT(cluster, n, tile, seed=job.seed, merge=merge)
    times = timed(fft.transform, job.warmup_steps, job.steps)
    flops = formulas.fft_flops(n)
    result = KernelResult(
        throughput=rate(flops, times) / 1e9, throughput_unit="GFLOP/s", step_times_s=times,
        warmup_steps=job.warmup_steps, tile_size=tile, devices=fft.devices, metrics={
            "tiles": metric(fft.tiles, "count"),
            "merged": metric(int(merge), "1"),
            "best": metric(formulas.gflops(flops, min(times)), "GFLOP/s")})
    if job.option("verify"):
        expected = np.fft.fft(fft.input())
        error = np.abs(fft.result() - expected).max() / np.abs(expected).max()
        result.metrics["max_relative_error"] = metric(error, "1")
    return result


SPEC = KernelSpec(
    name="fft", help="1D complex128 FFT in interleaved tiles (GFLOP/s)", unit="GFLOP/s",
    measures=FLOP_RATE, size_help="N, a power of two", run=run, work=work, steps=(1, 5),
    tile_help="elements per tile, a power of two <= N (default one tile per worker)",
    power_of_two=True, add_arguments=add_verify_option,
    settings=(Setting(name="merge", type=int, default=1, minimum=0, maximum=1,
                      help="1 times the twiddle merge on worker 0 too; 0 stops the clock "
                           "once worker 0 has collected every tile's spectrum"),))
