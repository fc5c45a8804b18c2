"""A system's Slurm placement keys as what snakemake-executor-plugin-slurm accepts.

``constraint`` and ``qos`` become the plugin's own resources of those names (it writes
``-C`` and ``--qos``); what the plugin leaves to ``slurm_extra`` (``reservation``,
``exclusive``, ``exclude``, ``nodelist``, the nodes a repetition is pinned to) becomes
``--option=value`` words there, after the user's own ``slurm_extra``. A user-written
``slurm_extra`` may not set what the plugin manages (its table of forbidden options, the
one it refuses jobs by) nor what a system key sets here.

GPUs (:func:`gpu_resources`) are the plugin's own resources too: ``gres`` (``--gres=gpu:N``
per node, the default) or ``gpu``/``gpu_model`` (``--gpus=N``, a job total), as the system's
``gpu_request`` says.
"""

from __future__ import annotations

import re
import shlex

from archbench.core.validate import ConfigError

# The system key that sets what a plugin-managed option would (by the plugin's name of it).
PLUGIN_OPTION_KEYS = {
    "node constraints": "constraint", "quality of service": "qos", "account": "account",
    "partition": "partition", "memory": "memory_per_node_gb",
    "memory per CPU": "memory_per_node_gb", "runtime/time limit": "runtime_minutes",
    "generic resources (GRES)": "gpus_per_node", "GPU allocation": "gpus_per_node",
}
# Options this module writes into slurm_extra, by the system key that sets them.
EXTRA_OPTION_KEYS = {"--reservation": "reservation", "--exclusive": "exclusive",
                     "--exclude": "exclude", "--nodelist": "nodelist"}
# The only sbatch options a slurm_extra may set: each changes neither what a job runs, nor
# where its output goes, nor the planned layout (nodes, tasks, CPUs, GPUs, memory, time);
# docs/cluster.md argues each, and those left out.
SLURM_EXTRA_ALLOWED = ("--begin", "--hint", "--licenses", "--mail-type",
                       "--mail-user", "--nice", "--no-requeue", "--requeue", "--switches",
                       "--tmp", "--wckey")


def check_slurm_extra(text: str) -> None:
    """Raise ValueError naming the option (and the system key to use instead) when the
    user-written ``text`` sets an option the plugin manages, one a system key sets, or one
    not in :data:`SLURM_EXTRA_ALLOWED`."""
    # imported here: images install archbench without the workflow's packages, and their
    # workers import archbench.plan.systems (which checks systems through this module)
    try:
        from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options
    except ImportError as exc:
        raise ValueError("cannot be checked: the Slurm executor plugin is not installed "
                         "(pip install snakemake-executor-plugin-slurm, at the version "
                         "pyproject.toml pins)") from exc
    for pattern, name in get_forbidden_slurm_options().items():
        if re.search(pattern, text):
            key = PLUGIN_OPTION_KEYS.get(name)
            instead = f"use the system key {key}" if key else "archbench or the plugin sets it"
            raise ValueError(f"sets the {name} option, which the Slurm executor plugin "
                             f"manages ({instead})")
    for word in text.split():
        option = word.split("=", 1)[0]
        if option in EXTRA_OPTION_KEYS:
            raise ValueError(f"sets {option}, which the system key "
                             f"{EXTRA_OPTION_KEYS[option]} sets")
        if option not in SLURM_EXTRA_ALLOWED:
            raise ValueError(f"sets {option}, which slurm_extra may not set: only options that "
                             f"change neither what runs, nor where its output goes, nor the "
                             f"planned layout ({', '.join(SLURM_EXTRA_ALLOWED)})")


def check_system(system: dict, where: str = "", source: str | None = None) -> None:
    """Raise ConfigError (one line: ``source``, key path) when a system's slurm_extra
    sets an option the plugin manages or a system key sets."""
    if not system.get("slurm_extra"):
        return
    try:
        check_slurm_extra(system["slurm_extra"])
    except ValueError as exc:
        key = f"{where}.slurm_extra" if where else "slurm_extra"
        raise ConfigError(f"{key}: '{system['slurm_extra']}' {exc}", source=source) from exc


