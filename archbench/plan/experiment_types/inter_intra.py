"""Inter/intra-op thread sweep (docs/experiments.md, experiment 3): one process pinned to
1..node cores, with the MKL/OpenMP environment on and off.

The thread settings are the product inter_threads x intra_threads, or an explicit list of
[inter, intra] pairs (``thread_pairs``) where a study ran only some combinations: CESGA
2018 ran inter {0, 1, 2} x intra {0, 1, cores} (Figs. 2-4) plus inter = intra = cores
(Fig. 5), not inter = cores with intra 0 or 1."""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    dedupe,
    on_off,
    on_off_axis,
    product,
    schema_fragment,
    skip,
    swept,
    thread_count,
    training_axes,
    training_configuration,
)

MKL_ENV = {"KMP_BLOCKTIME": "0", "KMP_AFFINITY": "granularity=fine,compact,1,0"}

SCHEMA = schema_fragment("""
description: >
  Inter/intra-op thread sweep of one process pinned to 1..node cores (experiment 3),
  with MKL/OpenMP settings (KMP_BLOCKTIME=0, KMP_AFFINITY=granularity=fine,compact,1,0)
  on and off. Here inter_threads defaults to [0, 1, 2, cores].
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"}]
properties:
  cores:
    description: Cores the process is pinned to; `all` = 1..cores of a node. Default [cores of a node].
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  thread_pairs:
    type: array
    minItems: 1
    uniqueItems: true
    items:
      type: array
      minItems: 2
      maxItems: 2
      items: {$ref: "#/$defs/thread_count"}
    description: >
      Explicit [inter, intra] thread settings run instead of the inter_threads x
      intra_threads product (each a count or `cores`), e.g. [[1, 0], [cores, cores]].
  intra_threads:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/thread_count"}
    description: Intra-op threads (0 = TensorFlow decides, `cores` = the pinned cores). Default [0, 1, cores].
  mkl_settings:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/on_off"}
    description: Runs with (on) and without (off) the MKL/OpenMP environment of mkl_env. Default [off, on].
  mkl_env:
    type: object
    description: The MKL/OpenMP environment of mkl_settings on (default KMP_BLOCKTIME=0, KMP_AFFINITY=granularity=fine,compact,1,0).
    propertyNames: {pattern: "^[A-Za-z_][A-Za-z0-9_]*$"}
    additionalProperties: {$ref: "#/$defs/env_value"}
unevaluatedProperties: false
""")


def thread_settings(experiment: dict) -> list[tuple]:
    """The experiment's (inter, intra) thread settings: its ``thread_pairs``, else the
    product of inter_threads (default [0, 1, 2, cores]) and intra_threads (default
    [0, 1, cores])."""
    pairs = experiment.get("thread_pairs")
    if pairs is None:
        return [(a["inter"], a["intra"]) for a in product(
            inter=experiment.get("inter_threads", [0, 1, 2, "cores"]),
            intra=experiment.get("intra_threads", [0, 1, "cores"]))]
    both = [k for k in ("inter_threads", "intra_threads") if k in experiment]
    if both:
        raise ConfigError(f"thread_pairs: replaces inter_threads x intra_threads; "
                          f"remove {', '.join(both)}")
    return [tuple(pair) for pair in pairs]


def expand(experiment: dict, system: dict) -> list[dict]:
    """One process pinned to ``cores`` CPUs (1..node); inter x intra thread counts (``cores``
    = the pinned count, 0 = TensorFlow decides) or explicit pairs of them; MKL/OpenMP
    settings on and off."""
    node = cores_of(system)
    cores = experiment.get("cores", [node])
    if cores == "all":
        cores = list(range(1, node + 1))
    for c in cores:
        if c > node:
            skip(f"cores {c} > the node's {node}")
    cores = [c for c in cores if c <= node]
    mkl_env = {k: str(v) for k, v in experiment.get("mkl_env", MKL_ENV).items()}
    out = []
    for a in product(cores=cores, threads=thread_settings(experiment),
                     mkl=on_off_axis(experiment, "mkl_settings", ["off", "on"]),
                     **training_axes(experiment)):
        inter, intra = a["threads"]
        out.append(training_configuration(
            experiment, system, **swept(a), intra_threads=thread_count(intra, a["cores"]),
            inter_threads=thread_count(inter, a["cores"]),
            tuning={"cores": a["cores"]}, env=dict(mkl_env) if on_off(a["mkl"]) else {}))
    return dedupe(out)


TYPE = ExperimentType(
    "inter_intra", expand, SCHEMA,
    tables=("summary", "inter_intra_sweep", "inter_intra_best", "vendor_speedup", "io_overhead",
            "framework_comparison", "precision_speedup"),
    figures=("inter_intra_sweep", "inter_intra_best", "framework_comparison", "precision_speedup"))
