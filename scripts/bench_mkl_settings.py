"""Do the MKL/OpenMP settings of the inter/intra sweep change anything? (CESGA 2018, Sec. 3.1
and Figs. 2-7 toggle KMP_BLOCKTIME=0 and KMP_AFFINITY with Intel's MKL TensorFlow build.)

The same small training runs with the settings of ``mkl_settings: on``
(``archbench.plan.experiment_types.inter_intra.MKL_ENV``) and without, interleaved in ABBA order,
each run a fresh ``python -m archbench.train`` process (the variables must be set before
TensorFlow loads). Prints every pair's img/s, the on/off ratio's mean, min, max and
standard deviation, and the OpenMP/MKL runtimes the pinned TensorFlow maps (its oneDNN
runs on TensorFlow's own thread pool: KMP_* are read only by Intel's OpenMP runtime).

    python scripts/bench_mkl_settings.py --model resnet50 --image-size 64 --batch-per-process 16 \
        --threads 2 --steps 20 --pairs 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from archbench.plan.experiment_types.inter_intra import MKL_ENV


def train_once(args, *, mkl: bool, output: Path, probe: bool = False) -> dict:
    """The record of one training process, with or without the MKL settings."""
    env = {k: v for k, v in os.environ.items() if k not in MKL_ENV}
    env.update(MKL_ENV if mkl else {})
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = [sys.executable, "-m", "archbench.train", "--model", args.model,
            "--batch-per-process", str(args.batch_per_process), "--image-size", str(args.image_size),
            "--num-classes", "10", "--intra-threads", str(args.threads), "--inter-threads", "1",
            "--warmup-steps", str(args.warmup), "--steps", str(args.steps),
            "--onednn", args.onednn, "--vendor-probe", "on" if probe else "off",
            "--output", str(output)]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(output.read_text())


def main() -> int:
    """Run the interleaved pairs and print the comparison."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-per-process", type=int, default=16)
    p.add_argument("--threads", type=int, default=2, help="intra-op threads")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--pairs", type=int, default=6, help="on/off pairs, ABBA-interleaved")
    p.add_argument("--onednn", choices=["on", "off"], default="on")
    args = p.parse_args()
    on, off = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for mkl in order:
                (on if mkl else off).append(train_once(args, mkl=mkl, output=out)["throughput"])
            print(f"pair {i}: on {on[-1]:.2f} img/s, off {off[-1]:.2f} img/s, "
                  f"ratio {on[-1] / off[-1]:.3f}", flush=True)
        evidence = train_once(args, mkl=True, output=out, probe=True)["vendor_evidence"] or {}
    ratios = [a / b for a, b in zip(on, off)]
    print(f"settings on: {'; '.join(f'{k}={v}' for k, v in MKL_ENV.items())}")
    print(f"img/s on:  mean {statistics.mean(on):.2f} (min {min(on):.2f}, max {max(on):.2f})")
    print(f"img/s off: mean {statistics.mean(off):.2f} (min {min(off):.2f}, max {max(off):.2f})")
    print(f"ratio on/off: mean {statistics.mean(ratios):.4f}, "
          f"median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, "
          f"max {max(ratios):.4f}, stdev {statistics.stdev(ratios) if len(ratios) > 1 else 0:.4f}")
    print(f"vendor library that ran: {evidence.get('library')} (oneDNN {evidence.get('version')}); "
          f"OpenMP/MKL runtimes loaded: {', '.join(evidence.get('loaded_libraries') or []) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
