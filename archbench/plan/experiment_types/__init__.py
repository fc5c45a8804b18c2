"""The experiment types a campaign can use: one module each, one line each here.

``EXPERIMENT_TYPES[name]`` is an :class:`~archbench.plan.experiment_types.base.ExperimentType`
(schema fragment, expansion, the tables and figures it feeds). To add a type, write its
module (see docs/extending.md) and add it to the tuple below.
"""

from __future__ import annotations

from archbench.plan.experiment_types import (
    batch_sweep,
    horovod_tuning,
    hybrid,
    inter_intra,
    kernel,
    node_scaling,
    ppn_sweep,
    quality,
    thread_scaling,
    tune,
)
from archbench.plan.experiment_types.base import ExperimentType

EXPERIMENT_TYPES: dict[str, ExperimentType] = {t.name: t for t in (
    thread_scaling.TYPE,
    batch_sweep.TYPE,
    hybrid.TYPE,
    inter_intra.TYPE,
    ppn_sweep.TYPE,
    node_scaling.TYPE,
    horovod_tuning.TYPE,
    kernel.TYPE,
    quality.TYPE,
    tune.TYPE,
)}


def feeding(artifact: str) -> list[str]:
    """Names of the experiment types whose results feed table or figure ``artifact``."""
    return [name for name, t in EXPERIMENT_TYPES.items()
            if artifact in t.tables or artifact in t.figures]


__all__ = ["EXPERIMENT_TYPES", "ExperimentType", "feeding"]
