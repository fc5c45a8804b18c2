"""Load, validate and expand a campaign into one measurement per (configuration, repetition).

A *measurement* is a flat dict whose keys are record field names (see record.py) plus
``repetitions``, ``timeout_minutes``, ``retries`` and ``env``. Each experiment is
expanded by its type (``archbench.plan.experiment_types``) on each of its systems.

    archbench schema                  # every key a campaign may use: campaign, experiment, system
    archbench check CAMPAIGN.yaml     # every input checked, as the workflow does
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from archbench.core.fields import config_id
from archbench.core.hardware import hardware_threads
from archbench.core.record import raw_path
from archbench.core.validate import ConfigError, check, key_path, load_schema, schema_error
from archbench.core.yamlio import check_values, load_yaml_file
from archbench.plan.containers import image_keys, image_name, parse_definition
from archbench.plan.environment import allowed_names, refusal
from archbench.plan.experiment_types import EXPERIMENT_TYPES
from archbench.plan.experiment_types.base import axes_schema, expand_with_skips, per_framework
from archbench.plan.experiment_types.node_scaling import best_sources
from archbench.plan.experiment_types.tune import sweep_fault
from archbench.plan.slurm_requests import gpu_resources
from archbench.plan.systems import resolve_system, system_schema
from archbench.workloads.kernels import KERNELS
from archbench.workloads.training.frameworks import FRAMEWORKS
from archbench.workloads.training.models import MODELS
from archbench.workloads.training.strategies import STRATEGIES, multi_process, update_strategies
from archbench.workloads.training.strategies.base import ps_nodes

DEFAULT_REPETITIONS = 5
MAX_MEASUREMENTS = 200_000  # the largest study campaign plans under 4,000
# Keys renamed: an old one is refused with one line naming its new name.
RENAMED_CAMPAIGN_KEYS = {"batch_size": "measurements_per_job"}
RENAMED_EXPERIMENT_KEYS = {"batch_sizes": "batch_per_process",
                           "layout_batch_sizes": "layout_batch_per_process"}
# Per-process counts a node must hold (at most its hardware threads), as the keys say them.
THREAD_FIELDS = {"processes_per_node": "processes per node",
                 "intra_threads": "intra-op threads per process",
                 "inter_threads": "inter-op threads per process"}


@lru_cache(maxsize=1)
def experiment_schema() -> dict:
    """The whole experiment schema: the shared definitions of
    archbench/schemas/experiment.schema.yaml, each registered type's own definition, and every
    list of names from its registry: experiment types, frameworks, models, kernels, multi-process
    strategies and the variable-update axis (the updates the strategies register, and the
    multi-process strategies that register none); and the key of every setting's axis
    (:func:`archbench.plan.experiment_types.base.axes_schema`). Cached: a test that registers an entry
    clears it (``experiment_schema.cache_clear()``)."""
    base = load_schema("experiment")
    defs = {**base["$defs"], **{name: t.schema for name, t in EXPERIMENT_TYPES.items()}}
    common = defs["common"]
    defs["common"] = {**common, "properties": {**common["properties"], "type": {
        **common["properties"]["type"], "enum": list(EXPERIMENT_TYPES)}}}
    axes = axes_schema()
    training = defs["training"]
    defs["training"] = {**training, "properties": {**training["properties"], **axes["properties"]}}
    defs["training_required"] = {**defs["training_required"], "required": axes["required"]}
    defs["model_name"] = {**defs["model_name"], "enum": sorted(MODELS)}
    helps = "; ".join(f"{name}: {f.help}" for name, f in FRAMEWORKS.items())
    defs["framework_name"] = {"description": f"{defs['framework_name']['description']} {helps}.",
                              "enum": list(FRAMEWORKS)}
    defs["kernel_name"] = {**defs["kernel_name"], "enum": list(KERNELS)}
    helps = "; ".join(f"{name}: {STRATEGIES[name].help}" for name in multi_process())
    defs["multi_process_strategy"] = {
        "description": f"{defs['multi_process_strategy']['description']} {helps}.",
        "enum": multi_process()}
    defs["variable_update_name"] = {**defs["variable_update_name"], "enum": [
        *update_strategies(), *(s for s in multi_process() if not STRATEGIES[s].variable_updates)]}
    return {**base, "$defs": defs}


# the sections of `archbench schema`: what each schema describes
SCHEMA_SECTIONS = {
    "campaign": "the top level of a campaign file (config/config.yaml, config/campaigns/*.yaml)",
    "experiment": "each entry of `experiments:` (and the keys of `defaults:`); `type` picks "
                  "its definition under $defs, and every type takes the common keys",
    "system": "each config/systems/<name>.yaml, or entry of `system_definitions:`"}


def campaign_schemas() -> dict[str, dict]:
    """Every key a campaign may use, by where it goes (:data:`SCHEMA_SECTIONS`): the
    campaign schema, the whole experiment schema (:func:`experiment_schema`) and the
    system schema."""
    return {"campaign": load_schema("config"), "experiment": experiment_schema(),
            "system": system_schema()}


class ExperimentError(ValueError):
    """What is wrong with an experiment as a whole on one system (it plans nothing there, or
    more than a node holds); the campaign names the experiment before the message."""


@dataclass
class Campaign:
    """A validated campaign: its systems and every measurement it runs."""

    name: str
    config: dict
    systems: dict[str, dict]
    measurements: list[dict] = field(default_factory=list)


def _measurements(name: str, experiment: dict, *, system: dict) -> list[dict]:
    """Every measurement of one validated experiment on one system; ConfigError (key path
    relative to the experiment) on a bad key, ExperimentError when it plans none there or
    asks more than a node holds."""
    kind = experiment["type"]
    configurations, skipped = expand_with_skips(EXPERIMENT_TYPES[kind].expand, experiment, system)
    if not configurations:
        reasons = "; ".join(skipped) or "an axis is empty"
        raise ExperimentError(f"plans no measurement on system '{system['name']}' ({reasons})")
    configurations = per_framework(experiment, configurations)
    out = []
    for conf in configurations:
        check_fits_node(conf, system)
        conf.update(experiment=name, experiment_type=kind, system=system["name"],
                    arch=system["arch"],
                    env={**system["env"], **experiment.get("env", {}), **conf.get("env", {})},
                    timeout_minutes=experiment.get("timeout_minutes", system["runtime_minutes"]),
                    retries=experiment.get("retries", 0))
        for key in ("memory_limit_mb", "rerun_busy"):  # stated only where set
            if key in experiment:
                conf[key] = experiment[key]
        # a configuration may plan its own count (a tuner's short rounds run once)
        repetitions = conf.pop("repetitions", experiment.get("repetitions", DEFAULT_REPETITIONS))
        conf["config_id"] = config_id(conf)
        for rep in range(repetitions):
            out.append({**conf, "repetition": rep})
    return out


def check_fits_node(conf: dict, system: dict) -> None:
    """Raise ExperimentError when a configuration asks one node for more processes or
    threads per process than the node's hardware threads."""
    limit = hardware_threads(system)
    for name, label in THREAD_FIELDS.items():
        if (conf.get(name) or 0) > limit:
            raise ExperimentError(f"{conf[name]} {label} > the {limit} hardware threads of a "
                                  f"'{system['name']}' node (sockets x cores_per_socket x threads_per_core)")


