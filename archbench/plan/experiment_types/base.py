"""What every experiment type is made of, and the helpers their expansions share.

An experiment type is one module holding an :class:`ExperimentType`: its schema fragment
(the keys it accepts, each with a description), its expansion of one experiment on one
system into configurations, and the tables and figures it feeds. A configuration is a
dict of record field names (see ``archbench.core.record``); settings that are not record
fields go under ``tuning`` and become part of the configuration id.
"""

from __future__ import annotations

import itertools
import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import yaml

from archbench.core.fields import DEFAULT_FRAMEWORK, NUMERICS, config_id, filled
from archbench.core.hardware import cores_of
from archbench.core.metrics import layout_counts
from archbench.core.validate import ConfigError
from archbench.workloads.training import settings
from archbench.workloads.training.datasets import batch_beyond_data
from archbench.workloads.training.frameworks import FRAMEWORKS, cannot_run
from archbench.workloads.training.matrix import lacks
from archbench.workloads.training.models import spec
from archbench.workloads.training.settings import TUNING, Setting

Expander = Callable[[dict, dict], list[dict]]
MAX_CONFIGURATIONS = 100_000  # of one experiment's axes on one system
# Why values of an experiment's axes planned nothing on a system (see expand_with_skips).
_SKIPPED: ContextVar[list[str] | None] = ContextVar("skipped", default=None)


@dataclass(frozen=True)
class ExperimentType:
    """A registered experiment type.

    ``expand(experiment, system)`` returns its configurations; ``schema`` is its definition
    under ``$defs`` of archbench/schemas/experiment.schema.yaml (it may ``$ref`` the shared
    definitions there); ``tables`` and ``figures`` name the artifacts its results feed.
    """

    name: str
    expand: Expander
    schema: dict
    tables: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()


def skip(reason: str) -> None:
    """Note why an axis value was left out on this system (e.g. "nodes 4 > the system's 2"):
    said when the whole experiment plans nothing there."""
    noted = _SKIPPED.get()
    if noted is not None and reason not in noted:
        noted.append(reason)


def expand_with_skips(expander: Expander, experiment: dict, system: dict) -> tuple[list[dict], list[str]]:
    """``expander(experiment, system)`` and the reasons it noted with :func:`skip`."""
    token = _SKIPPED.set([])
    try:
        return expander(experiment, system), list(_SKIPPED.get() or [])
    finally:
        _SKIPPED.reset(token)


def schema_fragment(text: str) -> dict:
    """A schema fragment written as YAML (descriptions read as in the schema files)."""
    return yaml.safe_load(text)


def on_off(value: Any) -> bool:
    """YAML's on/off/true/false as a bool."""
    return value in (True, "on")


def product(**axes: Iterable) -> list[dict]:
    """Cartesian product of named axes as a list of dicts (order of the axes kept); at most
    MAX_CONFIGURATIONS, else ConfigError naming the axes (a campaign that large is a typo)."""
    names, values = list(axes), [list(v) for v in axes.values()]
    size = math.prod(len(v) for v in values)
    if size > MAX_CONFIGURATIONS:
        sizes = " x ".join(f"{len(v)} {name}" for name, v in zip(names, values))
        raise ConfigError(f"axes: {sizes} make {size} configurations (at most {MAX_CONFIGURATIONS})")
    return [dict(zip(names, combination)) for combination in itertools.product(*values)]


def thread_count(value: Any, cores: int) -> int:
    """A thread count, with the token ``cores`` meaning all cores of the node (or pin)."""
    return cores if value == "cores" else int(value)


