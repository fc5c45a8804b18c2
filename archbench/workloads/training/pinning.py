"""Placing the processes of a training run on the node: each pins itself to its own block
of cores before the framework starts its thread pools.

The strategies themselves (backends and launchers) are in ``archbench.workloads.training.strategies``.
"""

from __future__ import annotations

import os


def pin_cores(cores: int, index: int = 0) -> list[int]:
    """Restrict this process to ``cores`` CPUs: block ``index`` of the CPUs it may use.

    Call before the framework starts its thread pools. Returns the CPUs chosen.
    """
    allowed = sorted(os.sched_getaffinity(0))
    chosen = allowed[index * cores:(index + 1) * cores]
    if len(chosen) < cores:
        raise ValueError(f"--cores {cores} (block {index}) needs more than the "
                         f"{len(allowed)} CPUs this process may use")
    os.sched_setaffinity(0, chosen)
    return chosen
