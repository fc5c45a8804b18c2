"""Load, validate and expand a campaign into one measurement per (configuration, repetition).

A *measurement* is a flat dict whose keys are record field names (see record.py) plus
``repetitions``, ``timeout_minutes``, ``retries`` and ``env``. Experiment types register
an expander with :func:`experiment_type`; the expander turns one experiment (defaults
applied, validated) on one system into a list of configurations.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "config" / "schemas"
SYSTEM_DIR = ROOT / "config" / "systems"

DEFAULT_REPETITIONS = 5

Expander = Callable[[dict, dict], list[dict]]
EXPANDERS: dict[str, Expander] = {}


class ConfigError(ValueError):
    """Invalid campaign or system input; the message is one line naming the key path."""


def experiment_type(name: str) -> Callable[[Expander], Expander]:
    """Register ``func(experiment, system) -> [configuration, ...]`` for experiment ``name``."""
    def register(func: Expander) -> Expander:
        EXPANDERS[name] = func
        return func
    return register


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """Read config/schemas/<name>.schema.yaml."""
    return yaml.safe_load((SCHEMA_DIR / f"{name}.schema.yaml").read_text())


def check(instance: Any, schema: dict, where: str) -> None:
    """Validate ``instance``; raise ConfigError '<where>.<key.path>: <reason>' on the first error."""
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    # A failing key also makes its parent report it as "unevaluated": report the key.
    specific = [e for e in errors if e.validator != "unevaluatedProperties"]
    error = jsonschema.exceptions.best_match(specific or errors)
    if error is None:
        return
    path = ".".join(str(p) for p in error.absolute_path)
    key = f"{where}.{path}" if path else where
    message = error.message
    if error.validator == "pattern":
        message = f"{error.instance!r} is not allowed here (shell metacharacters, quotes, newlines or an unexpected form)"
    if error.validator == "unevaluatedProperties" or error.validator == "additionalProperties":
        message = message.replace("were unexpected", "are not allowed").replace(
            "was unexpected", "is not allowed")
    raise ConfigError(f"{key}: {message}")


def cores_of(system: dict) -> int:
    """Physical cores per node of a system."""
    return system["sockets"] * system["cores_per_socket"]


def resolve_system(name: str, definition: dict | None = None,
                   system_dir: Path | None = None) -> dict:
    """Load config/systems/<name>.yaml (or the inline ``definition``), validate, fill defaults.

    ``auto`` values (arch, cores_per_socket) describe the machine running the workflow.
    """
    if definition is None:
        path = Path(system_dir or SYSTEM_DIR) / f"{name}.yaml"
        if not path.exists():
            raise ConfigError(f"systems: no system file config/systems/{name}.yaml for '{name}'")
        try:
            definition = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
        where = f"config/systems/{name}.yaml"
    else:
        where = f"system_definitions.{name}"
    if not isinstance(definition, dict):
        raise ConfigError(f"{where}: a system must be a mapping")
    definition = {"name": name, **definition}
    check(definition, load_schema("system"), where)
    system = {"nodes": 1, "sockets": 1, "threads_per_core": 1, "runtime_minutes": 30,
              "container_runtime": "none", "launcher": "local", "vendor_library": "none",
              "env": {}, "cores_per_socket": "auto", **definition}
    if system["arch"] == "auto":
        system["arch"] = platform.machine()
    if system["cores_per_socket"] == "auto":
        system["cores_per_socket"] = max(1, (os.cpu_count() or 1) // system["sockets"])
    return system


def config_id(configuration: dict) -> str:
    """A readable, unique directory name for a configuration (repetition excluded)."""
    c = configuration
    if c["kind"] == "kernel":
        parts = [c["kernel"], f"n{c.get('problem_size')}", f"t{c.get('tile_size') or 0}",
                 f"w{c['workers']}", f"N{c['nodes']}"]
    else:
        vendor = {True: "vlon", False: "vloff", None: "vlna"}[c.get("vendor_library_enabled")]
        parts = [c["model"], f"b{c['batch_per_process']}", f"N{c['nodes']}",
                 f"p{c['processes_per_node']}", f"t{c['intra_threads']}",
                 f"i{c['inter_threads']}", vendor, c["data"], c["strategy"]]
    extra = {k: v for k, v in sorted(c.get("tuning", {}).items())}
    if c.get("env"):
        extra["env"] = c["env"]
    if extra:
        parts.append(hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8])
    return "_".join(str(p) for p in parts)


def on_off(value: Any) -> bool:
    """YAML's on/off/true/false as a bool."""
    return value in (True, "on")


