"""Single vs multi process per node (DESIGN.md experiment 5) with Horovod."""

from __future__ import annotations

from archbench.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    node_counts,
    on_off,
    powers_of_two,
    product,
    schema_fragment,
    thread_count,
    training_axes,
    training_configuration,
)
from archbench.systems import cores_of

SCHEMA = schema_fragment("""
description: >
  Single vs multi process per node with Horovod (experiment 5): processes per node with
  intra-op threads = cores / ppn - 1 (at least 1), on one or more node counts.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/distributed"}]
required: [models, batch_sizes]
properties:
  processes_per_node:
    description: Processes per node; `all` = 1, 2, 4, ... up to the cores (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  nodes:
    description: Node counts (those above the system's nodes are skipped); `all` = 1, 2, 4, ... Default [1].
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
unevaluatedProperties: false
""")


def ppn_intra(cores: int, ppn: int) -> int:
    """Intra-op threads of a process when ``ppn`` share a node: cores/ppn - 1, at least 1
    (one core per process left to Horovod's background thread)."""
    return max(1, cores // ppn - 1)


def expand(experiment: dict, system: dict) -> list[dict]:
    """Processes per node (default 1, 2, 4, ... cores) with intra = cores/ppn - 1, on each
    node count."""
    cores = cores_of(system)
    ppns = experiment.get("processes_per_node", "all")
    ppns = powers_of_two(cores) if ppns == "all" else [p for p in ppns if p <= cores]
    out = []
    nodes_list = node_counts(experiment, system)
    # on one node a series grows the workers; over several nodes each layout grows the nodes
    unit = "workers" if len(nodes_list) == 1 else "nodes"
    for nodes in nodes_list:
        for a in product(ppn=ppns, batch=experiment["batch_sizes"],
                         inter=experiment.get("inter_threads", [1]),
                         controller=controllers(experiment, nodes), **training_axes(experiment)):
            intra = ppn_intra(cores, a["ppn"])
            out.append(training_configuration(
                experiment, system, model=a["model"], batch_per_process=a["batch"],
                strategy="horovod", nodes=nodes, processes_per_node=a["ppn"],
                intra_threads=intra, inter_threads=thread_count(a["inter"], intra),
                vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
                scaling_unit=unit, tuning=controller_tuning(a["controller"])))
    return dedupe(out)


TYPE = ExperimentType(
    "ppn_sweep", expand, SCHEMA,
    tables=("summary", "process_layout", "node_scaling", "efficiency_heatmap", "vendor_speedup",
            "io_overhead"),
    figures=("node_scaling", "scaling_speedup", "efficiency_heatmap", "process_layout"))
