"""System files (config/systems/<name>.yaml): read, validated, defaults filled (the core
counts derived from a system are :mod:`archbench.core.hardware`).

A system is looked up in the workflow's own config/systems first, then among the systems
the package ships (archbench/systems/, package data read with importlib.resources: an
installed archbench finds them without a checkout). In a checkout config/systems is a
link to archbench/systems, so the two are one directory there."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from archbench.core.validate import ConfigError, check, load_schema
from archbench.core.yamlio import load_yaml_file, load_yaml_text
from archbench.plan.containers import check_image_uri
from archbench.plan.slurm_requests import check_system
from archbench.workloads.training.frameworks import FRAMEWORKS

# the shipped systems, archbench/systems/<name>.yaml
SYSTEM_DIR: Traversable = resources.files("archbench").joinpath("systems")
DEFAULTS = {"nodes": 1, "sockets": 1, "threads_per_core": 1, "runtime_minutes": 30,
            "container_runtime": "none", "launcher": "local", "vendor_library": "none",
            "env": {}}


def system_schema() -> dict:
    """The system schema, ``framework_images`` keyed by the registered frameworks."""
    schema = load_schema("system")
    images = schema["properties"]["framework_images"]
    schema["properties"]["framework_images"] = {**images, "propertyNames": {"enum": list(FRAMEWORKS)}}
    return schema


def check_image(system: dict, where: str, source: str | None) -> None:
    """One-line ConfigError when the system names both a built and a prebuilt image, or a
    prebuilt image its runtime cannot run or pull."""
    if not system.get("image_uri"):
        return
    key = f"{where}.image_uri" if where else "image_uri"
    if system.get("image"):
        raise ConfigError(f"{key}: exclusive with image (build containers/{system['image']}.def"
                          " or use a prebuilt image, not both)", source=source)
    try:
        check_image_uri(system["container_runtime"], system["image_uri"])
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}", source=source) from None


def run_settings(system: dict) -> dict:
    """The keys of a resolved system that affect how its measurements run: all but those
    the system schema lists under ``x-no-rerun`` (documentation, the campaign's node
    count, the account, the time limit a measurement carries itself)."""
    return {k: v for k, v in system.items() if k not in no_rerun_keys()}


@lru_cache(maxsize=1)
def no_rerun_keys() -> frozenset[str]:
    """System keys whose edit reruns no measurement (``x-no-rerun`` of the system schema)."""
    return frozenset(load_schema("system")["x-no-rerun"])


def system_file(name: str, system_dir: str | os.PathLike | None = None) -> Path | Traversable | None:
    """The file of system ``name``: ``<system_dir>/<name>.yaml`` when there is one (a
    workflow's own systems win), else the shipped one; None when neither exists."""
    for directory in ([Path(system_dir)] if system_dir else []) + [SYSTEM_DIR]:
        candidate = directory / f"{name}.yaml"
        if candidate.is_file() or candidate.is_dir():  # a directory is named as one
            return candidate
    return None


def read_system_file(path: Path | Traversable, source: str) -> object:
    """The parsed YAML of a system file, read strictly; errors name ``source``."""
    if isinstance(path, Path):
        return load_yaml_file(path, source)
    return load_yaml_text(path.read_text(encoding="utf-8"), source)  # not on a file system


def resolve_system(name: str, definition: dict | None = None,
                   system_dir: str | os.PathLike | None = None) -> dict:
    """Load config/systems/<name>.yaml (from ``system_dir``, the workflow's, else the
    shipped systems) or the inline ``definition``, validate, fill defaults.

    ``auto`` values (arch, cores_per_socket) describe the machine running the workflow.
    A node's cores come from the system's own keys, sockets x cores_per_socket, never
    from a default: a system without cores_per_socket is refused, and ``auto`` (this
    machine's cores) is refused unless the system's runs start here (launcher local, as
    the shipped ``local`` system's do, or ``this_machine: true``).
    """
    if definition is None:
        path = system_file(name, system_dir)
        source, where = f"config/systems/{name}.yaml", ""
        if path is None:
            raise ConfigError(f"systems: no system file {source} for '{name}'")
        definition = read_system_file(path, source)
    else:
        source, where = None, f"system_definitions.{name}"
    if not isinstance(definition, dict):
        raise ConfigError(f"{where or '(top level)'}: a system must be a mapping", source=source)
    definition = {"name": name, **definition}
    check(definition, system_schema(), where, source=source)
    check_system(definition, where, source)  # slurm_extra: nothing the plugin or a key sets
    if definition["name"] != name:  # records, paths and the campaign all use the one name
        key = f"{where}.name" if where else "name"
        raise ConfigError(f"{key}: '{definition['name']}' is not the system's name '{name}'",
                          source=source)
    system = {**DEFAULTS, **definition}
    check_image(system, where, source)
    if system["arch"] == "auto":
        system["arch"] = platform.machine()
    if system["cores_per_socket"] == "auto" and system["launcher"] != "local" \
            and not system.get("this_machine"):
        key = f"{where}.cores_per_socket" if where else "cores_per_socket"
        raise ConfigError(f"{key}: 'auto' counts the cores of the machine running the "
                          f"workflow, not of a node that launcher {system['launcher']} "
                          "runs on: give the node's cores per socket (or this_machine: "
                          "true when the nodes are this machine)", source=source)
    if system["cores_per_socket"] == "auto":
        cores = os.cpu_count() or 1
        if system["sockets"] > cores:  # a socket of this machine's cores each would be more
            key = f"{where}.sockets" if where else "sockets"
            raise ConfigError(f"{key}: {system['sockets']} sockets with cores_per_socket 'auto': "
                              f"this machine has {cores} cores", source=source)
        system["cores_per_socket"] = cores // system["sockets"]
    return system
