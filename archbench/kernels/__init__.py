"""HPC kernels written as TensorFlow dataflow programs (DESIGN.md experiment 7).

    python -m archbench.kernels stream      --size 33554432 --workers 2   # elements per array
    python -m archbench.kernels stream_comm --size 64 --workers 2         # message MB (2**20 bytes)
    python -m archbench.kernels matmul      --size 4096 --tile-size 1024 --workers 2
    python -m archbench.kernels cg          --size 8192 --iterations 500 --workers 2
    python -m archbench.kernels fft         --size 16777216 --tile-size 4194304 --workers 2

Each run writes one JSON record (kind "kernel"). Workers are TensorFlow servers: local
processes spawned by the CLI, or Slurm tasks when launched with ``srun`` (see cluster.py).
This module stays free of TensorFlow imports: the campaign loader imports it.
"""

from __future__ import annotations

import os
import sys

KERNELS = ("stream", "stream_comm", "matmul", "cg", "fft")
UNITS = {"stream": "GB/s", "stream_comm": "MB/s", "matmul": "GFLOP/s", "cg": "GFLOP/s",
         "fft": "GFLOP/s"}
# (warmup, measured) repetitions of the whole kernel inside one run.
STEPS = {"stream": (2, 10), "stream_comm": (2, 10), "matmul": (1, 3), "cg": (1, 1), "fft": (1, 5)}


def command_for(measurement: dict, system: dict) -> list[str]:
    """argv that runs ``measurement`` (a kernel configuration); the supervisor appends
    ``--output PATH``.

    On a system whose launcher is srun, a configuration on more than one node runs as
    ``srun --ntasks=<workers> --nodes=<nodes> --cpus-per-task=<c> ...``: every task is one
    worker. Otherwise the command spawns its workers locally (``--workers``).
    """
    m = measurement
    argv = [sys.executable, "-m", "archbench.kernels", m["kernel"],
            "--size", str(m["problem_size"]), "--workers", str(m["workers"])]
    if m.get("tile_size"):
        argv += ["--tile-size", str(m["tile_size"])]
    if m.get("intra_threads"):
        argv += ["--threads", str(m["intra_threads"])]
    if m.get("warmup_steps") is not None:
        argv += ["--warmup-steps", str(m["warmup_steps"])]
    if m.get("measured_steps"):
        argv += ["--steps", str(m["measured_steps"])]
    if m["kernel"] == "cg":
        argv += ["--iterations", str(m.get("iterations", 500))]
    for key, value in sorted((m.get("tuning") or {}).items()):  # tolerance, reducers
        argv += [f"--{key}", str(value)]
    nodes = int(m.get("nodes", 1))
    if nodes > 1 and system.get("launcher") == "srun":
        per_socket = system.get("cores_per_socket", "auto")
        per_socket = per_socket if isinstance(per_socket, int) else (os.cpu_count() or 1)
        cores = int(system.get("sockets", 1)) * per_socket
        per_task = max(1, cores // int(m.get("processes_per_node", 1)))
        argv = ["srun", f"--ntasks={m['workers']}", f"--nodes={nodes}",
                f"--cpus-per-task={per_task}", "--distribution=block"] + argv
    return argv