def product(**axes: Iterable) -> list[dict]:
    """Cartesian product of named axes as a list of dicts (order of the axes kept)."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*axes.values())]


def training_configuration(experiment: dict, system: dict, **values: Any) -> dict:
    """A training configuration with the experiment's common settings and ``values``."""
    conf = {
        "kind": "train", "framework": "tensorflow", "data": "synthetic",
        "strategy": "single", "nodes": 1, "processes_per_node": 1, "inter_threads": 1,
        "image_size": experiment.get("image_size", 224),
        "num_classes": experiment.get("num_classes", 1000),
        "warmup_steps": experiment.get("warmup_steps", 10),
        "measured_steps": experiment.get("steps", 100),
        "data_format": experiment.get("data_format", "NHWC"),
        "vendor_library": system["vendor_library"] if system["vendor_library"] != "none" else None,
    }
    conf.update(values)
    conf["workers"] = conf["nodes"] * conf["processes_per_node"]
    conf["global_batch"] = conf["batch_per_process"] * conf["workers"]
    return conf


@dataclass
class Campaign:
    """A validated campaign: its systems and every measurement it runs."""

    name: str
    config: dict
    systems: dict[str, dict]
    measurements: list[dict] = field(default_factory=list)

    def by_path(self) -> dict[str, dict]:
        """Measurements keyed by their raw-record path (relative to results/)."""
        return {raw_path(m): m for m in self.measurements}


def raw_path(measurement: dict) -> str:
    """results-relative path of a measurement's record: raw/<system>/<experiment>/<id>/rep<k>.json."""
    m = measurement
    return f"raw/{m['system']}/{m['experiment']}/{m['config_id']}/rep{m['repetition']}.json"


def load_campaign(config: dict, system_dir: str | os.PathLike | None = None) -> Campaign:
    """Validate a campaign config (already parsed YAML) and expand every experiment.

    Systems are read from ``system_dir`` (the workflow's config/systems; default the
    package checkout's)."""
    if not isinstance(config, dict):
        raise ConfigError("config: a campaign must be a mapping")
    check(config, load_schema("config"), "config")
    inline = config.get("system_definitions", {})
    systems = {name: resolve_system(name, inline.get(name), system_dir) for name in config["systems"]}
    exp_schema = load_schema("experiment")
    measurements: list[dict] = []
    for name, raw in config["experiments"].items():
        experiment = {**config.get("defaults", {}), **raw}
        where = f"experiments.{name}"
        kind = experiment["type"]
        if kind not in EXPANDERS or kind not in exp_schema["$defs"]:
            known = ", ".join(sorted(EXPANDERS))
            raise ConfigError(f"{where}.type: unknown experiment type '{kind}' (known: {known})")
        check(experiment, {**exp_schema, "$ref": f"#/$defs/{kind}"}, where)
        targets = experiment.get("systems", config["systems"])
        for system_name in targets:
            if system_name not in systems:
                raise ConfigError(f"{where}.systems: '{system_name}' is not in the campaign's systems")
            system = systems[system_name]
            for conf in EXPANDERS[kind](experiment, system):
                conf.update(experiment=name, experiment_type=kind, system=system_name,
                            arch=system["arch"],
                            env={**system["env"], **experiment.get("env", {}), **conf.get("env", {})},
                            timeout_minutes=experiment.get("timeout_minutes", system["runtime_minutes"]),
                            retries=experiment.get("retries", 0))
                if "memory_limit_mb" in experiment:
                    conf["memory_limit_mb"] = experiment["memory_limit_mb"]
                conf["config_id"] = config_id(conf)
                for rep in range(experiment.get("repetitions", DEFAULT_REPETITIONS)):
                    measurements.append({**conf, "repetition": rep})
    seen: set[str] = set()
    for m in measurements:
        path = raw_path(m)
        if path in seen:
            raise ConfigError(f"experiments.{m['experiment']}: two configurations map to {path}")
        seen.add(path)
    return Campaign(config["campaign"], config, systems, measurements)


def load_campaign_file(path: str | os.PathLike) -> Campaign:
    """Parse a campaign YAML file and load it; YAML errors become one-line ConfigErrors."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    return load_campaign(config)


# Experiment types register themselves on import.
from archbench import experiments  # noqa: E402,F401  (registers training types)
from archbench.kernels import experiment as _kernel_types  # noqa