def process_threads(value: Any, *, cores: int, processes_per_node: int) -> int:
    """Intra-op threads of one of ``processes_per_node`` processes sharing ``cores``: a
    number (0 = TensorFlow decides), ``cores`` = cores / ppn, or ``cores_minus_one`` =
    cores / ppn - 1, at least 1 (one core per process left to Horovod's background thread,
    OSU 2019 Sec. IX)."""
    share = max(1, cores // processes_per_node)
    if value == "cores_minus_one":
        return max(1, share - 1)
    return thread_count(value, share)


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``."""
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def node_counts(experiment: dict, system: dict, default: list[int] | str = (1,)) -> list[int]:
    """The experiment's node counts that fit the system (``all`` = 1, 2, 4, ... nodes)."""
    nodes = experiment.get("nodes", default)
    if nodes == "all":
        return powers_of_two(system["nodes"])
    for n in nodes:
        if n > system["nodes"]:
            skip(f"nodes {n} > the system's {system['nodes']}")
    return [n for n in nodes if n <= system["nodes"]]


def on_off_axis(experiment: dict, key: str, default: list) -> list:
    """The on/off axis ``key`` of an experiment (``default`` when not given); ConfigError
    when it names one setting twice, as "on" and true (the schema refuses equal values)."""
    values = experiment.get(key, default)
    settings = [on_off(v) for v in values]
    if len(set(settings)) < len(settings):
        twice = "on" if settings.count(True) > 1 else "off"
        raise ConfigError(f"{key}: {values} gives {twice} twice (on = true, off = false; "
                          "each setting is run once)")
    return values


def axis_values(setting: Setting, experiment: dict) -> list:
    """The planned values of ``setting``'s axis in ``experiment`` (its list, default
    ``[default]``); ConfigError when two values plan one (the schema refuses equal values,
    not "on" beside true)."""
    given = experiment.get(setting.axis, [setting.default])
    values = [setting.recorded_value(v) for v in given]
    for i, value in enumerate(values):
        if value in values[:i]:
            meanings = ", ".join(f"{word} = {str(meaning).lower()}" for meaning, word in setting.words.items())
            raise ConfigError(f"{setting.axis}: {given} gives {setting.word(value)} twice "
                              f"({meanings + '; ' if meanings else ''}each setting is run once)")
    return values


def training_axes(experiment: dict, **given: list) -> dict[str, list]:
    """The axes every training type takes: models, then each setting that declares an axis
    (:func:`archbench.workloads.training.settings.axes`), named by its planned key, with its
    planned values (``given[key]``: a type's own values of that axis, e.g. a layout's
    batches). Pass an axes dict from :func:`product` to :func:`swept`, which plans them. On
    a system without a vendor library both vendor settings become "off"
    (:func:`training_configuration`), and the expanders' :func:`dedupe` keeps one."""
    out = {"model": experiment["models"]}
    for s in settings.axes():
        out[s.planned] = given[s.planned] if s.planned in given else axis_values(s, experiment)
    return out


def swept(axes: dict) -> dict:
    """The planned values of one combination of :func:`training_axes` (a dict from
    :func:`product`): model and each setting's axis, by planned key."""
    return {key: axes[key] for key in ("model", *(s.planned for s in settings.axes()))}


def axis_schema(setting: Setting) -> dict:
    """The experiment schema of ``setting``'s axis: a list of distinct values the option
    takes (its choices and words, or numbers within its bounds), at least one."""
    if setting.choices is not None or setting.words:
        choices = setting.choices() if callable(setting.choices) else setting.choices
        items: dict = {"enum": [*(choices or ()), *(k for k in setting.words if k not in (choices or ()))]}
    else:
        kind = {int: "integer", float: "number"}.get(setting.type, "string")
        items = {"type": kind, **({"minimum": setting.minimum} if setting.minimum is not None else {}),
                 **({"maximum": setting.maximum} if setting.maximum is not None else {})}
    default = "" if setting.required else f" Default [{setting.word(setting.default)}]."
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": items,
            "description": (setting.axis_help or setting.help) + default}


def axes_schema() -> dict:
    """The schema keys of every declared axis (``$defs/training``'s properties) and the
    definition requiring the keys of required settings (``$defs/training_required``)."""
    declared = settings.axes()
    return {"properties": {s.axis: axis_schema(s) for s in declared},
            "required": ["models", *(s.axis for s in declared if s.required)]}


def frameworks(experiment: dict) -> list[str]:
    """The experiment's ``framework`` axis (default [tensorflow])."""
    return list(experiment.get("framework", [DEFAULT_FRAMEWORK]))