def hostlist(names: list[str] | str) -> str:
    """Node names and Slurm hostlist expressions (``n[1-4]``) as one sbatch value."""
    return names if isinstance(names, str) else ",".join(names)


def sbatch_resources(system: dict, pinned_nodes: str | None = None) -> dict:
    """Snakemake resources the Slurm executor plugin turns into a system's placement
    options: ``constraint``, ``qos`` and ``slurm_extra`` (only those a system sets; an
    empty constraint or qos would reach sbatch as ``-C ''``). ``pinned_nodes``: a
    hostlist the job must run on (repetitions kept on one configuration's nodes); it
    replaces the system's ``nodelist``."""
    resources = {key: system[key] for key in ("constraint", "qos") if system.get(key)}
    words = [system["slurm_extra"]] if system.get("slurm_extra") else []
    if system.get("reservation"):
        words.append(f"--reservation={shlex.quote(system['reservation'])}")
    if system.get("exclusive"):
        words.append("--exclusive")
    if system.get("exclude"):
        words.append(f"--exclude={shlex.quote(hostlist(system['exclude']))}")
    nodelist = pinned_nodes or (hostlist(system["nodelist"]) if system.get("nodelist") else "")
    if nodelist:  # quoted: the plugin runs sbatch through a shell, and n[1-2] is a glob
        words.append(f"--nodelist={shlex.quote(nodelist)}")
    if words:
        resources["slurm_extra"] = " ".join(words)
    return resources


def pinned_nodes(record: dict) -> str | None:
    """The nodes a record's run had (``slurm_nodes``, else ``hosts``) as one hostlist,
    or None when it names none."""
    return record.get("slurm_nodes") or hostlist(record.get("hosts") or []) or None


def gpu_resources(measurement: dict, system: dict, nodes: int) -> dict:
    """The Slurm executor plugin's GPU resources of a measurement whose job takes ``nodes``
    nodes ({} for a CPU run).

    One task per GPU: the measurement's ``gpus_per_node`` on each of its nodes. The
    system's ``gpu_request`` chooses the sbatch option: ``gres`` (default) asks
    ``--gres=gpu[:<gpu_type>]:<per node>``, per node, which every Slurm with gres/gpu takes
    (older sites such as Piz Daint know only this); ``gpus`` asks ``--gpus=[<gpu_type>:]<total>``,
    a job total that Slurm may spread unevenly over nodes, so only one-node measurements
    use it. ``tasks_per_gpu`` 0 keeps the plugin from writing ``--ntasks-per-gpu`` (it would
    take our task count, parameter servers included, as tasks per GPU); the task count
    itself is ``--ntasks``. Raises ValueError (reason, naming the system key) when the
    system cannot hold the request.
    """
    if measurement.get("device") != "gpu":
        return {}
    per_node = int(measurement.get("gpus_per_node") or 0)
    have = int(system.get("gpus_per_node") or 0)
    if per_node < 1 or per_node > have:
        raise ValueError(f"gpus_per_node: {have} GPUs per node, but experiment "
                         f"'{measurement.get('experiment')}' asks for {per_node} per node (device gpu)")
    kind = system.get("gpu_type")
    if system.get("gpu_request", "gres") == "gpus":
        if nodes > 1:
            raise ValueError(f"gpu_request: gpus asks Slurm for a job total it may spread "
                             f"unevenly over nodes; experiment '{measurement.get('experiment')}' "
                             f"runs jobs of {nodes} nodes (use gpu_request: gres)")
        return {"gpu": per_node, **({"gpu_model": kind} if kind else {}), "tasks_per_gpu": 0}
    return {"gres": f"gpu:{kind}:{per_node}" if kind else f"gpu:{per_node}", "tasks_per_gpu": 0}
