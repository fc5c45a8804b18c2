"""Batch sweep: one process, batch sizes at fixed intra-op threads."""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.plan.experiment_types.base import ExperimentType, one_process_sweep, schema_fragment

SCHEMA = schema_fragment("""
description: >
  One process, batch sizes at fixed intra-op threads (default all cores of a node); with
  device gpu the process trains on one GPU (the threads feed it from the host).
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"}]
properties:
  device:
    $ref: "#/$defs/device"
    description: "cpu and/or gpu (default [cpu]); a GPU configuration trains on one GPU of one node (gpus_per_node 1)."
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """One process; batch sizes at fixed threads (default: all cores of the node)."""
    cores = cores_of(system)
    threads = experiment.get("threads", [cores])
    if threads == "all":
        threads = list(range(1, cores + 1))
    return one_process_sweep(experiment, system, threads=threads)


TYPE = ExperimentType(
    "batch_sweep", expand, SCHEMA,
    tables=("summary", "batch_scaling", "vendor_speedup", "io_overhead", "fraction_of_peak",
            "framework_comparison", "precision_speedup"),
    figures=("vendor_speedup", "io_overhead", "batch_scaling", "framework_comparison",
             "precision_speedup"))
