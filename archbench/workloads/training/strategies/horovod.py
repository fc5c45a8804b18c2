"""Strategy ``horovod``: data parallelism with gradients averaged by allreduce (MPI or Gloo).

Launched by ``mpirun`` (launcher local|mpirun), ``srun`` (launcher srun), or
``horovodrun --gloo`` on one node for the Gloo controller (``tuning.horovod_controller``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from archbench.workloads.launch import LaunchError, process_rank, srun_argv
from archbench.workloads.tfenv import FRAMEWORK_ENV
from archbench.workloads.training.strategies.base import Launch, Strategy

PROBE_STEPS = 3  # steps after the window whose allreduces are counted
BARRIER = "archbench_barrier"  # name of the barrier's tensor
FORWARDED = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")  # mpirun -x NAME


def horovod_knobs(cycle_time_ms: float | None, fusion_threshold_bytes: int | None) -> dict:
    """The Horovod settings a run was given, as record metrics (also on failure records,
    so a setting that only failed is still named in the tuning table)."""
    out = {}
    if cycle_time_ms is not None:
        out["horovod_cycle_time"] = {"value": cycle_time_ms, "unit": "ms"}
    if fusion_threshold_bytes is not None:
        out["horovod_fusion_threshold"] = {"value": fusion_threshold_bytes, "unit": "B"}
    return out


# ---------------------------------------------------------------- launch

def horovodrun() -> str:
    """horovodrun next to this interpreter (a venv), else from PATH."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else (shutil.which("horovodrun") or "horovodrun")


def mpirun_env(env: dict[str, str]) -> list[str]:
    """``-x`` options giving every rank the framework environment, ``env``, and this
    process's paths (PATH, PYTHONPATH, ...)."""
    env = {**FRAMEWORK_ENV, **env}
    out = []
    for name, value in env.items():
        out += ["-x", f"{name}={value}"]
    for name in FORWARDED:
        if name in os.environ and name not in env:
            out += ["-x", name]
    return out


def launch(plan: Launch) -> list[str]:
    """mpirun, srun, or horovodrun --gloo (one node) + the worker."""
    plan.require_one_node_if_local()
    ranks, worker = plan.ranks, list(plan.worker)
    if plan.tuning.get("horovod_controller", "mpi") == "gloo":
        if plan.nodes > 1 or plan.launcher == "srun":
            raise LaunchError("the Gloo controller is launched with horovodrun on one node; "
                              "use the MPI controller for several nodes or srun")
        return [horovodrun(), "--gloo", "-np", str(ranks), "-H", f"localhost:{ranks}", *worker]
    if plan.launcher == "srun":
        # MPI ranks started by srun find each other through PMIx unless the system names
        # another plugin (SLURM_MPI_TYPE in its env, which srun reads)
        mpi = [] if "SLURM_MPI_TYPE" in {**os.environ, **plan.env} else ["--mpi=pmix"]
        return srun_argv(nodes=plan.nodes, tasks=ranks, cpus_per_task=plan.cpus_per_process,
                         tasks_per_node=plan.processes_per_node) + mpi + worker
    argv = ["mpirun"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(ranks)]
    if plan.launcher == "local":
        argv += ["--oversubscribe", "--bind-to", "none"]
    else:
        argv += ["--map-by", f"ppr:{plan.processes_per_node}:node:PE={plan.cpus_per_process}",
                 "--bind-to", "core"]
    return argv + mpirun_env(dict(plan.env)) + worker


def shut_down() -> None:
    """End Horovod in this process, in whichever framework started it (with MPI, MPI is
    finalised): the process may then end without the framework's teardown, which in a
    2-rank run of one framework waited 1.5-5.4 s on its dataset iterator's threads. It waits for
    no other rank: a rank may end before rank 0 has written the record, which is no loss,
    since mpirun (and so the supervisor, which reads the record only then) waits for every
    rank, and a rank that finalised MPI and exits 0 ends no other."""
    for binding in horovod_bindings():
        if binding.is_initialized():
            binding.shutdown()


def horovod_bindings() -> list:
    """The framework bindings of Horovod this process imported (``horovod.<framework>``:
    the modules directly under ``horovod`` that can say whether Horovod is initialised)."""
    return [module for name, module in list(sys.modules.items())
            if name.count(".") == 1 and name.startswith("horovod.") and module is not None
            and callable(getattr(module, "is_initialized", None))
            and callable(getattr(module, "shutdown", None))]


STRATEGY = Strategy(launch=launch, launch_rank=process_rank,
                    help="Horovod allreduce (MPI or Gloo controller)", label="Horovod",
                    finish=shut_down)
