"""The framework x strategy x variable update x device matrix: what a training run may
combine, read from the plugins' own capability flags (the frameworks' registry,
:mod:`archbench.workloads.training.frameworks`, and the strategies',
:mod:`archbench.workloads.training.strategies`), checked alike at every door: campaigns,
the training worker, imported rows, claims and ``tune`` spaces."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping

from archbench.workloads.training.frameworks import FRAMEWORKS, Framework, cannot_run, framework
from archbench.workloads.training.strategies import STRATEGIES, update_strategies


def lacks(name: str, *, model: str | None = None, strategy: str | None = None,
          variable_update: str | None = None, device: str = "cpu",
          values: Mapping[str, Any] = MappingProxyType({}),
          model_names: Callable[[Framework], list[str]] = Framework.model_names) -> str:
    """Why framework ``name`` cannot train this combination ("" when it can): a model,
    strategy or variable update it does not have, as "framework <name> has no <what>
    '<value>' (it has: ...)"; or a numerics setting's value (``values``: setting name ->
    value, e.g. precision) it does not run on ``device`` or in ``strategy`` (its ``runs``
    and ``runs_with``), or that contradicts another setting
    (:func:`archbench.workloads.training.frameworks.numerics_conflict`)."""
    chosen = framework(name)
    if model is not None and model not in (known := model_names(chosen)):
        return f"framework {name} has no model '{model}' (it has: {', '.join(known)})"
    gap = outside_matrix(name, strategy=strategy, variable_update=variable_update, device=device)
    if gap:
        return gap[1]
    return cannot_run(name, device=device, strategy=strategy, values=values)


def outside_matrix(name: str, *, strategy: str | None = None, variable_update: str | None = None,
                   device: str | None = None) -> tuple[str, str] | None:
    """Where framework ``name`` x ``strategy`` x ``variable_update`` x ``device`` falls
    outside what runs, as (the key at fault, why), e.g. ``("strategy", "framework pytorch
    has no strategy 'mirrored' (it has: single, horovod, ddp)")``; None when it runs. The
    one check of that matrix for every door: campaigns (:func:`lacks`), the training
    worker, imported rows and claims (:mod:`archbench.results.imports`,
    :mod:`archbench.results.claims`) and ``tune`` spaces. None (unstated) matches anything.

    The matrix is the plugins' own capability flags: a framework runs the strategies it
    has a backend of (``Framework.backends``) and the variable updates it declares
    (``Framework.variable_updates``); a registered variable update belongs to the strategy
    that declares it (``Strategy.variable_updates``), runs only where that strategy runs,
    and not on a device its strategy keeps it from (``Strategy.cpu_only_updates``). A
    variable update no strategy registers (a published row's tf_cnn_benchmarks name, e.g.
    replicated) is checked against the framework only."""
    if name not in FRAMEWORKS:
        return "framework", f"unknown framework '{name}' (known: {', '.join(FRAMEWORKS)})"
    chosen = FRAMEWORKS[name]
    if strategy is not None and strategy not in chosen.backends:
        return "strategy", (f"framework {name} has no strategy '{strategy}' "
                            f"(it has: {', '.join(chosen.backends) or 'none'})")
    if variable_update is None:
        return None
    updates = chosen.variable_updates
    if updates is not None and variable_update not in updates:
        return "variable_update", (f"framework {name} has no variable update '{variable_update}' "
                                   f"(it has: {', '.join(updates) or 'none'})")
    owner = update_strategies().get(variable_update)
    if owner is not None and strategy is not None and owner != strategy:
        return "variable_update", (f"variable update '{variable_update}' is strategy {owner}'s, "
                                   f"not {strategy}'s")
    if owner is not None and owner not in chosen.backends:
        return "variable_update", (f"framework {name} has no strategy '{owner}' (it has: "
                                   f"{', '.join(chosen.backends) or 'none'}) that variable update "
                                   f"'{variable_update}' runs")
    if owner is not None and device == "gpu" and variable_update in STRATEGIES[owner].cpu_only_updates:
        return "device", (f"variable update '{variable_update}' does not run on GPUs here (its "
                          "steps run on remote workers whose placement is not recorded)")
    return None
