"""Fraction of the machine's measured peak that training reaches: numpy sgemm (N x N,
2N^3 - N^2 flops) gives the peak; archbench.train gives img/s and training FLOPs per image;
fraction = img/s x FLOPs per image / peak (archbench.core.metrics.fraction_of_peak). The peak is
measured before and after the training runs (the best of both is used).

    python scripts/bench_fraction_of_peak.py --models resnet50 alexnet --batch-per-process 16 --steps 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from archbench.core import metrics


def sgemm_gflops(n: int = 4096, repetitions: int = 5) -> float:
    """Best GFLOP/s of numpy float32 matmul of n x n matrices."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    a @ b
    best = 0.0
    for _ in range(repetitions):
        start = time.perf_counter()
        a @ b
        best = max(best, metrics.gflops(metrics.matmul_flops(n), time.perf_counter() - start))
    return best


def train_record(model: str, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "archbench.train", "--model", model,
                        "--batch-per-process", str(args.batch_per_process), "--image-size", str(args.image_size),
                        "--intra-threads", str(args.threads), "--inter-threads", "1",
                        "--warmup-steps", str(args.warmup), "--steps", str(args.steps),
                        "--output", out], check=True,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        with open(out) as handle:
            return json.load(handle)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["resnet50", "alexnet"])
    p.add_argument("--batch-per-process", type=int, default=16)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--n", type=int, default=4096, help="sgemm matrix size")
    args = p.parse_args(argv)
    before = sgemm_gflops(args.n)
    records = {m: train_record(m, args) for m in args.models}
    after = sgemm_gflops(args.n)
    peak = max(before, after)
    print(f"sgemm peak (N={args.n}): {before:.1f} before, {after:.1f} after -> {peak:.1f} GFLOP/s")
    for model, r in records.items():
        flops = r["metrics"]["flops_per_image"]["value"]
        achieved = r["throughput"] * flops / 1e9
        print(f"{model}: {r['throughput']:.2f} img/s x {flops / 1e9:.2f} GFLOP/img = "
              f"{achieved:.1f} GFLOP/s = {metrics.fraction_of_peak(achieved, peak):.1%} of peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
