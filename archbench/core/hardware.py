"""The core counts every part of archbench derives from a system (a resolved system file,
:mod:`archbench.plan.systems`)."""

from __future__ import annotations


def cores_of(system: dict) -> int:
    """Physical cores per node of a system: sockets x cores_per_socket, its own keys (a
    resolved system has ``auto`` replaced, :func:`archbench.plan.systems.resolve_system`);
    raises ValueError for a system that does not give them, never this machine's cores."""
    per_socket = system.get("cores_per_socket")
    if isinstance(per_socket, bool) or not isinstance(per_socket, int):
        raise ValueError(f"system {system.get('name', '')!r}: cores_per_socket "
                         f"{per_socket!r} is not a count of cores")
    return int(system.get("sockets", 1)) * per_socket


def hardware_threads(system: dict) -> int:
    """Hardware threads per node: physical cores x threads per core."""
    return cores_of(system) * int(system.get("threads_per_core", 1))


def cpus_per_process(system: dict, processes_per_node: int) -> int:
    """Cores each of ``processes_per_node`` processes of a node gets (at least one)."""
    return max(1, cores_of(system) // max(1, int(processes_per_node)))
