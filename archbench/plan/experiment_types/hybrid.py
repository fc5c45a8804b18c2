"""Hybrid processes x threads filling one node (docs/experiments.md, experiment 2); its
best layout feeds node_scaling's ``best`` (see ``archbench.results.tables.best``)."""

from __future__ import annotations

from typing import Iterable

from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    product,
    schema_fragment,
    skip,
    swept,
    thread_count,
    training_axes,
    training_configuration,
)

SCHEMA = schema_fragment("""
description: >
  Processes x threads filling one node with Horovod (experiment 2): every p dividing the
  cores with t = cores / p (1 x 48, 2 x 24, ... 48 x 1 on 48 cores), per-process batch
  sizes and inter-op threads. Its best configuration per system and model feeds
  node_scaling's `best`.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"},
        {$ref: "#/$defs/distributed"}]
properties:
  processes:
    description: Processes per node to try (threads = cores // processes); `all` = every divisor of the cores (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  batch_mode:
    enum: [per_process, per_node]
    description: "per_process (default): batch_per_process is per process; per_node: each value is a node's, divided among the processes (batch // p)."
  layout_batch_per_process:
    description: >
      Batches for given process counts, replacing batch_per_process for those layouts
      (read as batch_mode says), e.g. [{processes: 1, batch_per_process: [512]}] with
      batch_per_process [256]: 512 at 1 x cores, 256 elsewhere (BSC 2019 Table II).
    type: array
    minItems: 1
    uniqueItems: true
    items:
      type: object
      required: [processes, batch_per_process]
      additionalProperties: false
      properties:
        processes: {type: integer, minimum: 1, maximum: 1048576, description: Processes per node of the layout.}
        batch_per_process: {$ref: "#/$defs/batch_list", description: Its batches.}
unevaluatedProperties: false
""")


def hybrid_layouts(cores: int, processes: Iterable[int] | str = "all") -> list[tuple[int, int]]:
    """(processes, threads) pairs filling ``cores``: every p dividing the cores with
    t = cores / p (``all``), or the given process counts with t = cores // p."""
    if processes == "all":
        return [(p, cores // p) for p in range(1, cores + 1) if cores % p == 0]
    for p in processes:
        if p > cores:
            skip(f"processes {p} > the node's {cores} cores")
    return [(p, cores // p) for p in processes if p <= cores]


def layout_batches(experiment: dict, processes: int) -> list[int]:
    """The batches of the layout with ``processes`` processes: its
    ``layout_batch_per_process`` entry, else the experiment's ``batch_per_process``.
    ConfigError when two entries give one process count."""
    found, first = None, {}
    for i, entry in enumerate(experiment.get("layout_batch_per_process", [])):
        if entry["processes"] in first:
            raise ConfigError(f"layout_batch_per_process.{i}.processes: {entry['processes']} is "
                              f"given twice (first in layout_batch_per_process.{first[entry['processes']]})")
        first[entry["processes"]] = i
        if entry["processes"] == processes:
            found = entry["batch_per_process"]
    return experiment["batch_per_process"] if found is None else found


def expand(experiment: dict, system: dict) -> list[dict]:
    """Processes x threads filling one node (1 x cores ... cores x 1) with Horovod, per
    process batch sizes (or per node: divided among the processes; or per layout),
    inter-op threads."""
    per_node = experiment.get("batch_mode", "per_process") == "per_node"
    out = []
    for p, t in hybrid_layouts(cores_of(system), experiment.get("processes", "all")):
        batches = layout_batches(experiment, p)
        for a in product(inter=experiment.get("inter_threads", [1]),
                         controller=controllers(experiment, 1),
                         **training_axes(experiment, batch_per_process=batches)):
            batch = a["batch_per_process"] // p if per_node else a["batch_per_process"]
            if batch < 1:
                skip(f"batch {a['batch_per_process']} per node leaves none to each of {p} processes")
                continue
            out.append(training_configuration(
                experiment, system, **{**swept(a), "batch_per_process": batch},
                strategy="horovod", processes_per_node=p, intra_threads=t,
                inter_threads=thread_count(a["inter"], t),
                tuning=controller_tuning(a["controller"])))
    return dedupe(out)


TYPE = ExperimentType(
    "hybrid", expand, SCHEMA,
    tables=("summary", "hybrid_configurations", "hybrid_best", "vendor_speedup", "io_overhead",
            "framework_comparison", "precision_speedup"),
    figures=("hybrid_configurations", "framework_comparison", "precision_speedup"))
