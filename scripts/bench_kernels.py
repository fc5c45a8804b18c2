"""Single-worker TensorFlow kernels against numpy/scipy on the same problem, same run.

    python scripts/bench_kernels.py [--rounds 3] [--quick]

Each kernel runs in its own process (TensorFlow's thread pools are fixed per process and
the kernels use different layouts); inside it, TensorFlow and the reference alternate for
``--rounds`` rounds (each side's time in a round is its best of a few calls, the same
count for both), and the ratio printed is the median of the per-round ratios, so a noisy
shared machine affects both sides alike. Targets: matmul >= 0.9 of numpy sgemm
(N=4096), STREAM triad >= 0.8 of a numpy triad on the same arrays.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from archbench.core import metrics  # noqa: E402

TARGETS = {"matmul": 0.9, "stream": 0.8}


def seconds(func, repeat: int = 1) -> float:
    """Best wall time of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def compare(tf_step, ref_step, *, amount: float, rounds: int, repeat: int = 1) -> dict:
    """Alternate TF and reference; rates are amount / best time of ``repeat`` calls."""
    tf_step(), ref_step()  # warm-up (tracing, first-touch of memory)
    tf_rates, ref_rates = [], []
    for _ in range(rounds):
        tf_rates.append(amount / seconds(tf_step, repeat))
        ref_rates.append(amount / seconds(ref_step, repeat))
    ratios = [t / r for t, r in zip(tf_rates, ref_rates)]
    return {"tf": statistics.median(tf_rates), "ref": statistics.median(ref_rates),
            "ratio": statistics.median(ratios)}


def bench_matmul(n: int, tile: int, rounds: int) -> dict:
    from archbench.workloads.kernels import cluster, matmul
    mm = matmul.TiledMatmul(cluster.start(1), n, tile)
    a, b = mm.inputs()
    c = np.empty_like(a)
    row = compare(mm.multiply, lambda: np.matmul(a, b, out=c), amount=metrics.matmul_flops(n) / 1e9,
                  rounds=rounds, repeat=3)
    mm.cleanup()
    return {**row, "what": f"matmul N={n} tile={tile} fp32 vs numpy sgemm", "unit": "GFLOP/s"}


def bench_stream(n: int, rounds: int) -> dict:
    from archbench.workloads.kernels import cluster, stream
    s = stream.StreamMemory(cluster.start(1), n)
    a, b, c = (np.random.rand(n) for _ in range(3))

    def numpy_triad() -> None:  # a = b + s*c without temporaries
        np.multiply(c, stream.SCALAR, out=a)
        np.add(a, b, out=a)

    row = compare(lambda: s.run_op("triad"), numpy_triad, amount=24 * n / 1e9, rounds=rounds, repeat=5)
    return {**row, "what": f"STREAM triad {8 * n / 2**20:.0f} MiB arrays vs numpy", "unit": "GB/s"}


def bench_fft(n: int, tile: int, rounds: int) -> dict:
    from archbench.workloads.kernels import cluster, fft
    f = fft.TiledFFT(cluster.start(1), n, tile)
    x = f.input()
    row = compare(f.transform, lambda: np.fft.fft(x), amount=metrics.fft_flops(n) / 1e9, rounds=rounds,
                  repeat=3)
    what = f"FFT N=2^{n.bit_length() - 1} tile=2^{tile.bit_length() - 1} complex128 vs numpy.fft"
    return {**row, "what": what, "unit": "GFLOP/s"}


def bench_cg(n: int, iterations: int, rounds: int) -> dict:
    from scipy.sparse.linalg import cg as scipy_cg

    from archbench.workloads.kernels import cg, cluster
    solver = cg.ConjugateGradient(cluster.start(1), n)
    a, b = solver.matrix(), cg.rhs_numpy(n)
    row = compare(lambda: solver.solve(iterations),
                  lambda: scipy_cg(a, b, rtol=0.0, atol=0.0, maxiter=iterations),
                  amount=metrics.cg_flops(n, iterations) / 1e9, rounds=rounds)
    return {**row, "what": f"CG N={n} fp64 dense, {iterations} iterations vs scipy cg", "unit": "GFLOP/s"}


def cases(quick: bool) -> list[list[str]]:
    """One argv per benchmark process."""
    if quick:
        return [["matmul", "1024", "512"], ["stream", str(1 << 22)], ["fft", str(1 << 18), str(1 << 18)],
                ["cg", "1024", "50"]]
    return [["matmul", "4096", "4096"], ["matmul", "4096", "2048"], ["matmul", "4096", "1024"],
            ["stream", str(1 << 25)], ["fft", str(1 << 22), str(1 << 22)],
            ["fft", str(1 << 22), str(1 << 20)], ["cg", "4096", "500"], ["cg", "8192", "200"]]


def run_one(case: list[str], rounds: int) -> dict:
    kernel, *numbers = case
    values = [int(v) for v in numbers]
    runner = {"matmul": bench_matmul, "stream": bench_stream, "fft": bench_fft, "cg": bench_cg}[kernel]
    return {"kernel": kernel, **runner(*values, rounds)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    p.add_argument("--case", nargs="+", help=argparse.SUPPRESS)  # internal: one case in this process
    args = p.parse_args()
    if args.case:
        print(json.dumps(run_one(args.case, args.rounds)))
        return 0
    print(f"{'benchmark':58s} {'TF':>9s} {'reference':>10s} {'ratio':>6s}  target")
    for case in cases(args.quick):
        proc = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--case", *case],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{' '.join(case):58s} failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        target = TARGETS.get(row["kernel"])
        verdict = "" if target is None else f">= {target} {'ok' if row['ratio'] >= target else 'MISSED'}"
        print(f"{row['what']:58s} {row['tf']:9.2f} {row['ref']:10.2f} {row['ratio']:6.2f}  {verdict}"
              f"  ({row['unit']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