def experiment_error(config: dict, name: str, path: tuple | list, *, reason: str) -> ConfigError:
    """A ConfigError at ``path`` (keys within experiment ``name``), named under ``defaults``
    when the experiment takes that key from the campaign's defaults."""
    defaults, own = config.get("defaults", {}), config["experiments"][name]
    if path and path[0] in defaults and path[0] not in own:
        return ConfigError(f"{key_path(('defaults', *path))}: {reason} (in experiment {name})")
    return ConfigError(f"{key_path(('experiments', name, *path))}: {reason}")


def experiments_of(config: dict) -> dict[str, dict]:
    """Every experiment of a campaign with the campaign's defaults filled in."""
    defaults = config.get("defaults", {})
    return {name: {**defaults, **raw} for name, raw in config["experiments"].items()}


def check_best(config: dict) -> None:
    """Every ``best:`` names hybrid experiments of the campaign that run on its systems."""
    experiments = experiments_of(config)
    for name, experiment in experiments.items():
        if "best" not in experiment:
            continue
        names = best_sources(experiment["best"])
        for source in names:
            if experiments.get(source, {}).get("type") != "hybrid":
                raise experiment_error(config, name, ("best",), reason=f"'{source}' is not a "
                                       "hybrid experiment of this campaign")
        swept = {s for source in names for s in experiments[source].get("systems", config["systems"])}
        for system in experiment.get("systems", config["systems"]):
            if system not in swept:
                raise experiment_error(config, name, ("best",), reason=f"no sweep of "
                                       f"{', '.join(names)} runs on system '{system}'")


