"""Training frameworks: one training loop each, one line each in :data:`FRAMEWORKS`.

A framework is the loop that turns a :class:`~archbench.workloads.training.settings.TrainRun`
into a record (``run(config)`` -> the record on the writing process, None elsewhere),
with what it can train: the models it builds, the strategies it runs and their variable
updates. Every list of framework names reads this registry: the ``--framework`` choices
of ``archbench.train``, the experiment schema's ``framework`` axis, the names a record may
carry, and the figures' labels (``Framework.label``).

To add a framework, write its loop (a module with ``run(config)`` and
``probe_step(config)``) and its model registry,
and add one line below. The loop is imported only when a run asks for it: listing the
frameworks loads neither TensorFlow nor PyTorch.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Callable

from archbench.core.record import DEFAULT_FRAMEWORK
from archbench.workloads.tfcluster import LaunchError


@dataclass(frozen=True, kw_only=True)
class Framework:
    """A registered training framework.

    ``loop``: the module holding ``run(config)`` and ``probe_step(config)`` (one
    process's step and batch, for the vendor probe); ``models``: the module:attribute of
    its model registry (a dict keyed by the model names of
    ``archbench.workloads.training.models``); ``strategies``:
    the registered strategies it runs; ``variable_updates``: those of its strategies'
    variable updates it runs (None: all of them); ``tuning``: the experiment keys only
    its configurations take, each planned under their ``tuning`` as the training setting
    of the same name; ``label``: its name in tables and figures; ``short_label``: its
    abbreviation in table headers ("TF img/s"); ``pins``: the pip packages whose versions
    an image pins and labels (those also in ``distributions`` are the framework's own
    version, labelled under ``module``'s name).
    """

    label: str
    loop: str
    models: str
    module: str
    distributions: tuple[str, ...]
    variable_updates: tuple[str, ...] | None = None
    tuning: tuple[str, ...] = ()
    help: str = ""
    short_label: str = ""
    pins: tuple[str, ...] = ()

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
        module, attribute = self.models.split(":")
        return list(getattr(importlib.import_module(module), attribute))


FRAMEWORKS: dict[str, Framework] = {
    "tensorflow": Framework(
        label="TensorFlow", loop="archbench.workloads.training.tf_loop",
        models="archbench.workloads.training.models:MODELS",
        module="tensorflow", distributions=("tensorflow-cpu", "tensorflow", "tensorflow-aarch64"),
        short_label="TF", pins=("tensorflow", "tensorflow-cpu", "tf-keras"),
        help="TensorFlow 2 with legacy Keras (tf_keras), oneDNN on x86"),
    "pytorch": Framework(
        label="PyTorch", loop="archbench.workloads.training.pytorch.loop",
        models="archbench.workloads.training.pytorch.models:MODELS",
        module="torch", distributions=("torch",),
        variable_updates=(), tuning=("loader_workers",),
        short_label="PT", pins=("torch", "torchvision", "timm"),
        help="PyTorch with torchvision and timm models, oneDNN (mkldnn) on CPUs"),
}
DEFAULT = DEFAULT_FRAMEWORK  # records and configurations older than the field ran TensorFlow


def framework(name: str) -> Framework:
    """The registered framework ``name``; LaunchError naming the known ones otherwise."""
    if name not in FRAMEWORKS:
        raise LaunchError(f"unknown framework '{name}' (known: {', '.join(FRAMEWORKS)})")
    return FRAMEWORKS[name]


def strategies_of(name: str) -> list[str]:
    """The registered strategies that run in framework ``name``."""
    from archbench.workloads.training.strategies import STRATEGIES
    return [s for s, chosen in STRATEGIES.items() if name in chosen.frameworks]


def label(name: str) -> str:
    """The name a reader sees for framework ``name`` (``name`` itself when unregistered)."""
    chosen = FRAMEWORKS.get(name)
    return chosen.label if chosen is not None else name


def lacks(name: str, *, model: str | None = None, strategy: str | None = None,
          variable_update: str | None = None,
          model_names: Callable[[Framework], list[str]] = Framework.model_names) -> str:
    """Why framework ``name`` cannot train this combination ("" when it can): a model,
    strategy or variable update it does not have, as "framework <name> has no <what>
    '<value>' (it has: ...)"."""
    chosen = framework(name)
    wanted = (("model", model, model_names(chosen)), ("strategy", strategy, strategies_of(name)),
              ("variable update", variable_update, chosen.variable_updates))
    for what, value, known in wanted:
        if value is not None and known is not None and value not in known:
            return (f"framework {name} has no {what} '{value}' "
                    f"(it has: {', '.join(known) or 'none'})")
    return ""
