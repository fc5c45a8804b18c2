"""Job resources and the pre-submission plan: measurements, Slurm jobs (after batching),
node-hours, core-hours and GPU-hours per system and experiment, computed from the same
measurements the workflow runs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd

from archbench.core.files import atomic_write_text
from archbench.core.hardware import cores_of, cpus_per_process
from archbench.core.validate import ConfigError
from archbench.plan.batching import chunks
from archbench.plan.containers import image_name, parse_definition
from archbench.plan.placeholders import study_dir
from archbench.plan.slurm_requests import gpu_resources, sbatch_resources
from archbench.workloads.gpu import unsupported_gpus
from archbench.workloads.training.frameworks import environment as framework_environment
from archbench.workloads.training.strategies.base import ps_nodes

# Slack added to a run's time limit for start-up and record writing.
RUNTIME_MARGIN_MIN = 5
# Resources a measurement's job has even when job_resources leaves them out (the Slurm
# executor reads an empty account, partition, extra or gres as none).
RESOURCE_DEFAULTS = {"slurm_partition": "", "slurm_account": "", "slurm_extra": "", "gres": ""}


def job_resources(measurement: dict, system: dict, pinned_nodes: str | None = None) -> dict:
    """Portable Snakemake resources of one measurement on ``system``.

    A measurement occupies whole nodes (benchmarks need quiet machines): ``nodes``,
    one task per process, ``cores / processes_per_node`` CPUs per task; parameter servers
    placed on nodes of their own add one node and task each. 90 % of the system's
    ``memory_per_node_gb`` (default 4) per node as ``mem_mb`` (sbatch --mem, the job's
    only memory request). The system's placement keys (constraint, qos, reservation,
    exclusive, exclude, nodelist) go through :func:`sbatch_resources`; ``pinned_nodes``:
    the hostlist a repetition must run on. A GPU run (``device: gpu``) has one task per GPU
    (``processes_per_node`` is its ``gpus_per_node``) and asks for its GPUs through
    :func:`~archbench.plan.slurm_requests.gpu_resources`; a system that cannot hold them is a
    ConfigError naming the system and key (the campaign refuses it first, naming the file).
    """
    m = measurement
    ppn = m.get("processes_per_node", 1)
    nodes = m.get("nodes", 1)
    cpus = cpus_per_process(system, ppn)
    resources = {
        "nodes": nodes + ps_nodes(m),
        "tasks": nodes * ppn + ps_nodes(m),
        "cpus_per_task": cpus,
        "mem_mb": int(system.get("memory_per_node_gb", 4) * 1024 * 0.9),
        # every attempt rerun_busy may add gets its time limit (bounded: at most 5)
        "runtime": int(m.get("timeout_minutes", system["runtime_minutes"])) * (1 + int(m.get("rerun_busy", 0)))
                   + RUNTIME_MARGIN_MIN,
        "measurement_slots": 1,
    }
    if system.get("partition"):
        resources["slurm_partition"] = system["partition"]
    if system.get("account"):
        resources["slurm_account"] = system["account"]
    resources.update(sbatch_resources(system, pinned_nodes))
    try:
        resources.update(gpu_resources(m, system, resources["nodes"]))
    except ValueError as exc:
        raise ConfigError(f"systems.{system.get('name')}.{exc}") from None
    # the launcher's srun starts the workers and any parameter servers
    if nodes * ppn + int(m.get("parameter_servers") or 0) > 1 and system.get("launcher") == "srun":
        resources["mpi"] = "srun"
    elif m.get("device") == "gpu" and resources["tasks"] > 1:
        # the plugin writes --ntasks for a GPU job only in its MPI branch (which it enters
        # for any true ``mpi``): the launcher, which starts the ranks inside the job
        resources["mpi"] = system.get("launcher", "local")
    return resources


def plan_table(measurements: list[dict], systems: dict[str, dict], *, measurements_per_job: int = 1,
               batch_max_minutes: int | None = None) -> pd.DataFrame:
    """Measurements, Slurm jobs (a batch of ``measurements_per_job`` counts once, see
    :mod:`archbench.plan.batching`), node-hours, core-hours and GPU-hours (nodes x GPUs per node
    x hours; 0 for CPU runs) at the time limit, per system and experiment."""
    def resources(m: dict) -> dict:
        return job_resources(m, systems[m["system"]])

    # a batch spanning experiments counts in the row of its first measurement
    cut = chunks(measurements, resources, size=measurements_per_job, max_minutes=batch_max_minutes,
                 systems=systems)
    jobs = Counter((chunk[0]["system"], chunk[0]["experiment"]) for chunk in cut)
    rows = []
    for m in measurements:
        system = systems[m["system"]]
        res = resources(m)
        hours = res["runtime"] / 60
        gpus_per_node = int(m.get("gpus_per_node") or 0) if m.get("device") == "gpu" else 0
        rows.append({"system": m["system"], "experiment": m["experiment"],
                     "type": m["experiment_type"], "measurements": 1,
                     "max_nodes": res["nodes"],
                     "node_hours": res["nodes"] * hours,
                     "core_hours": res["nodes"] * cores_of(system) * hours,
                     "gpu_hours": res["nodes"] * gpus_per_node * hours})
    columns = ["system", "experiment", "type", "measurements", "jobs", "max_nodes",
               "node_hours", "core_hours", "gpu_hours"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    table = (frame.groupby(["system", "experiment", "type"], sort=True)
             .agg(measurements=("measurements", "sum"), max_nodes=("max_nodes", "max"),
                  node_hours=("node_hours", "sum"), core_hours=("core_hours", "sum"),
                  gpu_hours=("gpu_hours", "sum"))
             .reset_index())
    table["jobs"] = [jobs[key] for key in zip(table["system"], table["experiment"])]
    return table[columns]


def gpu_warnings(measurements: list[dict], systems: dict[str, dict],
                 definitions: str | Path = "containers") -> list[str]:
    """One line per system whose GPU measurements cannot run: its GPUs' compute capability
    (``gpu_compute_capability``) is older than every one its image's TensorFlow was built
    for (the label ``cuda_compute_capabilities`` of ``<definitions>/<image>.def``), so
    TensorFlow shows them no GPU and each such run is recorded as that failure."""
    lines = []
    used = sorted({(m["system"], image_name(systems[m["system"]], m.get("framework")) or "")
                   for m in measurements if m.get("device") == "gpu"})
    for name, image in used:
        system = systems[name]
        definition = Path(definitions) / f"{image}.def"
        if not system.get("gpu_compute_capability") or not definition.is_file():
            continue
        built = parse_definition(definition).labels.get("cuda_compute_capabilities", "").split()
        reason = unsupported_gpus(system["gpu_compute_capability"], [float(c) for c in built])
        if reason:
            lines.append(f"system {name} (image {image}): {reason}")
    return lines


def tuning_notes(measurements: list[dict], results: str | Path = "results") -> list[str]:
    """One line per tuner study (tune experiment, system, framework, model): its key (an
    edited space, budget or seed is a new study) and the earlier studies kept in
    ``results``, its rounds, round 1, measurements and planned node-hours beside the
    exhaustive sweep's."""
    studies: dict[tuple, list[dict]] = {}
    for m in measurements:
        if "tune_round" in m:
            studies.setdefault((m["experiment"], m["system"], m["framework"], m["model"]), []).append(m)
    lines = []
    for (experiment, system, framework, model), ms in sorted(studies.items()):
        first = [m for m in ms if m["tune_round"] == 0 and m["repetition"] == 0]
        trial = ms[0]["trial"]
        share = trial["budget_node_hours"] / trial["exhaustive_node_hours"]
        folder = study_dir(results, ms[0])
        study = re.compile(rf"{re.escape(framework)}-{re.escape(model)}(-[0-9a-f]{{12}})?")
        earlier = sorted(p.name for p in (folder.parent.iterdir() if folder.parent.is_dir() else ())
                         if p.is_dir() and p.name != folder.name and study.fullmatch(p.name))
        kept = f"; earlier studies kept beside it: {', '.join(earlier)}" if earlier else ""
        lines.append(f"{experiment} on {system} ({framework}, {model}, study {trial.get('study')}{kept}): "
                     f"{1 + max(m['tune_round'] for m in ms)} rounds, round 1 measures "
                     f"{len(first)} trials over {first[0]['measured_steps']} steps; {len(ms)} "
                     f"measurements, {trial['budget_node_hours']:.2f} node-hours against "
                     f"{trial['exhaustive_node_hours']:.2f} for the exhaustive sweep "
                     f"({100 * share:.0f} %)")
    return lines