def check_sweeps(config: dict) -> None:
    """Every tune experiment's ``sweep`` names a comparable training sweep of the campaign."""
    experiments = experiments_of(config)
    for name, experiment in experiments.items():
        if experiment["type"] == "tune" and (fault := sweep_fault(experiments, name, config["systems"])):
            raise experiment_error(config, name, ("sweep",), reason=fault)


def load_campaign(config: dict, system_dir: str | os.PathLike | None = None, *,
                  source: str | None = None) -> Campaign:
    """Validate a campaign config (already parsed YAML) and expand every experiment.

    Systems are read from ``system_dir`` (the workflow's config/systems) when it holds
    them, else from those the package ships. ``source`` names the campaign file in error messages."""
    try:
        return _load_campaign(config, system_dir)
    except ConfigError as exc:
        if exc.source is None and source:
            raise ConfigError(str(exc), source=source) from exc
        raise


def check_experiment(config: dict, name: str, experiment: dict) -> None:
    """Validate one experiment (defaults filled in) against its type's schema; ConfigError
    naming the key, under ``defaults`` when the experiment takes it from there."""
    for old, new in RENAMED_EXPERIMENT_KEYS.items():
        if old in experiment:
            raise experiment_error(config, name, (old,), reason=f"renamed {new}")
    kind = experiment["type"]
    if kind not in EXPERIMENT_TYPES:
        known = ", ".join(sorted(EXPERIMENT_TYPES))
        raise ConfigError(f"experiments.{name}.type: unknown experiment type '{kind}' (known: {known})")
    error = schema_error(experiment, {**experiment_schema(), "$ref": f"#/$defs/{kind}"})
    if error is None:
        return
    reason = error.message
    if error.validator in ("unevaluatedProperties", "additionalProperties"):
        reason = f"not a key of {kind} experiments"
    raise experiment_error(config, name, error.path, reason=reason)


def _load_campaign(config: dict, system_dir: str | os.PathLike | None) -> Campaign:
    if not isinstance(config, dict):
        raise ConfigError("(top level): a campaign must be a mapping")
    for old, new in RENAMED_CAMPAIGN_KEYS.items():
        if old in config:
            raise ConfigError(f"{old}: renamed {new}")
    check(config, load_schema("config"), "")
    check_values(config)
    if "type" in config.get("defaults", {}):
        raise ConfigError("defaults.type: each experiment gives its own type (this default "
                          "would never apply)")
    inline = config.get("system_definitions", {})
    systems = {name: resolve_system(name, inline.get(name), system_dir) for name in config["systems"]}
    allowed = allowed_names(config)
    for name, system in systems.items():
        if (refused := refusal(system["env"], allowed)) is not None:
            raise system_error(name, inline, f"env.{refused[0]}: {refused[1]}")
    measurements: list[dict] = []
    for name, experiment in experiments_of(config).items():
        check_experiment(config, name, experiment)
        for key in ("env", "mkl_env"):  # what an experiment adds to its runs' environment
            if (refused := refusal(experiment.get(key) or {}, allowed)) is not None:
                raise experiment_error(config, name, (key, refused[0]), reason=refused[1])
        for system_name in experiment.get("systems", config["systems"]):
            if system_name not in systems:
                raise experiment_error(config, name, ("systems",),
                                       reason=f"'{system_name}' is not in the campaign's systems")
            try:
                measurements += _measurements(name, experiment, system=systems[system_name])
            except ExperimentError as exc:
                raise ConfigError(f"experiments.{name}: {exc}") from exc
            except ConfigError as exc:
                if exc.source is not None:
                    raise
                key, _, reason = str(exc).partition(": ")  # the key path within the experiment
                raise experiment_error(config, name, tuple(key.split(".")), reason=reason) from exc
            if len(measurements) > MAX_MEASUREMENTS:
                raise ConfigError(f"experiments.{name}: the campaign reaches {len(measurements)} measurements "
                                  f"here (at most {MAX_MEASUREMENTS})")
    check_best(config)
    check_sweeps(config)
    check_gpu_requests(measurements, systems, inline)
    seen: set[str] = set()
    for m in measurements:
        path = raw_path(m)
        if path in seen:
            raise ConfigError(f"experiments.{m['experiment']}: two configurations map to {path}")
        seen.add(path)
    return Campaign(config["campaign"], config, systems, measurements)


