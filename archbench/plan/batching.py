"""Batching: many short measurements of one system in one Slurm job.

With ``measurements_per_job: N`` in a campaign, single-node measurements that ask for exactly the
same allocation (one system, same resources but the time limit) are cut,
in campaign order, into chunks of at most N. Each chunk is one Snakemake job group: the
Slurm executor submits it as ONE job of one member's node, cores and memory, with the
SUM of its members' time limits, and runs the members one after another inside it (the
workflow makes ``measurement_slots`` a per-submission resource with a pool of 1). Every
member is still its own ``run_measurement`` job: the supervisor writes its record, with
its own status.

Not batched: multi-node measurements (each owns several nodes; queue time is not their
cost) and measurements that take their layout from other records (``best``), whose
chunks could otherwise depend on each other both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from archbench.plan.placeholders import is_placeholder

# Resources that may differ inside a chunk: Snakemake sums runtime over the serial
# members and takes the maximum (1) of the slots.
VARYING = ("runtime", "measurement_slots")


def batch_key(measurement: dict, resources: dict, system: dict | None = None) -> tuple | None:
    """What a measurement must share with the others of its chunk, or None when it runs
    as a job of its own (batching off for it). A system keeping repetitions on the same
    nodes (``same_nodes``) is never batched: its later repetitions are pinned, at
    submission, to the nodes repetition 0 ran on."""
    if resources.get("nodes", 1) != 1 or is_placeholder(measurement):
        return None
    if system is not None and system.get("same_nodes"):
        return None
    fixed = tuple(sorted((k, str(v)) for k, v in resources.items() if k not in VARYING))
    return (measurement["system"], fixed)


def chunks(measurements: list[dict], resources: Callable[[dict], dict], *, size: int,
           max_minutes: int | None = None,
           systems: Mapping[str, dict] | None = None) -> list[list[dict]]:
    """The measurements cut into Slurm jobs, in campaign order: chunks of at most ``size``
    members sharing a :func:`batch_key` whose summed ``runtime`` stays within
    ``max_minutes`` (a partition's time limit; None: no bound), and single measurements."""
    out: list[list[dict]] = []
    open_chunk: dict[tuple, list[dict]] = {}
    minutes: dict[tuple, int] = {}
    for m in measurements:
        res = resources(m)
        system = systems[m["system"]] if systems is not None else None
        key = batch_key(m, res, system) if size > 1 else None
        if key is None:
            out.append([m])
            continue
        chunk = open_chunk.get(key)
        full = chunk is not None and (len(chunk) >= size or (
            max_minutes is not None and minutes[key] + res["runtime"] > max_minutes))
        if chunk is None or full:
            chunk = open_chunk[key] = []
            minutes[key] = 0
            out.append(chunk)
        chunk.append(m)
        minutes[key] += res["runtime"]
    return out


def group_names(measurements: list[dict], resources: Callable[[dict], dict],
                path: Callable[[dict], str], *, size: int, max_minutes: int | None = None,
                systems: Mapping[str, dict] | None = None) -> dict[str, str]:
    """Record path -> job group name, for the members of chunks of two or more (a group
    of one would only add a nested Snakemake to the job)."""
    if size <= 1:  # batching off: no group, and no resources computed at planning
        return {}
    groups = {}
    for number, chunk in enumerate(chunks(measurements, resources, size=size,
                                          max_minutes=max_minutes, systems=systems)):
        if len(chunk) > 1:
            name = f"batch-{chunk[0]['system']}-{number}"
            groups.update({path(m): name for m in chunk})
    return groups
