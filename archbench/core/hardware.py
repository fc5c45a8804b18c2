"""The core counts every part of archbench derives from a system (a resolved system file,
:mod:`archbench.plan.systems`)."""

from __future__ import annotations

import os


def cores_of(system: dict) -> int:
    """Physical cores per node of a system (``auto``: this machine's CPUs)."""
    per_socket = system.get("cores_per_socket", "auto")
    sockets = int(system.get("sockets", 1))
    if not isinstance(per_socket, int):
        return max(1, os.cpu_count() or 1)
    return sockets * per_socket


def hardware_threads(system: dict) -> int:
    """Hardware threads per node: physical cores x threads per core."""
    return cores_of(system) * int(system.get("threads_per_core", 1))


def cpus_per_process(system: dict, processes_per_node: int) -> int:
    """Cores each of ``processes_per_node`` processes of a node gets (at least one)."""
    return max(1, cores_of(system) // max(1, int(processes_per_node)))
