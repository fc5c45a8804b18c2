"""HPC kernels written as TensorFlow dataflow programs (docs/experiments.md, experiment 7).

    python -m archbench.kernels stream      --size 33554432 --workers 2   # elements per array
    python -m archbench.kernels stream_comm --size 64 --workers 2         # message MB (2**20 bytes)
    python -m archbench.kernels matmul      --size 4096 --tile-size 1024 --workers 2
    python -m archbench.kernels cg          --size 8192 --iterations 500 --workers 2
    python -m archbench.kernels fft         --size 16777216 --tile-size 4194304 --workers 2

Each run writes one JSON record (kind "kernel"). Workers are TensorFlow servers: local
processes spawned by the CLI, or Slurm tasks when launched with ``srun`` (see cluster.py).

Every kernel is one module holding its :class:`~archbench.workloads.kernels.spec.KernelSpec`, and
one line in ``KERNELS`` below. This package stays free of TensorFlow imports: the
campaign loader imports it.
"""

from __future__ import annotations

import sys

from archbench.core.hardware import cpus_per_process
from archbench.workloads.kernels import cg, fft, matmul, stream
from archbench.workloads.kernels.spec import KernelSpec, option_flag
from archbench.workloads.launch import srun_argv

KERNELS: dict[str, KernelSpec] = {spec.name: spec for spec in (
    stream.STREAM,
    stream.STREAM_COMM,
    matmul.SPEC,
    cg.SPEC,
    fft.SPEC,
)}

# Record fields a kernel record states as planned (archbench.execute.supervisor): the
# worker reports the layout it found (local workers on one node), the threads it chose and
# the vendor library of its machine's architecture; a planned run's record keeps the plan's.
PLANNED_FIELDS = ("kind", "framework", "kernel", "problem_size", "tile_size", "workers", "nodes",
                  "processes_per_node", "strategy", "intra_threads", "throughput_unit",
                  "vendor_library", "vendor_library_enabled", "warmup_steps", "measured_steps",
                  "device", "gpus_per_node", "gpus")


def spec_of(name: str) -> KernelSpec:
    """The spec of kernel ``name``."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel '{name}' (known: {', '.join(KERNELS)})")
    return KERNELS[name]


def setting_metrics(measurement: dict) -> dict:
    """The settings a kernel run is given that its record keeps as metrics: none (its
    settings are configuration fields)."""
    return {}


def command_for(measurement: dict, system: dict) -> list[str]:
    """argv that runs ``measurement`` (a kernel configuration); the supervisor appends
    ``--output PATH``.

    On a system whose launcher is srun, a configuration on more than one node runs under
    ``srun`` (``archbench.workloads.launch.srun_argv``) with one task per worker. Otherwise the
    command spawns its workers locally (``--workers``).
    """
    m, spec = measurement, spec_of(measurement["kernel"])
    argv = [sys.executable, "-m", "archbench.kernels", spec.name,
            "--size", str(m["problem_size"]), "--workers", str(m["workers"])]
    if m.get("device") == "gpu":
        argv += ["--device", "gpu"]
    if m.get("tile_size"):
        argv += ["--tile-size", str(m["tile_size"])]
    if m.get("intra_threads"):
        argv += ["--threads", str(m["intra_threads"])]
    if m.get("warmup_steps") is not None:
        argv += ["--warmup-steps", str(m["warmup_steps"])]
    if m.get("measured_steps"):
        argv += ["--steps", str(m["measured_steps"])]
    for setting in spec.settings:  # settings outside ``tuning``: top-level keys
        if not setting.in_tuning:
            argv += [setting.flag, str(m.get(setting.name, setting.default))]
    for key, value in sorted((m.get("tuning") or {}).items()):
        argv += [option_flag(key), str(value)]
    nodes = int(m.get("nodes", 1))
    if nodes > 1 and system.get("launcher") == "srun":
        per_task = cpus_per_process(system, int(m.get("processes_per_node", 1)))
        argv = srun_argv(nodes=nodes, tasks=int(m["workers"]), cpus_per_task=per_task) + argv
    return argv
