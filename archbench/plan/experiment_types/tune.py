"""The budgeted tuner (docs/tuning.md): the best layout of one node without the whole grid.

A ``tune`` experiment names a space over the axes the sweeps take (processes per node,
threads per process, inter-op threads, batch per process, Horovod's cycle time and fusion
threshold, the numerics settings) and a budget; per model and framework one Optuna study
searches it (archbench/plan/tuner.py) in rounds of successive halving planned here. Each
round's measurements are placeholders (``tune_round``) whose configuration the workflow
chooses when the round starts (rule tune_round, archbench/execute/tune_rounds.py), as a `best`
measurement's layout is chosen from its sweep.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import astuple, dataclass

from archbench.core.fields import NUMERICS
from archbench.core.hardware import cores_of
from archbench.core.metrics import global_batch
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    axis_values,
    frameworks,
    process_threads,
    schema_fragment,
    thread_count,
    training_configuration,
)
from archbench.plan.experiment_types.hybrid import hybrid_layouts
from archbench.plan.tuning_plan import Round, Space, plan_rounds, rounds_cost, unit_cost
from archbench.workloads.training import settings
from archbench.workloads.training.frameworks import cannot_run
from archbench.workloads.training.matrix import outside_matrix
from archbench.workloads.training.settings import TUNING

# Space axes and the experiment keys giving their values (numerics: the training axes).
KNOBS = {"horovod_cycle_time_ms": "cycle_time_ms", "horovod_fusion_threshold_mb": "fusion_threshold_mb"}
DEFAULTS = {"reduction_factor": 3, "seed": 0}
FIXED = ("data", "vendor_library_enabled")  # planned keys of the axes a study holds at one value

SCHEMA = schema_fragment("""
description: >
  A budgeted search for the best configuration of one node (docs/tuning.md): per model and
  framework, Optuna's TPE sampler proposes processes x threads x inter-op threads x batch
  (x Horovod cycle time and fusion threshold, x the precision, math_mode and graph values
  listed) and successive halving measures them in rounds: new trials over short windows
  (min_steps), the best 1/reduction_factor of each round longer, the last round at `steps`
  and `repetitions` times. Trials are real measurements (Horovod between processes);
  one budget, budget_measurements or budget_node_hours, caps the plan. The study is kept under
  results/tune/, keyed by its space, rounds, seed and budget (an edited one is a new study),
  so a killed campaign resumes without losing or repeating a trial.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/training_required"}]
