"""The quality gate: time to accuracy (docs/experiments.md, "Quality gate"; docs/metrics.md,
"Time to accuracy"). One process trains a digits model on its real data (scikit-learn's
digits, held-out 20 % as validation) from its first step until the validation accuracy
reaches ``target_accuracy`` or ``max_steps`` steps have run, evaluating every
``eval_every`` steps; per framework x precision x fp32 math mode x graph (the training
axes), so a faster precision or a compiled graph is seen to train the model as well.
"""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    dedupe,
    product,
    schema_fragment,
    swept,
    training_axes,
    training_configuration,
)
from archbench.workloads.training.models import spec

DEFAULTS = {"target_accuracy": 0.95, "max_steps": 1000, "eval_every": 25}
DEFAULT_MODELS = ["digits_cnn"]
DEFAULT_BATCH = [32]

SCHEMA = schema_fragment("""
description: >
  Quality gate (time to accuracy, as MLPerf Training reports it): one process trains a
  digits model (default [digits_cnn]) on scikit-learn's digits from its first step until
  the validation accuracy (the held-out 20 %) reaches target_accuracy, evaluating every
  eval_every steps, at most max_steps steps (steps and warmup_steps do not apply); records steps and seconds to reach it, or
  that it did not (status ok all the same). An axis per framework, precision, math mode
  and graph, as every training type. Batch per process default [32].
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}]
properties:
  target_accuracy: {type: number, exclusiveMinimum: 0, maximum: 1, description: "Validation accuracy to reach, a fraction (default 0.95)."}
  max_steps: {type: integer, minimum: 1, maximum: 100000, description: "Step cap: a run that has not reached the target after this many steps stops and records that it did not (default 1000)."}
  eval_every: {type: integer, minimum: 1, maximum: 100000, description: "Steps between two evaluations of the validation accuracy, which are on the clock (default 25)."}
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """One process at ``threads`` (default all cores of a node) per model x batch x the
    numerics axes (and every other training axis), on real digits, no warm-up (the
    campaign's ``steps`` and ``warmup_steps`` do not apply: the cap is ``max_steps``,
    planned as the measured steps): the target and the evaluation interval go under
    ``tuning`` (part of the id). ConfigError for a model without validation data or data
    other than real."""
    if experiment.get("data", ["real"]) != ["real"]:
        raise ConfigError("data: a quality experiment trains on real data (the digits) only")
    experiment = {"models": DEFAULT_MODELS, "batch_per_process": DEFAULT_BATCH, **experiment}
    for model in experiment["models"]:
        if spec(model).dataset != "digits":
            raise ConfigError(f"models: {model} has no validation data here (the quality gate "
                              "trains a digits model, e.g. digits_cnn)")
    cores = cores_of(system)
    threads = experiment.get("threads", [cores])
    if threads == "all":
        threads = list(range(1, cores + 1))
    settings = {key: experiment.get(key, value) for key, value in DEFAULTS.items()}
    tuning = {"target_accuracy": float(settings["target_accuracy"]),
              "eval_every": int(settings["eval_every"])}
    axes = product(threads=threads, inter=experiment.get("inter_threads", [1]),
                   **training_axes(experiment))
    out = []
    for a in axes:
        values = {**swept(a), "data": "real"}
        out.append(training_configuration(
            {**experiment, "warmup_steps": 0, "steps": settings["max_steps"]}, system,
            **values, intra_threads=a["threads"],
            inter_threads=cores if a["inter"] == "cores" else int(a["inter"]), tuning=tuning))
    return dedupe(out)


TYPE = ExperimentType(
    "quality", expand, SCHEMA,
    tables=("summary", "time_to_accuracy"),
    figures=("time_to_accuracy",))