def check_gpu_requests(measurements: list[dict], systems: dict[str, dict], inline: dict) -> None:
    """One line naming the system's file (or inline definition) and key when a GPU
    measurement asks for GPUs its system cannot give (the experiment types skip such
    configurations; this stops any that reach the plan another way)."""
    for m in measurements:
        try:
            gpu_resources(m, systems[m["system"]], m.get("nodes", 1) + ps_nodes(m))
        except ValueError as exc:
            raise system_error(m["system"], inline, str(exc)) from None


def system_error(name: str, inline: dict, message: str) -> ConfigError:
    """A ConfigError about system ``name`` (``message``: "key: reason"), naming its file
    config/systems/<name>.yaml, or its key under system_definitions when it is defined
    inline (the campaign file is named around it)."""
    if name in inline:
        return ConfigError(f"system_definitions.{name}.{message}")
    return ConfigError(message, source=f"config/systems/{name}.yaml")


def check_inputs_exist(campaign: Campaign, root: str | os.PathLike = ".") -> None:
    """Raise ConfigError naming the system's file (or inline definition) and key when a
    system runs in a container whose definition (``containers/<image>.def`` under
    ``root``) is missing or not named, cannot run a measurement (:func:`check_image_runs`)
    or is built for another architecture than the system's (its ``arch`` label), or whose
    prebuilt image file (``image_uri``, a path) does not exist."""
    inline = campaign.config.get("system_definitions", {})
    for name, system in campaign.systems.items():
        if system["container_runtime"] == "none":
            continue
        uri = system.get("image_uri")
        if uri:
            if uri.startswith("/") and not Path(uri).is_file():
                raise system_error(name, inline, f"image_uri: no image file {uri}")
            continue
        if not system.get("image"):
            raise system_error(name, inline, "image: required (or image_uri) with "
                               f"container_runtime {system['container_runtime']}")
        for key, image in image_keys(system):
            definition = f"containers/{image}.def"
            if not (Path(root) / definition).is_file():
                raise system_error(name, inline, f"{key}: no container definition {definition}")
        check_image_runs(campaign, name, root=Path(root), inline=inline)
        for key, image in image_keys(system):  # the plan would build each for the system's nodes
            definition = f"containers/{image}.def"
            arch = parse_definition(Path(root) / definition).labels.get("arch")
            if arch != system["arch"]:
                raise system_error(name, inline, f"{key}: image {image} is built for {arch} "
                                   f"({definition}, label arch), system {name} is {system['arch']}")


def check_image_runs(campaign: Campaign, name: str, *, root: Path, inline: dict) -> None:
    """ConfigError in one line naming system ``name``, the image and the missing piece when
    the image a measurement runs in (its definition's labels:
    :func:`archbench.plan.containers.image_lacks`) cannot run it: TensorFlow in an image
    with PyTorch alone, torch.compile with PyTorch 1.13; before any job."""
    from archbench.plan.containers import image_lacks
    system, parsed = campaign.systems[name], {}
    for m in campaign.measurements:
        if m["system"] != name:
            continue
        image = image_name(system, m.get("framework"))
        if image not in parsed:
            parsed[image] = parse_definition(root / f"containers/{image}.def")
        why = image_lacks(parsed[image], m)
        if why:
            key = "image" if image == system["image"] else "framework_images"
            raise system_error(name, inline, f"{key}: system {name}'s image {image} {why}: "
                               f"experiment {m['experiment']} cannot run there")


def load_campaign_file(path: str | os.PathLike) -> Campaign:
    """Parse a campaign YAML file and load it; YAML errors become one-line ConfigErrors."""
    return load_campaign(load_yaml_file(path), source=str(path))
