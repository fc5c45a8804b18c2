"""Inter/intra-op thread sweep (DESIGN.md experiment 3): one process pinned to 1..node
cores, with the MKL/OpenMP environment on and off."""

from __future__ import annotations

from archbench.experiment_types.base import (
    ExperimentType,
    dedupe,
    on_off,
    product,
    schema_fragment,
    thread_count,
    training_axes,
    training_configuration,
)
from archbench.systems import cores_of

MKL_ENV = {"KMP_BLOCKTIME": "0", "KMP_AFFINITY": "granularity=fine,compact,1,0"}

SCHEMA = schema_fragment("""
description: >
  Inter/intra-op thread sweep of one process pinned to 1..node cores (experiment 3),
  with MKL/OpenMP settings (KMP_BLOCKTIME=0, KMP_AFFINITY=granularity=fine,compact,1,0)
  on and off. Here inter_threads defaults to [0, 1, 2, cores].
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}]
required: [models, batch_sizes]
properties:
  cores:
    description: Cores the process is pinned to; `all` = 1..cores of a node. Default [cores of a node].
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  intra_threads:
    type: array
    minItems: 1
    items: {$ref: "#/$defs/thread_count"}
    description: Intra-op threads (0 = TensorFlow decides, `cores` = the pinned cores). Default [0, 1, cores].
  mkl_settings:
    type: array
    minItems: 1
    items: {$ref: "#/$defs/on_off"}
    description: Runs with (on) and without (off) the MKL/OpenMP environment of mkl_env. Default [off, on].
  mkl_env:
    type: object
    description: The MKL/OpenMP environment of mkl_settings on (default KMP_BLOCKTIME=0, KMP_AFFINITY=granularity=fine,compact,1,0).
    propertyNames: {pattern: "^[A-Za-z_][A-Za-z0-9_]*$"}
    additionalProperties: {$ref: "#/$defs/env_value"}
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """One process pinned to ``cores`` CPUs (1..node); inter x intra thread counts (``cores``
    = the pinned count, 0 = TensorFlow decides); MKL/OpenMP settings on and off."""
    node = cores_of(system)
    cores = experiment.get("cores", [node])
    cores = list(range(1, node + 1)) if cores == "all" else [c for c in cores if c <= node]
    mkl_env = {k: str(v) for k, v in experiment.get("mkl_env", MKL_ENV).items()}
    out = []
    for a in product(batch=experiment["batch_sizes"], cores=cores,
                     inter=experiment.get("inter_threads", [0, 1, 2, "cores"]),
                     intra=experiment.get("intra_threads", [0, 1, "cores"]),
                     mkl=experiment.get("mkl_settings", ["off", "on"]), **training_axes(experiment)):
        out.append(training_configuration(
            experiment, system, model=a["model"], batch_per_process=a["batch"],
            intra_threads=thread_count(a["intra"], a["cores"]),
            inter_threads=thread_count(a["inter"], a["cores"]),
            vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
            tuning={"cores": a["cores"]}, env=dict(mkl_env) if on_off(a["mkl"]) else {}))
    return dedupe(out)


TYPE = ExperimentType(
    "inter_intra", expand, SCHEMA,
    tables=("summary", "inter_intra_sweep", "inter_intra_best", "vendor_speedup", "io_overhead"),
    figures=("inter_intra_sweep", "inter_intra_best"))
