"""The ``kernel`` experiment type (DESIGN.md experiment 7): HPC kernels in TensorFlow.

One experiment expands into kernels x sizes x tile sizes x workers x nodes. ``sizes`` is
N for matmul, cg and fft, fp64 elements per array per worker for stream, and the message
size in MB (2**20 bytes) for stream_comm; give one list for all kernels or a mapping
kernel -> list. Sizes (matmul, fft) and tile sizes must be powers of two; tile sizes apply
to matmul and fft only, and tiles larger than N are skipped. stream_comm always runs on
two workers (task 0 -> task 1). Worker counts that do not fill the nodes evenly, and node
counts beyond the system's, are skipped.
"""

from __future__ import annotations

from archbench.campaign import ConfigError, cores_of, experiment_type, product
from archbench.kernels import STEPS, UNITS
from archbench.kernels.common import is_power_of_two

TILED = ("matmul", "fft")
POWER_OF_TWO = ("matmul", "fft")
DEFAULT_ITERATIONS = 500


def sizes_of(experiment: dict, kernel: str) -> list[int]:
    """The sizes one kernel runs with (``sizes`` as a list, or a per-kernel mapping)."""
    sizes = experiment["sizes"]
    if isinstance(sizes, dict):
        if kernel not in sizes:
            raise ConfigError(f"sizes: no sizes given for kernel '{kernel}'")
        return sizes[kernel]
    return sizes


def kernel_configuration(experiment: dict, system: dict, kernel: str, size: int,
                         tile: int | None, workers: int, nodes: int) -> dict:
    """One kernel configuration: record fields plus the plan-only keys the worker needs."""
    per_node = workers // nodes
    conf = {
        "kind": "kernel", "framework": "tensorflow", "kernel": kernel, "problem_size": size,
        "tile_size": tile, "workers": workers, "nodes": nodes, "processes_per_node": per_node,
        "strategy": "workers", "intra_threads": max(1, cores_of(system) // per_node),
        "throughput_unit": UNITS[kernel],
        "vendor_library": system["vendor_library"] if system["vendor_library"] != "none" else None,
    }
    conf["warmup_steps"] = experiment.get("warmup_steps", STEPS[kernel][0])
    conf["measured_steps"] = experiment.get("steps", STEPS[kernel][1])
    tuning = {}
    if kernel == "cg":
        conf["iterations"] = experiment.get("iterations", DEFAULT_ITERATIONS)
        if "tolerance" in experiment:
            tuning["tolerance"] = experiment["tolerance"]
    if kernel == "matmul" and "reducers" in experiment:
        tuning["reducers"] = min(experiment["reducers"], workers)
    if tuning:  # plan-only; part of the configuration id
        conf["tuning"] = tuning
    return conf


@experiment_type("kernel")
def expand_kernel(experiment: dict, system: dict) -> list[dict]:
    """kernels x sizes x tile sizes (matmul, fft) x workers x nodes."""
    configurations, seen = [], set()
    for kernel in experiment["kernels"]:
        sizes = sizes_of(experiment, kernel)
        if kernel in POWER_OF_TWO and not all(is_power_of_two(n) for n in sizes):
            raise ConfigError(f"sizes: {kernel} needs powers of two, got {sizes}")
        tiles = experiment.get("tile_sizes", [None]) if kernel in TILED else [None]
        if not all(t is None or is_power_of_two(t) for t in tiles):
            raise ConfigError(f"tile_sizes: {kernel} needs powers of two, got {tiles}")
        workers = [2] if kernel == "stream_comm" else experiment.get("workers", [1])
        axes = product(size=sizes, tile=tiles, workers=workers, nodes=experiment.get("nodes", [1]))
        for a in axes:
            if a["tile"] is not None and a["tile"] > a["size"]:
                continue
            if a["nodes"] > system["nodes"] or a["workers"] % a["nodes"]:
                continue
            key = (kernel, a["size"], a["tile"], a["workers"], a["nodes"])
            if key in seen:
                continue
            seen.add(key)
            configurations.append(kernel_configuration(
                experiment, system, kernel, a["size"], a["tile"], a["workers"], a["nodes"]))
    return configurations
