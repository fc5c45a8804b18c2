"""The PyTorch path on one real GPU, in a few minutes: run from the repository root on a
machine with a GPU and PyTorch with CUDA (no TensorFlow, no package index needed).

    python3 scripts/gpu_check.py --out gpu-check [--batch-per-process 256 --steps 30]

1. archbench's PyTorch ResNet-50 (synthetic, 224 px, NCHW, fp32) on the GPU, a record
   written, alternating with a bare loop of the same model, batch and precision that does
   what Horovod's ``pytorch_synthetic_benchmark.py`` does (cuDNN autotuner on, one fixed
   batch on the GPU, SGD, timed steps, the GPU synchronised at the window's end); prints
   archbench's img/s over the bare loop's (goal >= 0.98).
2. DDP over NCCL on that GPU (one rank).
3. A GPU measurement with CUDA hidden (``CUDA_VISIBLE_DEVICES=-1``): must end as a
   failure record ("no GPU visible to PyTorch"), never as a CPU number.
4. Prints each record's status, devices, gpu_models, cuda_version and nccl_version.

archbench's pure-Python needs that such a machine may lack (fastjsonschema, jsonschema and
its dependencies) can be carried as wheels: see docs/gpus.md, "Checking a real GPU".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bare(batch_size: int, steps: int, warmup: int) -> float:
    """img/s of the peer loop on GPU 0 (this process)."""
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(num_classes=1000).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(batch_size, 3, 224, 224, device="cuda")
    target = torch.randint(0, 1000, (batch_size,), device="cuda")

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return batch_size * steps / (time.perf_counter() - start)


def archbench(out: Path, args, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "archbench.train", "--framework", "pytorch", "--model", "resnet50",
            "--device", "gpu", "--batch-per-process", str(args.batch_per_process), "--image-size", "224",
            "--data-format", "NCHW", "--warmup-steps", str(args.warmup), "--steps", str(args.steps),
            "--intra-threads", "4", *extra, "--output", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                               **(env or {})})
    print(f"$ {' '.join(argv[1:])}\n  exit {done.returncode}; {done.stdout.strip()[-300:]}", flush=True)
    if done.returncode not in (0, 3):
        print(done.stderr[-3000:], flush=True)
    return done


def show(path: Path) -> dict:
    r = json.loads(path.read_text())
    fields = ("status", "reason", "strategy", "device", "throughput", "devices", "gpu_models",
              "cuda_version", "cudnn_version", "nccl_version", "framework_version")
    print(f"  {path.name}: " + json.dumps({k: r.get(k) for k in fields}), flush=True)
    if r.get("metrics", {}).get("ddp_backend"):
        print(f"  {path.name}: ddp_backend {r['metrics']['ddp_backend']['value']}", flush=True)
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("gpu-check"))
    p.add_argument("--batch-per-process", type=int, default=256)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--pairs", type=int, default=2, help="archbench/bare-loop pairs (0: none)")
    p.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare:
        print(json.dumps({"img_s": bare(args.batch_per_process, args.steps, args.warmup)}))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                   check=False)
    ratios = []
    for pair in range(args.pairs):
        record = args.out / f"single-{pair}.json"
        archbench(record, args, "--vendor-probe", "off")
        ours = show(record)["throughput"]
        peer = json.loads(subprocess.run(
            [sys.executable, __file__, "--bare", "--batch-per-process", str(args.batch_per_process), "--steps",
             str(args.steps), "--warmup", str(args.warmup)], capture_output=True, text=True,
            check=True, timeout=900).stdout.strip().splitlines()[-1])["img_s"]
        ratios.append(ours / peer if ours else 0.0)
        print(f"pair {pair}: archbench {ours} img/s, bare loop {peer:.1f} img/s, ratio {ratios[-1]:.3f}",
              flush=True)
    if ratios:  # --pairs 0: only the DDP and hidden-GPU checks
        print(f"archbench / bare loop, ResNet-50 fp32 batch {args.batch_per_process}: median "
              f"{statistics.median(ratios):.3f} (goal >= 0.98)", flush=True)
    archbench(args.out / "ddp.json", args, "--strategy", "ddp", "--vendor-probe", "off")
    show(args.out / "ddp.json")
    hidden = archbench(args.out / "hidden.json", args, env={"CUDA_VISIBLE_DEVICES": "-1"})
    r = show(args.out / "hidden.json")
    ok = hidden.returncode == 3 and r["status"] == "failed" and r["throughput"] is None
    print(f"CUDA hidden: {'a failure record, as it must be' if ok else 'WRONG: not a failure record'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
