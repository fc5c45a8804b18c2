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

import yaml

from archbench.record import config_id
from archbench.systems import cores_of, resolve_system
from archbench.validate import ConfigError, check, load_schema

DEFAULT_REPETITIONS = 5

Expander = Callable[[dict, dict], list[dict]]
EXPANDERS: dict[str, Expander] = {}


def experiment_type(name: str) -> Callable[[Expander], Expander]:
    """Register ``func(experiment, system) -> [configuration, ...]`` for experiment ``name``."""
    def register(func: Expander) -> Expander:
        EXPANDERS[name] = func
        return func
    return register


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
