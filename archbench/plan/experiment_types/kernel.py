"""The ``kernel`` experiment type (docs/experiments.md, experiment 7): HPC kernels in
TensorFlow.

One experiment expands into kernels x sizes x tile sizes x workers x nodes. What a size
means, whether sizes and tile sizes must be powers of two, whether the kernel is tiled
(tile sizes apply to tiled kernels only; tiles larger than N are skipped), a fixed worker
count (stream_comm: two), the default steps and the kernel's own experiment keys
(``settings``) all come from the kernel's spec (``archbench.workloads.kernels.KERNELS``). ``sizes``
is one list for all kernels or a mapping kernel -> list. ``workers_per_node`` replaces the
``nodes`` axis by a fixed layout: each worker count runs on ceil(workers / workers_per_node)
nodes (TensorFlow instances per node, KTH/ORNL 2019 Table I). Worker counts that do not
fill the nodes evenly, and node counts beyond the system's, are skipped.

``device`` is an axis (default [cpu]). A GPU configuration runs one worker per GPU, as
KTH/ORNL 2019 ran one TensorFlow instance per GPU: device "gpu", gpus_per_node =
processes_per_node = workers per node, gpus = workers, its series counting GPUs; a system
with fewer GPUs per node skips it, and so does a CPU configuration given a setting value
only GPU runs take (stream ``memory: host``). CPU configurations are as before the axis.
"""

from __future__ import annotations

from typing import Callable

from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    devices,
    gpu_fields,
    gpus_fit,
    product,
    schema_fragment,
    skip,
)
from archbench.workloads.kernels import KERNELS, spec_of
from archbench.workloads.kernels.common import is_power_of_two
from archbench.workloads.kernels.spec import KERNEL_STRATEGY, KernelSpec, Setting

# The keys every kernel experiment takes; the kernels' descriptions, sizes and defaults
# and their own keys (settings) are added from the registry by _schema().
BASE_SCHEMA = """
description: >
  HPC kernels written in TensorFlow (experiment 7), run on a cluster of TensorFlow
  workers: kernels x sizes x tile_sizes x workers x nodes.
allOf: [{$ref: "#/$defs/common"}]
required: [kernels, sizes]
properties:
  kernels:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/kernel_name"}
  sizes:
    oneOf:
      - {$ref: "#/$defs/size_list"}
      - type: object
        minProperties: 1
        propertyNames: {$ref: "#/$defs/kernel_name"}
        additionalProperties: {$ref: "#/$defs/size_list"}
  tile_sizes: {$ref: "#/$defs/size_list"}
  workers: {$ref: "#/$defs/positive_list"}
  nodes:
    $ref: "#/$defs/positive_list"
    description: >-
      Nodes the workers spread over (workers must be a multiple); counts beyond the
      system's nodes are skipped. Default [1].
  workers_per_node:
    type: integer
    minimum: 1
    description: >-
      Workers (TensorFlow instances) one node holds; instead of `nodes`, each worker count
      runs on ceil(workers / workers_per_node) nodes, e.g. 4 per node: 2 and 4 workers on
      one node, 8 on two, 16 on four (KTH/ORNL 2019 Table I).
  device:
    $ref: "#/$defs/device"
    description: >-
      cpu and/or gpu (default [cpu]). A GPU configuration runs one worker (TensorFlow
      instance) per GPU, bound to it by local rank: its workers per node are the GPUs per
      node it uses (KTH/ORNL 2019 Table I: 1, 2 or 4 instances per node); a system with
      fewer GPUs per node skips it. It fails (status failed) when a worker sees no GPU or
      the step ran elsewhere.
  warmup_steps: {$ref: "#/$defs/warmup_count"}
  steps: {$ref: "#/$defs/step_count"}
unevaluatedProperties: false
"""


def _each(specs: list[KernelSpec], value: Callable[[KernelSpec], object]) -> str:
    """``"name: value; name: value"`` over ``specs``."""
    return "; ".join(f"{spec.name}: {value(spec)}" for spec in specs)


def settings() -> dict[str, tuple[KernelSpec, Setting]]:
    """Every kernel's experiment keys: name -> (kernel, setting); a key two kernels
    declare must be the same setting."""
    found: dict[str, tuple[KernelSpec, Setting]] = {}
    for spec in KERNELS.values():
        for setting in spec.settings:
            if setting.name in found and found[setting.name][1] != setting:
                raise ValueError(f"kernels {found[setting.name][0].name} and {spec.name} declare "
                                 f"different settings '{setting.name}'")
            found.setdefault(setting.name, (spec, setting))
    return found


def _schema() -> dict:
    """The experiment's schema: BASE_SCHEMA, the registry's descriptions and keys."""
    schema = schema_fragment(BASE_SCHEMA)
    properties, specs = schema["properties"], list(KERNELS.values())
    schema["description"] = (f"{schema['description'].rstrip()} Records in each kernel's unit: "
                             f"{_each(specs, lambda s: s.unit)}.")
    tiled = [spec for spec in specs if spec.tiled]
    fixed = [spec for spec in specs if spec.workers]
    properties["kernels"]["description"] = f"Kernels to run: {_each(specs, lambda s: s.help)}."
    properties["sizes"]["description"] = (
        "Problem sizes, one list for all kernels or a mapping kernel -> list: "
        f"{_each(specs, lambda s: s.size_help)}.")
    properties["tile_sizes"]["description"] = (
        f"Tile sizes of the tiled kernels, powers of two; tiles larger than N are skipped. "
        f"{_each(tiled, lambda s: s.tile_help)}.")
    properties["workers"]["description"] = "TensorFlow worker tasks (processes) per run. Default [1]." + (
        f" Fixed for {_each(fixed, lambda s: s.workers)}." if fixed else "")
    properties["warmup_steps"]["description"] = (
        f"Untimed repetitions of the kernel in each run (default {_each(specs, lambda s: s.steps[0])}).")
    properties["steps"]["description"] = (
        f"Timed repetitions of the kernel in each run (default {_each(specs, lambda s: s.steps[1])}).")
    for name, (spec, setting) in settings().items():
        if name in properties:
            raise ValueError(f"kernel {spec.name}: setting '{name}' clashes with an experiment key")
        properties[name] = setting.schema(spec.name)
    return schema


