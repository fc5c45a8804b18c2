"""Cost of counting allreduces: 2-rank Horovod img/s with the dynamic timeline armed (the
default: HOROVOD_TIMELINE=DYNAMIC, recorded only on steps after the measured window)
against runs without it (HOROVOD_TIMELINE=""), alternating, several repetitions, same
machine and minute. Expected ratio ~1.0 (the timeline is off inside the window).

    python scripts/bench_timeline_overhead.py --model alexnet --image-size 64 --batch-per-process 16 \
        --steps 30 --repetitions 5
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

from archbench.workloads.tfenv import FRAMEWORK_ENV  # noqa: E402
from archbench.workloads.training import benchmark as train  # noqa: E402

SYSTEM = {"launcher": "local", "sockets": 1, "cores_per_socket": 2, "nodes": 1}


def img_s(args, timeline: str | None) -> tuple[float, float | None]:
    """(img/s, allreduces per step) of one 2-rank run; ``timeline`` None = the default."""
    measurement = {
        "kind": "train", "model": args.model, "batch_per_process": args.batch_per_process,
        "intra_threads": 1, "inter_threads": 1, "vendor_library_enabled": True,
        "data": "synthetic", "warmup_steps": 3, "measured_steps": args.steps,
        "image_size": args.image_size, "num_classes": 10, "data_format": "NHWC", "nodes": 1,
        "processes_per_node": 2, "strategy": "horovod", "env": {}, "tuning": {}}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        env = {**os.environ, **FRAMEWORK_ENV, "TF_CPP_MIN_LOG_LEVEL": "2",
               "OMPI_MCA_rmaps_base_oversubscribe": "1",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        argv = train.command_for(measurement, SYSTEM) + ["--output", str(out)]
        if timeline is not None:
            env["HOROVOD_TIMELINE"] = timeline
            argv[1:1] = ["-x", "HOROVOD_TIMELINE"]  # mpirun passes it to the ranks
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=600)
        record = json.loads(out.read_text())
    return record["throughput"], record["metrics"].get("allreduces_per_step", {}).get("value")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-per-process", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repetitions", type=int, default=5)
    args = p.parse_args(argv)
    ratios = []
    for rep in range(args.repetitions):
        if rep % 2:  # alternate which goes first
            plain, none = img_s(args, "")
            armed, count = img_s(args, None)
        else:
            armed, count = img_s(args, None)
            plain, none = img_s(args, "")
        assert none is None and count is not None, "the timeline switch did not take effect"
        ratios.append(armed / plain)
        print(f"rep {rep}: armed {armed:.1f} img/s ({count:g} allreduces/step), "
              f"without {plain:.1f} img/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"median ratio armed / without: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
