"""Single vs multi process per node (docs/experiments.md, experiment 5) with Horovod."""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.plan.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    node_counts,
    powers_of_two,
    process_threads,
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
  Single vs multi process per node with Horovod (experiment 5): processes per node with
  intra-op threads = cores / ppn - 1 (at least 1) or as `intra_threads` sets, on one or
  more node counts.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"},
        {$ref: "#/$defs/distributed"}]
properties:
  processes_per_node:
    description: Processes per node; `all` = 1, 2, 4, ... up to the cores (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  intra_threads:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/process_threads"}
    description: >
      Intra-op threads per process (an axis): `cores_minus_one` = cores / ppn - 1 (default),
      `cores` = cores / ppn, 0 = TensorFlow decides (OSU 2019 Fig. 10's MP-Default), or a
      number.
  nodes:
    description: Node counts (those above the system's nodes are skipped); `all` = 1, 2, 4, ... Default [1].
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
unevaluatedProperties: false
""")


def ppn_intra(cores: int, ppn: int) -> int:
    """Intra-op threads of a process when ``ppn`` share a node: cores/ppn - 1, at least 1
    (one core per process left to Horovod's background thread)."""
    return process_threads("cores_minus_one", cores=cores, processes_per_node=ppn)


def expand(experiment: dict, system: dict) -> list[dict]:
    """Processes per node (default 1, 2, 4, ... cores) x intra-op threads (default
    cores/ppn - 1), on each node count."""
    cores = cores_of(system)
    ppns = experiment.get("processes_per_node", "all")
    if ppns == "all":
        ppns = powers_of_two(cores)
    for p in ppns:
        if p > cores:
            skip(f"processes_per_node {p} > the node's {cores} cores")
    ppns = [p for p in ppns if p <= cores]
    out = []
    nodes_list = node_counts(experiment, system)
    # on one node a series grows the workers; over several nodes each layout grows the nodes
    unit = "workers" if len(nodes_list) == 1 else "nodes"
    for nodes in nodes_list:
        for a in product(ppn=ppns, intra=experiment.get("intra_threads", ["cores_minus_one"]),
                         inter=experiment.get("inter_threads", [1]),
                         controller=controllers(experiment, nodes), **training_axes(experiment)):
            intra = process_threads(a["intra"], cores=cores, processes_per_node=a["ppn"])
            out.append(training_configuration(
                experiment, system, **swept(a), strategy="horovod", nodes=nodes,
                processes_per_node=a["ppn"], intra_threads=intra,
                inter_threads=thread_count(a["inter"], intra), scaling_unit=unit, tuning=controller_tuning(a["controller"])))
    return dedupe(out)


TYPE = ExperimentType(
    "ppn_sweep", expand, SCHEMA,
    # batch_scaling: batch sizes at a fixed layout, e.g. OSU 2019 Fig. 5 (one node) and
    # Fig. 11 (128 nodes)
    tables=("summary", "process_layout", "node_scaling", "efficiency_heatmap", "vendor_speedup",
            "io_overhead", "batch_scaling", "framework_comparison", "precision_speedup"),
    figures=("node_scaling", "scaling_speedup", "efficiency_heatmap", "process_layout",
             "batch_scaling", "framework_comparison", "precision_speedup"))
