"""Synchronous parameter servers against Horovod on this machine: img/s of 2 local workers
with ``parameter_server`` and ``distributed_replicated`` (1 parameter server beside them)
and with Horovod (MPI allreduce), same model, batch and threads, the three run in turn
(order rotating), several repetitions; prints each run and the median ratio to Horovod.

    python scripts/bench_ps_vs_horovod.py --model alexnet --image-size 64 --batch-per-process 16 \
        --steps 20 --repetitions 3

Each run holds the host guard (archbench.execute.hostguard) as a campaign's runs do.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archbench.execute import hostguard
from archbench.workloads.tfenv import FRAMEWORK_ENV  # noqa: E402
from archbench.workloads.training import benchmark as train  # noqa: E402

SYSTEM = {"launcher": "local", "sockets": 1, "cores_per_socket": 2, "nodes": 1}
RUNS = {  # label -> strategy and variable update
    "horovod": {"strategy": "horovod"},
    "parameter_server": {"strategy": "parameter_server", "variable_update": "parameter_server",
                         "parameter_servers": 1},
    "distributed_replicated": {"strategy": "parameter_server",
                               "variable_update": "distributed_replicated",
                               "parameter_servers": 1},
}


def img_s(args, label: str) -> float:
    """img/s (all workers' images / window wall time) of one 2-worker run of ``label``."""
    measurement = {
        "kind": "train", "model": args.model, "batch_per_process": args.batch_per_process,
        "intra_threads": args.threads, "inter_threads": 1, "vendor_library_enabled": True,
        "data": "synthetic", "warmup_steps": args.warmup, "measured_steps": args.steps,
        "image_size": args.image_size, "num_classes": 1000, "data_format": "NHWC", "nodes": 1,
        "processes_per_node": 2, "env": {}, "tuning": {}, **RUNS[label]}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        env = {**os.environ, **FRAMEWORK_ENV, "TF_CPP_MIN_LOG_LEVEL": "2",
               "OMPI_MCA_rmaps_base_oversubscribe": "1",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        argv = train.command_for(measurement, SYSTEM) + ["--output", str(out),
                                                         "--vendor-probe", "off"]
        with hostguard.held(out):
            subprocess.run(argv, env=env, check=True, capture_output=True, timeout=1800,
                           start_new_session=True)
        record = json.loads(out.read_text())
    assert record["status"] == "ok" and record["workers"] == 2, record["reason"]
    return record["throughput"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-per-process", type=int, default=16, help="per worker")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per worker")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repetitions", type=int, default=3)
    args = p.parse_args(argv)
    labels = list(RUNS)
    results: dict[str, list[float]] = {label: [] for label in labels}
    for rep in range(args.repetitions):
        order = labels[rep % len(labels):] + labels[:rep % len(labels)]
        for label in order:
            results[label].append(img_s(args, label))
        print(f"rep {rep}: " + ", ".join(f"{label} {results[label][-1]:.1f} img/s"
                                         for label in labels), flush=True)
    print(f"{args.model} {args.image_size}px, batch {args.batch_per_process} per worker, 2 workers, "
          f"{args.steps} steps, median of {args.repetitions}:")
    for label in labels:
        ratios = [x / h for x, h in zip(results[label], results["horovod"])]
        print(f"  {label:24s} {statistics.median(results[label]):8.1f} img/s   "
              f"x{statistics.median(ratios):.3f} of horovod (min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
