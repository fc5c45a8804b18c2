"""Horovod tuning (docs/experiments.md, experiment 6): HOROVOD_CYCLE_TIME x
HOROVOD_FUSION_THRESHOLD."""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.plan.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    node_counts,
    process_threads,
    product,
    schema_fragment,
    swept,
    thread_count,
    training_axes,
    training_configuration,
)

SCHEMA = schema_fragment("""
description: >
  Horovod tuning (experiment 6): HOROVOD_CYCLE_TIME x HOROVOD_FUSION_THRESHOLD on a
  multi-process configuration, set on every rank and recorded.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"},
        {$ref: "#/$defs/distributed"}]
required: [cycle_time_ms, fusion_threshold_mb]
properties:
  cycle_time_ms:
    type: array
    minItems: 1
    uniqueItems: true
    items: {type: number, exclusiveMinimum: 0, maximum: 60000}
    description: HOROVOD_CYCLE_TIME values in milliseconds (at most a minute).
  fusion_threshold_mb:
    type: array
    minItems: 1
    uniqueItems: true
    items: {type: number, minimum: 0, maximum: 65536}
    description: HOROVOD_FUSION_THRESHOLD values in MiB (0 disables tensor fusion; at most 64 GiB).
  processes_per_node: {type: integer, minimum: 1, description: Processes per node. Default the cores of a node (one thread each).}
  threads_per_process:
    $ref: "#/$defs/process_threads"
    description: "Intra-op threads per process: a number (0 = TensorFlow decides), `cores` = cores / processes_per_node (default) or `cores_minus_one` = cores / processes_per_node - 1 (a core per process left to Horovod, OSU 2019 Sec. IX)."
  nodes:
    description: Node counts (those above the system's nodes are skipped). Default [1].
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """Horovod knobs on a multi-process configuration: HOROVOD_CYCLE_TIME (ms) x
    HOROVOD_FUSION_THRESHOLD (MiB, 0 = no fusion), set on every rank."""
    cores = cores_of(system)
    ppn = experiment.get("processes_per_node", cores)
    threads = process_threads(experiment.get("threads_per_process", "cores"), cores=cores,
                              processes_per_node=ppn)
    out = []
    for nodes in node_counts(experiment, system):
        for a in product(cycle=experiment["cycle_time_ms"],
                         fusion=experiment["fusion_threshold_mb"],
                         inter=experiment.get("inter_threads", [1]),
                         controller=controllers(experiment, nodes), **training_axes(experiment)):
            out.append(training_configuration(
                experiment, system, **swept(a), strategy="horovod", nodes=nodes,
                processes_per_node=ppn, intra_threads=threads,
                inter_threads=thread_count(a["inter"], threads),
                tuning={**controller_tuning(a["controller"]),
                        "horovod_cycle_time_ms": a["cycle"],
                        "horovod_fusion_threshold_bytes": int(round(a["fusion"] * 2**20))}))
    return dedupe(out)


TYPE = ExperimentType(
    "horovod_tuning", expand, SCHEMA,
    tables=("summary", "horovod_tuning", "framework_comparison", "precision_speedup"),
    figures=("horovod_tuning", "horovod_cycle_time", "framework_comparison", "precision_speedup"))
