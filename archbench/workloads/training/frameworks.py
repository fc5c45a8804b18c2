"""Training frameworks: one package each under ``archbench/workloads/training/``, one
entry each in :data:`FRAMEWORKS`.

A framework is a plugin that owns everything a framework decides: the loop that turns a
:class:`~archbench.workloads.training.settings.TrainRun` into a record (``run(config)`` ->
the record on the writing process, None elsewhere), the networks it builds for the shared
models (:mod:`archbench.workloads.training.models`), the strategies it runs and the
backend of each (the strategy x framework matrix: its ``backends`` keys), the packages
images pin for it, its CUDA-stack provenance, the environment its processes need and its
labels. Every list of framework names reads this registry: the ``--framework`` choices
of ``archbench.train``, the experiment schema's ``framework`` axis, the names a record may
carry, the plan-time refusals (:func:`archbench.workloads.training.matrix.lacks`), and the tables' and figures' labels.

To add a framework, write its package (``loop.py`` with ``run(config)`` and
``probe_step(config)``, ``models.py`` with a builder per model name, ``backends.py`` with
a backend per strategy it runs) and add one entry below (docs/extending.md), or, for a
framework kept outside this package, name a dict of entries in :data:`PLUGINS` (every
process of a run reads it: the supervisor's workers inherit it). Its modules are
imported only when a run asks for them: listing the frameworks loads no framework.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any, Callable, Mapping

from archbench.core.fields import NUMERICS
from archbench.workloads.launch import LaunchError
from archbench.workloads.training.settings import SETTINGS

PACKAGE = "archbench.workloads.training"
# "module:attribute" of dicts of more entries, comma-separated: frameworks kept elsewhere
PLUGINS = "ARCHBENCH_FRAMEWORKS"


@dataclass(frozen=True, kw_only=True)
class Framework:
    """A registered training framework.

    ``loop``: the module holding ``run(config)`` and ``probe_step(config)`` (one
    process's step and batch, for the vendor probe); ``models``: the module:attribute of
    its model builders (a dict keyed by the model names of
    :data:`archbench.workloads.training.models.MODELS`; the module also has
    ``least_training_flops(name, image_size)``, the lower bound of its networks' count); ``backends``: strategy name ->
    "module:attribute" of the backend (a class, or a function choosing one) each process
    of a run of that strategy builds; its keys are the strategies the framework runs;
    ``variable_updates``: those of its strategies' variable updates it runs (None: all of
    them); ``tuning``: the experiment keys only its configurations take, each planned
    under their ``tuning`` as the training setting of the same name; ``module``: the
    top-level module it imports (its version, and whether this process runs it);
    ``distributions``: the installed packages whose version is the framework's;
    ``pins``: the pip packages whose versions images pin and label; ``accelerators``:
    "module:function" returning this process's CUDA-stack provenance (``cuda_version``,
    ``cudnn_version``, ``nccl_version``, ``gpu_models``) from the framework it has
    imported; ``environment``: the variables every process of its runs gets (before the
    framework is imported); ``label``/``short_label``: its name in figures and in table
    headers; ``runs``: the values of each numerics setting (precision, math_mode, graph)
    it runs, by device (a setting or device it does not name: only the setting's
    default); ``runs_with``: the strategies in which a setting's other values run (a
    setting it does not name: every strategy it has).
    """

    label: str
    short_label: str
    loop: str
    models: str
    module: str
    distributions: tuple[str, ...]
    backends: Mapping[str, str]
    pins: tuple[str, ...] = ()
    accelerators: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)
    variable_updates: tuple[str, ...] | None = None
    tuning: tuple[str, ...] = ()
    runs: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    runs_with: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    help: str = ""

    def run(self, config) -> dict | None:
        """The record of training ``config`` (None on the processes that write none)."""
        return importlib.import_module(self.loop).run(config)

    def probe_step(self, config):
        """(step, (images, labels)): the run's training step in one process and its
        synthetic batch, for the vendor-library probe child."""
        return importlib.import_module(self.loop).probe_step(config)

    def installed_version(self) -> str:
        """The framework's version as it reports it (``__version__``) where this process has
        imported it, else its installed package's ("" when neither)."""
        loaded = sys.modules.get(self.module)
        if getattr(loaded, "__version__", None):
            return loaded.__version__
        for name in self.distributions:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return ""

    def model_names(self) -> list[str]:
        """The models it builds, in its registry's order."""
        return list(attribute(self.models))

    def least_training_flops(self, model: str, image_size: int) -> float:
        """A lower bound of the training FLOPs per image of its network ``model`` at
        ``image_size`` (its ``models`` module's ``least_training_flops``)."""
        module = importlib.import_module(self.models.split(":")[0])
        return module.least_training_flops(model, image_size)

    @property
    def strategies(self) -> tuple[str, ...]:
        """The strategies it runs (the keys of ``backends``)."""
        return tuple(self.backends)

    def backend(self, strategy: str) -> Callable[..., Any]:
        """Its backend of ``strategy`` (LaunchError when it does not run it)."""
        if strategy not in self.backends:
            raise LaunchError(f"framework {self.label} has no strategy '{strategy}' "
                              f"(it has: {', '.join(self.backends) or 'none'})")
        return attribute(self.backends[strategy])

    def is_loaded(self) -> bool:
        """True when this process has imported the framework."""
        return sys.modules.get(self.module) is not None

    def accelerator_fields(self) -> dict[str, Any] | None:
        """This process's CUDA-stack provenance as the framework reports it (None when it
        reports none)."""
        return attribute(self.accelerators)() if self.accelerators else None


