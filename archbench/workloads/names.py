"""The names a record's registry fields may take, read from the registries each time they
are asked for (so a model, kernel or strategy registered in one line counts everywhere at
once): ``model`` a registered model, ``kernel`` a registered kernel, ``strategy`` a
registered training strategy or a kernel's :data:`~archbench.workloads.kernels.spec.KERNEL_STRATEGY`,
``variable_update`` one a registered strategy takes, ``framework`` a registered framework. Each may also be null.

The record schema (``archbench/schemas/record.schema.json``, in core, below the registries)
checks these fields' shape only; :func:`unregistered` is the check of their names, made
where a record is counted (``archbench.workloads.sense.problem``). The importer takes its
strategy choices from :func:`registered` too.
"""

from __future__ import annotations

from typing import Any, Mapping

# what each field names, as an error message says it
FIELDS = {"model": "model", "kernel": "kernel", "strategy": "strategy",
          "variable_update": "variable update", "framework": "framework"}


def registered(field: str) -> list[str]:
    """The names record field ``field`` (one of :data:`FIELDS`) may take, in registry order."""
    # the registries load when asked: importing this module sets no framework's environment
    if field == "model":
        from archbench.workloads.training.models import LANGUAGE_MODELS, MODELS
        return [*MODELS, *LANGUAGE_MODELS]
    if field == "framework":
        from archbench.workloads.training.frameworks import FRAMEWORKS
        return list(FRAMEWORKS)
    if field == "kernel":
        from archbench.workloads.kernels import KERNELS
        return list(KERNELS)
    from archbench.workloads.kernels.spec import KERNEL_STRATEGY
    from archbench.workloads.training.strategies import STRATEGIES, update_strategies
    if field == "strategy":
        return [*STRATEGIES, KERNEL_STRATEGY]
    if field == "variable_update":
        return list(update_strategies())
    raise KeyError(f"'{field}' is not a registry field (known: {', '.join(FIELDS)})")


def unregistered(record: Mapping[str, Any]) -> str:
    """"" when every registry field of ``record`` is null or a registered name, else one
    line: "<field>: '<name>' is not a registered <what> (known: ...)"."""
    for field, what in FIELDS.items():
        name = record.get(field)
        if name is None:
            continue
        known = registered(field)
        if name not in known:
            return f"{field}: '{name}' is not a registered {what} (known: {', '.join(known)})"
    return ""
