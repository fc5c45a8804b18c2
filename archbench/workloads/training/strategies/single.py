"""Strategy ``single``: one process, no communication, started as it is."""

from __future__ import annotations

from archbench.workloads.launch import LaunchError
from archbench.workloads.training.strategies.base import Launch, Strategy


def launch(plan: Launch) -> list[str]:
    """The worker itself: no launcher."""
    if plan.ranks != 1:
        raise LaunchError(f"strategy single runs one process, not {plan.nodes} x "
                          f"{plan.processes_per_node}")
    return list(plan.worker)


STRATEGY = Strategy(launch=launch, multi_process=False, help="one process",
                    label="single process")