def check_framework_keys(experiment: dict, names: list[str]) -> None:
    """ConfigError naming a key only some frameworks take (``Framework.tuning``, e.g.
    loader_workers) when none of the experiment's frameworks ``names`` takes it, or when
    it is loader_workers and the experiment reads no real data (it feeds only that), or
    when the comparison's ``framework_base`` is not one of them."""
    for key in sorted({k for f in FRAMEWORKS.values() for k in f.tuning}):
        if key not in experiment:
            continue
        takers = [name for name, f in FRAMEWORKS.items() if key in f.tuning]
        if not set(takers) & set(names):
            raise ConfigError(f"{key}: only {' and '.join(takers)} configurations take it "
                              f"(add {' or '.join(takers)} to framework)")
    if "loader_workers" in experiment and "real" not in experiment.get("data", ["synthetic"]):
        raise ConfigError("loader_workers: the loader feeds real data only (add real to data)")
    base = experiment.get("framework_base")
    if base is not None and base not in names:
        raise ConfigError(f"framework_base: {base} is not in framework ({', '.join(names)})")


def per_framework(experiment: dict, configurations: list[dict]) -> list[dict]:
    """Every training configuration once per framework of the experiment's ``framework``
    axis, the frameworks outermost; the keys a framework alone takes
    (``Framework.tuning``) go under its configurations' ``tuning``, so they are part of
    their ids. Kernel configurations pass unchanged (they run in TensorFlow).

    ConfigError naming ``framework`` when a framework lacks a model, strategy or variable
    update a configuration asks for, or cannot run its precision, math mode or graph on its
    device or strategy (:func:`archbench.workloads.training.matrix.lacks`)."""
    names = frameworks(experiment)
    check_framework_keys(experiment, names)
    training = [c for c in configurations if c["kind"] == "train"]
    out = [c for c in configurations if c["kind"] != "train"]
    for name in names:
        own = {k: experiment[k] for k in FRAMEWORKS[name].tuning if k in experiment}
        kept, dropped = [], []
        for conf in training:
            check_batch_fits_data(conf)
            device = filled(conf)["device"]
            why = lacks(name, model=conf["model"], strategy=conf["strategy"],
                        variable_update=conf.get("variable_update"), device=device)
            if why:
                raise ConfigError(f"framework: {why}")
            why = cannot_run(name, device=device, strategy=conf["strategy"],
                             values={s.name: conf[s.planned] for s in settings.axes()
                                     if s.planned in conf})
            if why:
                dropped.append((conf, why))
                continue
            tuning = {**conf.get("tuning", {}), **own}
            kept.append({**conf, "framework": name, **({"tuning": tuning} if tuning else {})})
        refuse_unplanned_numerics(name, kept, dropped)
        out += kept
    return out


def check_batch_fits_data(conf: dict) -> None:
    """ConfigError naming batch_per_process when the training configuration ``conf`` reads
    real data of a fixed size (the digits) and its batch per process is larger than each
    worker's shard of the training split
    (:func:`archbench.workloads.training.datasets.batch_beyond_data`)."""
    if conf.get("data") != "real" or conf.get("best_of"):
        return
    why = batch_beyond_data(spec(conf["model"]).dataset, conf["batch_per_process"], conf["workers"])
    if why:
        raise ConfigError(f"batch_per_process: {why}")


def refuse_unplanned_numerics(name: str, kept: list[dict], dropped: list[tuple[dict, str]]) -> None:
    """Combinations of the axes that framework ``name`` cannot run (``dropped``: each
    configuration and why) are left out, noted with :func:`skip`, where every value of
    their numerics axes still runs in another (``kept``): a sweep of precision x math mode
    or precision x device plans what runs. A value that runs in none is refused:
    ConfigError in one line naming its axis and why (e.g. precision fp16 on a CPU)."""
    numerics = [s for s in settings.axes() if s.name in NUMERICS]
    for conf, why in dropped:
        for s in numerics:
            value = conf.get(s.planned, s.default)
            if value != s.default and not any(k.get(s.planned, s.default) == value for k in kept):
                raise ConfigError(f"{s.axis}: {why}")
        skip(why)


def devices(experiment: dict) -> list[str]:
    """The experiment's ``device`` axis (default [cpu]); only the types whose schema takes
    ``device`` (node_scaling, batch_sweep) ever see more than cpu."""
    return list(experiment.get("device", ["cpu"]))


def system_gpus(system: dict) -> int:
    """GPUs per node of ``system`` (0: a CPU-only system)."""
    return int(system.get("gpus_per_node") or 0)