def environment_notes(measurements: list[dict]) -> list[str]:
    """One line per system and experiment whose jobs get environment variables from the
    campaign (system and experiment ``env``, ``mkl_env``): each distinct set with how many
    measurements get it; then, when there is any, archbench's own, which every job gets."""
    groups: dict[tuple[str, str], Counter] = {}
    for m in measurements:
        given = " ".join(f"`{k}={v}`" for k, v in sorted((m.get("env") or {}).items())) or "none"
        groups.setdefault((m["experiment"], m["system"]), Counter())[given] += 1
    lines = [f"{experiment} on {system}: " + "; ".join(f"{given} ({n} measurements)"
                                                      for given, n in sorted(sets.items()))
             for (experiment, system), sets in sorted(groups.items()) if set(sets) != {"none"}]
    if lines:
        lines.append("every job also gets archbench's own " + " ".join(
            f"`{k}={v}`" for k, v in sorted(framework_environment().items())))
    return lines


def plan_markdown(name: str, table: pd.DataFrame, warnings: list[str] = (), *,
                  tuning: list[str] = (), environment: list[str] = ()) -> str:
    """The plan as Markdown with a total line (upper bounds: every run at its time limit),
    the tuners' plans (:func:`tuning_notes`), the environment the campaign gives its jobs
    (:func:`environment_notes`) and the ``warnings`` (:func:`gpu_warnings`)."""
    total = table[["measurements", "jobs", "node_hours", "core_hours", "gpu_hours"]].sum()
    body = table.to_markdown(index=False, floatfmt=".2f") if not table.empty else "(no jobs)"
    return (f"# Plan for campaign `{name}`\n\n"
            "Upper bounds: every run is charged its full time limit. `jobs` counts Slurm "
            "jobs: a batch of measurements (`measurements_per_job`) is one.\n\n"
            f"{body}\n\n**Total:** {int(total['measurements'])} measurements in "
            f"{int(total['jobs'])} Slurm jobs, {total['node_hours']:.2f} node-hours, "
            f"{total['core_hours']:.2f} core-hours, {total['gpu_hours']:.2f} GPU-hours.\n"
            + "".join(f"\n**Tuning:** {line}\n" for line in tuning)
            + "".join(f"\n**Environment:** {line}\n" for line in environment)
            + "".join(f"\n**Warning:** {line}\n" for line in warnings))


def campaign_plan(name: str, measurements: list[dict], systems: dict[str, dict], *,
                  measurements_per_job: int = 1, batch_max_minutes: int | None = None
                  ) -> tuple[pd.DataFrame, str]:
    """The plan of campaign ``name``: its table and its Markdown (with the GPU warnings)."""
    table = plan_table(measurements, systems, measurements_per_job=measurements_per_job,
                       batch_max_minutes=batch_max_minutes)
    return table, plan_markdown(name, table, gpu_warnings(measurements, systems),
                                tuning=tuning_notes(measurements),
                                environment=environment_notes(measurements))


def write_plan(name: str, measurements: list[dict], systems: dict[str, dict], *,
               csv: str, markdown: str, measurements_per_job: int = 1,
               batch_max_minutes: int | None = None) -> pd.DataFrame:
    """Write the plan of campaign ``name`` as CSV and Markdown; return its table."""
    table, text = campaign_plan(name, measurements, systems, measurements_per_job=measurements_per_job,
                                batch_max_minutes=batch_max_minutes)
    atomic_write_text(csv, table.to_csv(index=False, float_format="%.4f", lineterminator="\n"))
    atomic_write_text(markdown, text)
    return table