SCHEMA = _schema()


def sizes_of(experiment: dict, kernel: str) -> list[int]:
    """The sizes one kernel runs with (``sizes`` as a list, or a per-kernel mapping)."""
    sizes = experiment["sizes"]
    if isinstance(sizes, dict):
        if kernel not in sizes:
            raise ConfigError(f"sizes: no sizes given for kernel '{kernel}'")
        return sizes[kernel]
    return sizes


def kernel_configuration(experiment: dict, system: dict, *, spec: KernelSpec, axes: dict) -> dict:
    """One configuration of ``spec`` at ``axes`` (size, tile, workers, nodes, device): record
    fields plus the plan-only keys the worker needs (the kernel's settings)."""
    size, tile, workers, nodes = axes["size"], axes["tile"], axes["workers"], axes["nodes"]
    per_node = workers // nodes
    conf = {
        "kind": "kernel", "framework": "tensorflow", "kernel": spec.name, "problem_size": size,
        "tile_size": tile, "workers": workers, "nodes": nodes, "processes_per_node": per_node,
        "strategy": KERNEL_STRATEGY, "intra_threads": max(1, cores_of(system) // per_node),
        "throughput_unit": spec.unit,
        "vendor_library": system["vendor_library"] if system["vendor_library"] != "none" else None,
    }
    conf["warmup_steps"] = experiment.get("warmup_steps", spec.steps[0])
    conf["measured_steps"] = experiment.get("steps", spec.steps[1])
    tuning = {}
    for setting in spec.settings:
        if not setting.in_tuning:
            conf[setting.name] = setting.value(experiment.get(setting.name, setting.default), workers)
        elif setting.name in experiment:
            tuning[setting.name] = setting.value(experiment[setting.name], workers)
    if tuning:  # plan-only; part of the configuration id
        conf["tuning"] = tuning
    if axes.get("device") == "gpu":  # one worker per GPU
        conf.update(gpu_fields(nodes=nodes, gpus_per_node=per_node), scaling_unit="gpus")
    return conf


def gpu_only_values(experiment: dict, spec: KernelSpec) -> list[str]:
    """The experiment's settings of ``spec`` that only a GPU run takes, as "name value"."""
    return [f"{s.name} {experiment[s.name]}" for s in spec.settings
            if s.name in experiment and experiment[s.name] in s.gpu_only]


def nodes_for(experiment: dict, workers: int) -> list[int]:
    """The node counts ``workers`` workers run on: ceil(workers / workers_per_node) when
    the experiment fixes the workers per node, else its ``nodes`` axis (default [1])."""
    per_node = experiment.get("workers_per_node")
    if per_node is None:
        return experiment.get("nodes", [1])
    if "nodes" in experiment:
        raise ConfigError("workers_per_node: workers_per_node and nodes exclude each other: give one")
    return [-(-workers // per_node)]


def expand(experiment: dict, system: dict) -> list[dict]:
    """kernels x devices x sizes x tile sizes (tiled kernels) x workers x nodes (or the
    nodes ``workers_per_node`` gives each worker count)."""
    configurations, seen = [], set()
    for name in experiment["kernels"]:
        spec = spec_of(name)
        sizes = sizes_of(experiment, name)
        if spec.power_of_two and not all(is_power_of_two(n) for n in sizes):
            raise ConfigError(f"sizes: {name} needs powers of two, got {sizes}")
        tiles = experiment.get("tile_sizes", [None]) if spec.tiled else [None]
        if not all(t is None or is_power_of_two(t) for t in tiles):
            raise ConfigError(f"tile_sizes: {name} needs powers of two, got {tiles}")
        workers = [spec.workers] if spec.workers else experiment.get("workers", [1])
        axes = [{**a, "nodes": n}
                for a in product(device=devices(experiment), size=sizes, tile=tiles, workers=workers)
                for n in nodes_for(experiment, a["workers"])]
        gpu_only = gpu_only_values(experiment, spec)
        for a in axes:
            if a["device"] == "cpu" and gpu_only:
                skip(f"{', '.join(gpu_only)}: only GPU runs take it (device gpu)")
                continue
            if a["tile"] is not None and a["tile"] > a["size"]:
                skip(f"tile_sizes {a['tile']} > size {a['size']}")
                continue
            if a["nodes"] > system["nodes"]:
                skip(f"nodes {a['nodes']} > the system's {system['nodes']}")
                continue
            if a["workers"] % a["nodes"]:
                skip(f"workers {a['workers']} do not fill {a['nodes']} nodes evenly")
                continue
            if a["device"] == "gpu" and not gpus_fit(a["workers"] // a["nodes"], system):
                continue
            key = (name, a["device"], a["size"], a["tile"], a["workers"], a["nodes"])
            if key in seen:
                continue
            seen.add(key)
            configurations.append(kernel_configuration(experiment, system, spec=spec, axes=a))
    return configurations


TYPE = ExperimentType(
    "kernel", expand, SCHEMA,
    tables=("summary", "kernel_gflops", "stream_bandwidth", "fraction_of_peak"),
    figures=("kernel_gflops", "stream_bandwidth"))