def attribute(where: str):
    """The object ``where`` names as "module:attribute" (the module imported now)."""
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


FRAMEWORKS: dict[str, Framework] = {
    "tensorflow": Framework(
        label="TensorFlow", short_label="TF", loop=f"{PACKAGE}.tensorflow.loop",
        models=f"{PACKAGE}.tensorflow.models:BUILDERS",
        module="tensorflow", distributions=("tensorflow-cpu", "tensorflow", "tensorflow-aarch64"),
        backends={"single": f"{PACKAGE}.tensorflow.backends:Single",
                  "horovod": f"{PACKAGE}.tensorflow.backends:Horovod",
                  "mirrored": f"{PACKAGE}.tensorflow.backends:Mirrored",
                  "parameter_server": f"{PACKAGE}.tensorflow.sync_ps:parameter_server"},
        pins=("tensorflow", "tensorflow-cpu", "tf-keras"),
        accelerators=f"{PACKAGE}.tensorflow.accelerators:accelerator_fields",
        # legacy Keras (tf_keras): Horovod's optimizers and MultiWorkerMirrored fail under
        # Keras 3 with two or more ranks; set before TensorFlow is imported
        environment={"TF_USE_LEGACY_KERAS": "1"},
        runs={"precision": {"cpu": ("fp32", "bf16"), "gpu": ("fp32", "bf16", "fp16")},
              "math_mode": {"cpu": ("strict", "bf16"), "gpu": ("strict", "tf32")},
              "graph": {"cpu": ("eager", "compiled"), "gpu": ("eager", "compiled")}},
        # the step of Single and Horovod casts the logits and scales the loss; XLA does not
        # compile Horovod's allreduce
        runs_with={"precision": ("single", "horovod"), "graph": ("single",)},
        help="TensorFlow 2 with legacy Keras (tf_keras), oneDNN on x86"),
    "pytorch": Framework(
        label="PyTorch", short_label="PT", loop=f"{PACKAGE}.pytorch.loop",
        models=f"{PACKAGE}.pytorch.models:MODELS",
        module="torch", distributions=("torch",),
        backends={"single": f"{PACKAGE}.pytorch.backends:TorchBackend",
                  "horovod": f"{PACKAGE}.pytorch.backends:HorovodTorchBackend",
                  "ddp": f"{PACKAGE}.pytorch.backends:DDPBackend",
                  "fsdp2": f"{PACKAGE}.pytorch.backends:FSDP2Backend"},
        pins=("torch", "torchvision", "timm"),
        accelerators=f"{PACKAGE}.pytorch.accelerators:accelerator_fields",
        variable_updates=(), tuning=("loader_workers",),
        runs={"precision": {"cpu": ("fp32", "bf16"), "gpu": ("fp32", "bf16", "fp16")},
              "math_mode": {"cpu": ("strict", "bf16"), "gpu": ("strict", "tf32")},
              "graph": {"cpu": ("eager", "compiled"), "gpu": ("eager", "compiled")}},
        # fp16's GradScaler beside Horovod's DistributedOptimizer synchronises first
        # (backends.HorovodTorchBackend.scaled_update); torch.compile under DDP or Horovod
        # is not tested
        runs_with={"precision": ("single", "ddp", "horovod", "fsdp2"), "graph": ("single",)},
        help="PyTorch with torchvision and timm models, oneDNN (mkldnn) on CPUs"),
}