def gpus_fit(gpus_per_node: int, system: dict) -> bool:
    """True when a node of ``system`` has ``gpus_per_node`` GPUs; else the reason is noted
    with :func:`skip` (a GPU configuration never falls back to the CPUs)."""
    have = system_gpus(system)
    if gpus_per_node <= have:
        return True
    skip(f"gpus_per_node {gpus_per_node} > the system's {have}" if have
         else "device gpu: the system has no GPUs (gpus_per_node 0)")
    return False


def gpu_fields(*, nodes: int, gpus_per_node: int) -> dict:
    """The fields of a GPU configuration: one rank per GPU, so ``processes_per_node`` is
    ``gpus_per_node`` and ``gpus`` the total."""
    return dict(device="gpu", nodes=nodes, gpus_per_node=gpus_per_node,
                processes_per_node=gpus_per_node, gpus=nodes * gpus_per_node)


def dedupe(configurations: list[dict]) -> list[dict]:
    """Drop configurations identical to an earlier one (e.g. intra 'cores' == 2 on 2 cores)."""
    seen, out = set(), []
    for conf in configurations:
        key = config_id(conf)
        if key not in seen:
            seen.add(key)
            out.append(conf)
    return out


def controllers(experiment: dict, nodes: int) -> list[str]:
    """Horovod controllers of an experiment on ``nodes`` nodes (Gloo runs on one node)."""
    names = experiment.get("horovod_controller", ["mpi"])
    if "gloo" in names and nodes > 1:
        raise ConfigError(f"horovod_controller: gloo is launched with "
                          f"horovodrun on one node; {nodes} nodes need mpi")
    return names


def controller_tuning(controller: str) -> dict:
    """The ``tuning`` entry of a Horovod controller (mpi is the default and adds none)."""
    return {"horovod_controller": controller} if controller != "mpi" else {}


def training_configuration(experiment: dict, system: dict, **values: Any) -> dict:
    """A training configuration with the experiment's common settings and ``values`` (a
    key ``tuning.<key>``, e.g. of a setting's axis, goes under ``tuning``, left out at the
    setting's default). Image size and classes default to the model's
    (:func:`archbench.workloads.training.models.spec`), as the worker's do."""
    model = spec(values["model"])
    conf = {
        "kind": "train", "framework": DEFAULT_FRAMEWORK, "data": "synthetic",
        "strategy": "single", "nodes": 1, "processes_per_node": 1, "inter_threads": 1,
        "image_size": experiment.get("image_size", model.native_image_size),
        "num_classes": experiment.get("num_classes", model.num_classes),
        "warmup_steps": experiment.get("warmup_steps", 10),
        "measured_steps": experiment.get("steps", 100),
        # CSCS 2017 trained on GPUs in NCHW, cuDNN's own layout; CPU runs default to NHWC
        "data_format": experiment.get("data_format",
                                      "NCHW" if values.get("device") == "gpu" else "NHWC"),
        "vendor_library": system["vendor_library"] if system["vendor_library"] != "none" else None,
    }
    planned_tuning = "tuning" in values
    tuning = {**values.pop("tuning", {})}
    for s in settings.axes():
        key = s.planned
        if key.startswith(TUNING) and key in values:
            value = values.pop(key)
            if value != s.recorded_value(s.default):
                tuning[key[len(TUNING):]] = value
        elif s.omit_default and values.get(key, s.default) == s.default:
            values.pop(key, None)
    conf.update(values)
    if tuning or planned_tuning:
        conf["tuning"] = tuning
    if conf["vendor_library"] is None:  # nothing to toggle: every run is the vanilla build
        conf["vendor_library_enabled"] = False
    conf.update(layout_counts(conf))
    return conf


def one_process_sweep(experiment: dict, system: dict, *, threads: list[int]) -> list[dict]:
    """One process: ``threads`` x inter-op threads x the training axes (models and the
    settings' axes: batch per process, vendor, data, ...) x device (a GPU configuration is
    the same process training on one GPU, its threads the host threads that feed it)."""
    cores = cores_of(system)
    kinds = [d for d in devices(experiment) if d == "cpu" or gpus_fit(1, system)]
    axes = product(threads=threads, inter=experiment.get("inter_threads", [1]),
                   **training_axes(experiment), device=kinds)
    return dedupe([training_configuration(
        experiment, system, **swept(a), intra_threads=a["threads"],
        inter_threads=thread_count(a["inter"], cores),
        **(gpu_fields(nodes=1, gpus_per_node=1) if a["device"] == "gpu" else {})) for a in axes])
