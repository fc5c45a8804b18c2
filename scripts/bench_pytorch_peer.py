"""archbench's PyTorch img/s against a bare loop that does what Horovod's
``examples/pytorch/pytorch_synthetic_benchmark.py`` does (torchvision model, SGD lr 0.01,
cross-entropy, one fixed synthetic batch, warm-up, then timed windows; img/s = batch x
batches / time, summed over ranks), same model, batch, image size, threads and layout
(NCHW: contiguous tensors, as the script uses), the framework's default inter-op pool
(the script sets none), each run a fresh process, the two
alternating over several repetitions in the same minute (which runs first alternates too).
Also TensorFlow's img/s of the same configuration through archbench. Prints each pair's
median ratio.

    python scripts/bench_pytorch_peer.py --model resnet50 --image-size 64 --batch-per-process 32 \
        --threads 2 --steps 20 --repetitions 3 [--ranks 1 2]

Goals: single rank >= 0.98; 2 ranks (Horovod-PyTorch and DDP, 1 thread each) >= 0.95.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archbench.workloads.training.strategies.ddp import ADDRESS, free_port  # noqa: E402


def bare(args) -> None:
    """The peer loop in this process (one rank of ``--peer single|horovod|ddp``): prints
    the img/s of all ranks as JSON on rank 0."""
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.set_num_threads(args.threads)
    hvd = dist = None
    rank, size = 0, 1
    if args.peer == "horovod":
        import horovod.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    elif args.peer == "ddp":
        import torch.distributed as dist
        host, port = os.environ[ADDRESS].rsplit(":", 1)
        rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=size)
    model = getattr(torchvision.models, args.model)(num_classes=1000)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if hvd is not None:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if dist is not None:
        model = torch.nn.parallel.DistributedDataParallel(model)
    data = torch.randn(args.batch_per_process, 3, args.image_size, args.image_size)
    target = torch.LongTensor(args.batch_per_process).random_() % 1000

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    timeit.timeit(benchmark_step, number=args.warmup)
    seconds = timeit.timeit(benchmark_step, number=args.steps)
    img_s = args.batch_per_process * args.steps / seconds * size
    if rank == 0:
        print(json.dumps({"img_s": img_s}))


def mpirun(ranks: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", *root, "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
            "-x", "PATH", "-x", "PYTHONPATH", "-x", ADDRESS]


def env() -> dict:
    return {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
            ADDRESS: f"127.0.0.1:{free_port()}",
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_peer(args, peer: str, ranks: int) -> float:
    launcher = mpirun(ranks) if ranks > 1 else []
    argv = [*launcher, sys.executable, __file__, "--bare", "--peer", peer, "--model", args.model,
            "--image-size", str(args.image_size), "--batch-per-process", str(args.batch_per_process),
            "--threads", str(args.threads // ranks or 1), "--steps", str(args.steps),
            "--warmup", str(args.warmup)]
    out = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["img_s"]


def run_archbench(args, *, framework: str, strategy: str, ranks: int) -> float:
    launcher = mpirun(ranks) if ranks > 1 else []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        argv = [*launcher, sys.executable, "-m", "archbench.train", "--framework", framework,
                "--strategy", strategy, "--model", args.model, "--image-size", str(args.image_size),
                "--batch-per-process", str(args.batch_per_process), "--intra-threads", str(args.threads // ranks or 1),
                "--inter-threads", "0", "--steps", str(args.steps), "--warmup-steps", str(args.warmup),
                "--data-format", "NCHW" if framework == "pytorch" else "NHWC", "--vendor-probe", "off",
                "--num-classes", "1000", "--output", str(out)]
        subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800, check=True)
        return json.loads(out.read_text())["throughput"]


def paired(args, first, second, *, label: str) -> float:
    ratios = []
    for rep in range(args.repetitions):
        if rep % 2:  # alternate which runs first: a load that drifts within a pair cancels out
            b, a = second(), first()
        else:
            a, b = first(), second()
        ratios.append(a / b)
        print(f"  {label} rep {rep}: {a:.2f} / {b:.2f} img/s = {a / b:.3f}", flush=True)
    median = statistics.median(ratios)
    print(f"{label}: median ratio {median:.3f} over {args.repetitions} (min {min(ratios):.3f}, "
          f"max {max(ratios):.3f})", flush=True)
    return median


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-per-process", type=int, default=32)
    p.add_argument("--threads", type=int, default=2, help="threads of the whole run (split over ranks; one rank: all)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--no-tensorflow", action="store_true", help="leave out TensorFlow vs PyTorch")
    p.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--peer", default="single", choices=["single", "horovod", "ddp"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bare:
        bare(args)
        return 0
    print(f"{args.model} {args.image_size}px batch {args.batch_per_process}, {args.threads} threads, "
          f"{args.steps} steps after {args.warmup}", flush=True)
    if 1 in args.ranks:
        paired(args, lambda: run_archbench(args, framework="pytorch", strategy="single", ranks=1), lambda: run_peer(args, "single", 1),
               label="archbench PyTorch / bare loop, 1 rank (goal >= 0.98)")
    if 1 in args.ranks and not args.no_tensorflow:
        paired(args, lambda: run_archbench(args, framework="tensorflow", strategy="single", ranks=1),
               lambda: run_archbench(args, framework="pytorch", strategy="single", ranks=1),
               label="TensorFlow / PyTorch, archbench, 1 rank")
    if 2 in args.ranks:
        paired(args, lambda: run_archbench(args, framework="pytorch", strategy="horovod", ranks=2), lambda: run_peer(args, "horovod", 2),
               label="archbench Horovod-PyTorch / bare Horovod loop, 2 ranks (goal >= 0.95)")
        paired(args, lambda: run_archbench(args, framework="pytorch", strategy="ddp", ranks=2), lambda: run_peer(args, "ddp", 2),
               label="archbench DDP / bare DDP loop, 2 ranks (goal >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