def add_plugins(value: str | None) -> None:
    """Add the entries of each "module:attribute" of ``value`` (:data:`PLUGINS`'s form) to
    :data:`FRAMEWORKS`; a name already registered is refused."""
    for where in filter(None, (part.strip() for part in (value or "").split(","))):
        for name, entry in attribute(where).items():
            if FRAMEWORKS.get(name, entry) is not entry:
                raise LaunchError(f"{PLUGINS}: framework '{name}' of {where} is already registered")
            FRAMEWORKS[name] = entry



def framework(name: str) -> Framework:
    """The registered framework ``name``; LaunchError naming the known ones otherwise."""
    if name not in FRAMEWORKS:
        raise LaunchError(f"unknown framework '{name}' (known: {', '.join(FRAMEWORKS)})")
    return FRAMEWORKS[name]


def strategies_of(name: str) -> list[str]:
    """The strategies that run in framework ``name``: the keys of its ``backends``."""
    return list(framework(name).backends)


def frameworks_of(strategy: str) -> list[str]:
    """The registered frameworks that run ``strategy``."""
    return [name for name, chosen in FRAMEWORKS.items() if strategy in chosen.backends]


def taking(key: str) -> list[str]:
    """The registered frameworks whose configurations take the tuning key ``key``."""
    return [name for name, chosen in FRAMEWORKS.items() if key in chosen.tuning]


def environment() -> dict[str, str]:
    """The variables the processes of every registered framework need, together (a
    measurement's processes get them all: a framework sets only its own names)."""
    return {k: v for chosen in FRAMEWORKS.values() for k, v in chosen.environment.items()}


def accelerator_fields() -> dict[str, Any] | None:
    """The CUDA-stack provenance of this process from the registered frameworks it has
    imported: the first that reports a CUDA stack, else the first one's report; None
    when it has imported none (or none reports)."""
    found = [f.accelerator_fields() for f in FRAMEWORKS.values() if f.is_loaded()]
    found = [fields for fields in found if fields is not None]
    return next((fields for fields in found if fields.get("cuda_version")), found[0] if found else None)


def label(name: str) -> str:
    """The name a reader sees for framework ``name`` (``name`` itself when unregistered)."""
    chosen = FRAMEWORKS.get(name)
    return chosen.label if chosen is not None else name


def cannot_run(name: str, *, device: str = "cpu", strategy: str | None = None,
               values: Mapping[str, Any] = MappingProxyType({})) -> str:
    """Why framework ``name`` cannot run the numerics ``values`` (setting name -> value:
    precision, math_mode, graph, and onednn, which math mode bf16 needs) on ``device`` in
    ``strategy`` ("" when it can): a value its ``runs`` does not declare there, one its
    ``runs_with`` keeps to other strategies, or settings that contradict each other
    (:func:`numerics_conflict`)."""
    chosen = framework(name)
    for s in SETTINGS:
        value = values.get(s.name, s.default)
        if s.name not in NUMERICS or value == s.default:
            continue
        known = chosen.runs.get(s.name, {}).get(device, (s.default,))
        if value not in known:
            return (f"framework {name} has no {s.name} '{value}' on {device} "
                    f"(it has: {', '.join(known)})")
        where = chosen.runs_with.get(s.name)
        if strategy is not None and where is not None and strategy not in where:
            return (f"framework {name} runs {s.name} '{value}' only with strategy "
                    f"{' or '.join(where)}, not {strategy}")
    return numerics_conflict(values)




def numerics_conflict(values: Mapping[str, Any]) -> str:
    """Why numerics settings ``values`` (setting name -> value) contradict each other or
    the vendor library ("" when they do not): the fp32 math mode concerns fp32 tensors
    only, so it stays strict under mixed precision; math mode bf16 is oneDNN's, so it needs
    the vendor library on."""
    math_mode = values.get("math_mode", "strict")
    if math_mode != "strict" and values.get("precision", "fp32") != "fp32":
        return (f"math_mode {math_mode} concerns fp32 tensors: it needs precision fp32, "
                f"not {values['precision']}")
    if math_mode == "bf16" and values.get("onednn", "on") in (False, "off"):
        return "math_mode bf16 is oneDNN's fpmath mode: it needs the vendor library on"
    return ""


add_plugins(os.environ.get(PLUGINS))  # last: a plugin may import what imports this module
