"""Thread scaling (docs/experiments.md, experiment 1): one process, intra-op threads
1..cores, several batch sizes, vendor library on/off."""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.plan.experiment_types.base import ExperimentType, one_process_sweep, schema_fragment

SCHEMA = schema_fragment("""
description: One process, intra-op threads 1..cores, several batch sizes, vendor library on/off (experiment 1).
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"}]
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """One process; threads x batch sizes x vendor library on/off x data x inter threads."""
    threads = experiment.get("threads", "all")
    if threads == "all":
        threads = list(range(1, cores_of(system) + 1))
    return one_process_sweep(experiment, system, threads=threads)


TYPE = ExperimentType(
    "thread_scaling", expand, SCHEMA,
    tables=("summary", "thread_efficiency", "batch_scaling", "vendor_speedup", "io_overhead",
            "fraction_of_peak", "framework_comparison", "precision_speedup"),
    figures=("thread_scaling", "thread_efficiency", "vendor_speedup", "io_overhead",
             "batch_scaling", "framework_comparison", "precision_speedup"))