properties:
  processes:
    description: Processes per node to try; `all` = every divisor of the cores (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  threads_per_process:
    type: array
    minItems: 1
    uniqueItems: true
    items: {oneOf: [{type: integer, minimum: 1, maximum: 1048576}, {enum: [cores, cores_minus_one]}]}
    description: "Intra-op threads per process to try: numbers, `cores` (cores / processes) or `cores_minus_one` (one core per process left to Horovod's background thread). Default [cores]; a combination over the node's cores is never tried."
  cycle_time_ms:
    type: array
    minItems: 1
    uniqueItems: true
    items: {type: number, exclusiveMinimum: 0, maximum: 100000}
    description: HOROVOD_CYCLE_TIME values in ms to try (default Horovod's own).
  fusion_threshold_mb:
    type: array
    minItems: 1
    uniqueItems: true
    items: {type: number, minimum: 0, maximum: 65536}
    description: HOROVOD_FUSION_THRESHOLD values in MiB to try (0 disables fusion; default Horovod's own).
  budget_measurements:
    type: number
    exclusiveMinimum: 0
    maximum: 1000000
    description: "The budget in measurements at full steps (a run of s measured steps counts (warmup_steps + s) / (warmup_steps + steps)); below one configuration of the exhaustive sweep measured once each."
  budget_node_hours:
    type: number
    exclusiveMinimum: 0
    maximum: 10000000
    description: "The budget in node-hours, a measurement at full steps costing minutes_per_measurement (default the time limit) on its nodes."
  minutes_per_measurement:
    type: number
    exclusiveMinimum: 0
    maximum: 100000
    description: "The expected minutes of one measurement at full steps, for node-hours (default timeout_minutes: an upper bound)."
  min_steps:
    type: integer
    minimum: 1
    maximum: 1000000
    description: "Measured steps of the shortest window (the first rung); default steps / 9."
  reduction_factor: {type: integer, minimum: 2, maximum: 16, description: "Each round keeps the best 1/reduction_factor of the previous one's trials (default 3)."}
  seed: {type: integer, minimum: 0, maximum: 4294967295, description: "The sampler's seed (default 0): the same seed and results propose the same trials."}
  sweep:
    type: string
    description: "A campaign experiment whose exhaustive sweep covers this space (e.g. a hybrid one): the tuning table's regret and cost ratio compare with it."
unevaluatedProperties: false
""")


@dataclass(frozen=True)
class TunePlan:
    """What a tune experiment plans on one system: its space, rounds, seed, and the cost
    of one full-steps measurement in node-hours."""

    space: Space
    rounds: list[Round]
    seed: int
    node_hours_each: float
    steps: int
    warmup_steps: int

    def node_hours(self) -> float:
        """The plan's node-hours (each round's measurements at their steps)."""
        return self.node_hours_each * rounds_cost(self.rounds, steps=self.steps, warmup_steps=self.warmup_steps)

    def exhaustive_node_hours(self) -> float:
        """The exhaustive sweep of the space: every configuration once at full steps."""
        return self.node_hours_each * len(self.space.points())


def searched_settings() -> list[settings.Setting]:
    """The declared training axes a tuner searches beside the layout: the numerics and
    every other setting but batch (an axis of its own), data and vendor library (one
    value per study)."""
    return [s for s in settings.axes() if s.planned not in FIXED and s.planned != "batch_per_process"]


def space_of(experiment: dict, system: dict) -> Space:
    """The configurations a tune experiment chooses from on ``system``: every feasible
    combination of its axes (threads within the node's cores; numerics every framework of
    the experiment runs with Horovod on a CPU)."""
    cores = cores_of(system)
    axes: dict[str, tuple] = {
        "processes_per_node": tuple(p for p, _ in hybrid_layouts(cores, experiment.get("processes", "all"))),
        "threads_per_process": tuple(experiment.get("threads_per_process", ["cores"])),
        "inter_threads": tuple(experiment.get("inter_threads", [1])),
        "batch_per_process": tuple(experiment["batch_per_process"]),
    }
    for knob, key in KNOBS.items():
        if key in experiment:
            axes[knob] = tuple(experiment[key])
    for s in searched_settings():
        axes[s.planned] = tuple(axis_values(s, experiment))
    names = frameworks(experiment)

    def feasible(point: dict) -> bool:
        """Fits the node, runs in every framework, and is not the same run as a point
        whose thread tokens come first (`cores` and 1 are one value at cores processes)."""
        p = point["processes_per_node"]
        threads = process_threads(point["threads_per_process"], cores=cores, processes_per_node=p)
        if p * threads > cores:
            return False
        same = [t for t in axes["threads_per_process"]
                if process_threads(t, cores=cores, processes_per_node=p) == threads]
        inter = thread_count(point["inter_threads"], threads)
        if same[0] != point["threads_per_process"] or next(
                i for i in axes["inter_threads"] if thread_count(i, threads) == inter) != point["inter_threads"]:
            return False
        values = {name: point[name] for name in NUMERICS if name in point}  # their planned keys
        return not any(cannot_run(f, device="cpu", strategy="horovod", values=values) for f in names)
    return Space(axes, feasible)


def point_fields(point: dict, system: dict) -> dict:
    """The measurement fields of a point of :func:`space_of` (tuning knobs under
    ``tuning``; a numerics setting at its default left out, as the sweeps plan it)."""
    p = point["processes_per_node"]
    threads = process_threads(point["threads_per_process"], cores=cores_of(system), processes_per_node=p)
    fields = {"processes_per_node": p, "intra_threads": threads,
              "inter_threads": thread_count(point["inter_threads"], threads),
              "batch_per_process": point["batch_per_process"], "workers": p,
              "global_batch": global_batch(point["batch_per_process"], p)}
    tuning = {}
    if "horovod_cycle_time_ms" in point:
        tuning["horovod_cycle_time_ms"] = point["horovod_cycle_time_ms"]
    if "horovod_fusion_threshold_mb" in point:
        tuning["horovod_fusion_threshold_bytes"] = int(round(point["horovod_fusion_threshold_mb"] * 2**20))
    for s in searched_settings():
        value = point.get(s.planned, s.recorded_value(s.default))
        if s.planned.startswith(TUNING):  # e.g. tuning.loader_workers: in the id unless default
            if value != s.recorded_value(s.default):
                tuning[s.planned[len(TUNING):]] = value
        else:
            fields[s.planned] = value
    return {**fields, "tuning": tuning}


def refuse_unreachable(space: Space, experiment: dict, system: dict) -> None:
    """ConfigError naming the key of a value no feasible point takes: more processes than
    the node's cores, a numerics value a framework cannot run with Horovod on a CPU (named
    before the threads it leaves without a point), or threads over the node's cores."""
    cores, where = cores_of(system), f"system '{system['name']}'"
    for f in frameworks(experiment):  # the trials run with Horovod on the CPUs
        if gap := outside_matrix(f, strategy="horovod", device="cpu"):
            raise ConfigError(f"framework: {gap[1]}")
    for p in experiment.get("processes", "all") if experiment.get("processes", "all") != "all" else ():
        if p > cores:
            raise ConfigError(f"processes: {p} is in no configuration the tuner can run on {where} "
                              f"(more processes than its {cores} cores)")
    layout = ("processes_per_node", "threads_per_process", "inter_threads", "batch_per_process")
    for axis in (a for a in space.axes if a not in layout):
        for value in space.axes[axis]:
            why = next((w for f in frameworks(experiment) if (w := cannot_run(
                f, device="cpu", strategy="horovod", values={axis: value}))), "")
            if why:
                raise ConfigError(f"{KNOBS.get(axis, axis)}: {value} is in no configuration the tuner "
                                  f"can run on {where} ({why})")
    points = space.points()
    for axis in sorted(space.axes, key=lambda a: a == "processes_per_node"):  # threads first
        for value in space.axes[axis]:
            if not any(p[axis] == value for p in points):
                key = {"processes_per_node": "processes", **KNOBS}.get(axis, axis)
                raise ConfigError(f"{key}: {value} is in no configuration the tuner can run on {where} "
                                  "(more threads than the node has cores, or the same run as a value before it)")


def budget_of(experiment: dict) -> str:
    """The budget key a tune experiment gives; ConfigError naming the key when it gives
    both or neither."""
    given = [k for k in ("budget_measurements", "budget_node_hours") if experiment.get(k) is not None]
    if len(given) == 2:
        raise ConfigError("budget_node_hours: one budget: budget_measurements or budget_node_hours, not both")
    if not given:
        raise ConfigError("budget_measurements: a tune experiment needs a budget: budget_measurements "
                          "or budget_node_hours")
    return given[0]


def study_key(plan: "TunePlan", experiment: dict) -> str:
    """The study a plan runs, as 12 hex digits: a digest of its space, rounds, seed and
    budget. An edited space, budget or seed is another study (its own folder under
    results/tune/); the same plan is the same study."""
    budget = budget_of(experiment)
    identity = {"axes": {k: list(v) for k, v in plan.space.axes.items()},
                "points": len(plan.space.points()), "rounds": [list(astuple(r)) for r in plan.rounds],
                "seed": plan.seed, "budget": [budget, experiment[budget]]}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


def plan_of(experiment: dict, system: dict) -> TunePlan:
    """The rounds of a tune experiment on ``system``; ConfigError naming the key of a
    space of one configuration, a budget below one trial at every rung or at or above the
    exhaustive sweep's cost."""
    space = space_of(experiment, system)
    refuse_unreachable(space, experiment, system)
    points = len(space.points())
    if points == 0:
        raise ConfigError("threads_per_process: no combination of processes and threads fits "
                          f"the node's {cores_of(system)} cores")
    if points == 1:
        raise ConfigError("processes: the space has one configuration; nothing to tune "
                          "(list more values of an axis, or measure it with a sweep)")
    steps, warmup = int(experiment.get("steps", 100)), int(experiment.get("warmup_steps", 10))
    minutes = experiment.get("minutes_per_measurement",
                             experiment.get("timeout_minutes", system["runtime_minutes"]))
    each = minutes / 60  # one node
    if budget_of(experiment) == "budget_node_hours":
        key, budget = "budget_node_hours", experiment["budget_node_hours"] / each
    else:
        key, budget = "budget_measurements", float(experiment["budget_measurements"])
    if budget >= points:
        given = experiment[key]
        whole = points if key == "budget_measurements" else round(points * each, 4)
        raise ConfigError(f"{key}: {given} is at or above the exhaustive sweep's {whole} "
                          f"({points} configurations once each); sweep them instead")
    min_steps = int(experiment.get("min_steps", max(1, steps // 9)))
    if min_steps > steps:
        raise ConfigError(f"min_steps: {min_steps} > steps {steps}")
    rounds = plan_rounds(points, budget, steps=steps, warmup_steps=warmup, min_steps=min_steps,
                         reduction_factor=int(experiment.get("reduction_factor", DEFAULTS["reduction_factor"])),
                         repetitions=int(experiment.get("repetitions", 1)))
    if not rounds:
        cheapest = unit_cost(min_steps, full_steps=steps, warmup_steps=warmup)
        raise ConfigError(f"{key}: {experiment[key]} buys less than one trial measured at every "
                          f"rung (one run of {min_steps} steps alone costs {cheapest:.2f} measurements)")
    return TunePlan(space, rounds, int(experiment.get("seed", DEFAULTS["seed"])), each, steps, warmup)


def check_keys(experiment: dict) -> None:
    """ConfigError for keys a tune experiment cannot take: several data sources or vendor
    settings (each study tunes one), nodes other than one."""
    for key in ("data", "vendor_library"):
        if len(experiment.get(key, [None])) > 1:
            what = {"data": "data source", "vendor_library": "vendor library setting"}[key]
            raise ConfigError(f"{key}: a tune experiment searches with one {what} "
                              "(write one experiment per value)")


def expand(experiment: dict, system: dict) -> list[dict]:
    """Per model, the placeholders of every round: round r's trials x repetitions, each at
    its round's measured steps, their configuration chosen when the round starts. A
    placeholder asks the resources of the whole node (the most processes of the space)."""
    check_keys(experiment)
    plan = plan_of(experiment, system)
    cores = cores_of(system)
    most = max(plan.space.axes["processes_per_node"])
    sweep = experiment.get("sweep")
    budget, exhaustive = plan.node_hours(), plan.exhaustive_node_hours()
    study = study_key(plan, experiment)
    # the one value of each other training axis (data, vendor library); numerics: defaults
    fixed = {s.planned: axis_values(s, experiment)[0] for s in settings.axes() if s.planned in FIXED}
    out = []
    for model in experiment["models"]:
        for r, rnd in enumerate(plan.rounds):
            top = r + 1 == len(plan.rounds) or plan.rounds[r + 1].bracket != rnd.bracket
            for slot in range(rnd.trials):
                conf = training_configuration(
                    {**experiment, "steps": rnd.steps}, system, model=model, **fixed,
                    batch_per_process=plan.space.axes["batch_per_process"][0],
                    strategy="horovod", processes_per_node=most, intra_threads=cores // most,
                    inter_threads=1, tuning={"round": r + 1, "slot": slot})
                conf.update(tune_round=r, repetitions=rnd.repetitions,
                            trial={"study": study, "round": r + 1, "rung": rnd.rung, "top_rung": top,
                                   "sweep": sweep, "budget_node_hours": round(budget, 6),
                                   "exhaustive_node_hours": round(exhaustive, 6)})
                out.append(conf)
    return out


TYPE = ExperimentType(
    "tune", expand, SCHEMA,
    tables=("summary", "tuning"),
    figures=("tuning",))


# the sweeps a tuner's answer is compared with: one node's training layouts and settings
SWEEP_TYPES = ("hybrid", "ppn_sweep", "thread_scaling", "inter_intra", "batch_sweep", "horovod_tuning")


def sweep_fault(experiments: dict[str, dict], name: str, systems: list[str]) -> str | None:
    """Why tune experiment ``name``'s ``sweep`` (when it names one) cannot be compared with
    it: not a training sweep of the campaign (``experiments``, defaults filled in), or one
    sharing none of its models, frameworks or systems (``systems``: the campaign's)."""
    tune = experiments[name]
    sweep = tune.get("sweep")
    if sweep is None:
        return None
    other = experiments.get(sweep)
    if other is None:
        return f"'{sweep}' is not an experiment of this campaign"
    if other["type"] not in SWEEP_TYPES:
        return (f"'{sweep}' is a {other['type']} experiment; name a training sweep of one node "
                f"({', '.join(SWEEP_TYPES)})")
    for what, mine, theirs in (
            ("models", tune["models"], other.get("models", [])),
            ("frameworks", frameworks(tune), frameworks(other)),
            ("systems", tune.get("systems", systems), other.get("systems", systems))):
        if not set(mine) & set(theirs):
            verb = "runs on" if what == "systems" else "runs"
            return f"'{sweep}' {verb} none of this tune's {what} ({', '.join(mine)})"
    return None
