"""Launching multi-process training, and the TF cluster as one of its tasks sees it.

``launcher_argv`` wraps a worker's argv in the system's ``launcher``:

* Horovod: ``mpirun`` (launcher local|mpirun; ``horovodrun --gloo`` for the Gloo
  controller, one node) or ``srun`` (launcher srun).
* TF strategies: ``srun`` (``cluster_resolver`` builds the cluster from the Slurm
  job step), or locally ``python -m archbench.launch spawn`` which starts one process
  per task on free 127.0.0.1 ports with a TF_CONFIG each::

    python -m archbench.launch spawn --workers 2 --ps 1 -- -m archbench.train ...

The parameter servers and workers of a ParameterServer run ``serve`` until the chief is
done. The training backends themselves are in ``archbench.distributed``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from archbench.tfcluster import TF_STRATEGIES, LaunchError

SERVER_GRACE_S = 10  # servers left after the chief finished are stopped after this


# ---------------------------------------------------------------- launchers

def _tuning(m: dict) -> dict:
    return m.get("tuning") or {}


def controller(m: dict) -> str:
    """Horovod controller of a measurement: mpi (default) or gloo (``tuning``)."""
    return _tuning(m).get("horovod_controller", "mpi")


def parameter_servers(m: dict) -> int:
    """Parameter servers of a measurement (``tuning.parameter_servers``, default 1)."""
    return int(_tuning(m).get("parameter_servers", 1))


def cpus_per_process(m: dict, system: dict) -> int:
    """Cores each process of a node gets: cores per node // processes per node (>= 1)."""
    cores = system.get("sockets", 1) * system.get("cores_per_socket", os.cpu_count() or 1)
    if not isinstance(cores, int):
        cores = os.cpu_count() or 1
    return max(1, cores // m["processes_per_node"])


def horovodrun() -> str:
    """horovodrun next to this interpreter (a venv), else from PATH."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else (shutil.which("horovodrun") or "horovodrun")


def _mpirun_env(m: dict) -> list[str]:
    env = {"TF_USE_LEGACY_KERAS": "1", **{k: str(v) for k, v in (m.get("env") or {}).items()}}
    out = []
    for name, value in env.items():
        out += ["-x", f"{name}={value}"]
    for name in ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV"):
        if name in os.environ and name not in env:
            out += ["-x", name]
    return out


def launcher_argv(m: dict, system: dict, worker: list[str]) -> list[str]:
    """Full argv of measurement ``m`` on ``system``: launcher + ``worker`` (the worker's
    argv, starting with the interpreter)."""
    strategy = m.get("strategy", "single")
    launcher = system.get("launcher", "local")
    nodes, ppn = int(m.get("nodes", 1)), int(m.get("processes_per_node", 1))
    ranks = nodes * ppn
    if strategy == "single":
        if ranks != 1:
            raise LaunchError(f"strategy single runs one process, not {nodes} x {ppn}")
        return worker
    if launcher == "local" and nodes > 1:
        raise LaunchError(f"launcher local runs on one node, not {nodes}")
    cpus = cpus_per_process(m, system)
    if strategy == "horovod":
        if controller(m) == "gloo":
            if nodes > 1 or launcher == "srun":
                raise LaunchError("the Gloo controller is launched with horovodrun on one node; "
                                  "use the MPI controller for several nodes or srun")
            return [horovodrun(), "--gloo", "-np", str(ranks), "-H", f"localhost:{ranks}",
                    *worker]
        if launcher == "srun":
            # MPI ranks started by srun find each other through PMIx unless the system
            # names another plugin (SLURM_MPI_TYPE in its env, which srun reads)
            mpi = [] if "SLURM_MPI_TYPE" in {**os.environ, **(m.get("env") or {})} else ["--mpi=pmix"]
            return _srun(nodes, ranks, cpus, ppn) + mpi + worker
        argv = ["mpirun"]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        argv += ["-np", str(ranks)]
        if launcher == "local":
            argv += ["--oversubscribe", "--bind-to", "none"]
        else:
            argv += ["--map-by", f"ppr:{ppn}:node:PE={cpus}", "--bind-to", "core"]
        return argv + _mpirun_env(m) + worker
    if strategy in TF_STRATEGIES:
        ps = parameter_servers(m) if strategy == "parameter_server" else 0
        coordinator = 1 if strategy == "parameter_server" else 0
        if launcher == "srun":
            argv = _srun(nodes, ranks + ps + coordinator, cpus, None)
            if coordinator:  # chief and parameter servers share the workers' cores; the
                # servers never exit on their own: stop them once the chief is done
                argv += ["--overcommit", f"--wait={SERVER_GRACE_S}"]
            return argv + worker
        if nodes > 1:
            raise LaunchError(f"{strategy} on several nodes needs launcher srun "
                              "(the cluster comes from the Slurm job step)")
        at = worker.index(sys.executable) if sys.executable in worker else 0
        return (worker[:at + 1] + ["-m", "archbench.launch", "spawn", "--workers",
                                   str(ranks), "--ps", str(ps)]
                + (["--chief"] if coordinator else []) + ["--"] + worker[at + 1:])
    raise LaunchError(f"unknown strategy '{strategy}'")


def _srun(nodes: int, tasks: int, cpus: int, ppn: int | None) -> list[str]:
    argv = ["srun", f"--nodes={nodes}", f"--ntasks={tasks}", f"--cpus-per-task={cpus}",
            "--export=ALL", "--kill-on-bad-exit=1"]  # binding: the site's TaskPlugin defaults or SLURM_CPU_BIND
    if ppn is not None:
        argv.insert(3, f"--ntasks-per-node={ppn}")
    return argv


# ---------------------------------------------------------------- local spawner

def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (bound and released)."""
    sockets, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


def local_cluster(workers: int, ps: int = 0, chief: bool = False) -> dict[str, list[str]]:
    """A cluster spec of local tasks on free ports."""
    ports = iter(free_ports(workers + ps + int(chief)))
    cluster = {}
    if chief:
        cluster["chief"] = [f"127.0.0.1:{next(ports)}"]
    cluster["worker"] = [f"127.0.0.1:{next(ports)}" for _ in range(workers)]
    if ps:
        cluster["ps"] = [f"127.0.0.1:{next(ports)}" for _ in range(ps)]
    return cluster


def spawn(workers: int, ps: int, chief: bool, argv: list[str], grace_s: float = SERVER_GRACE_S) -> int:
    """Run one local process per task of a TF cluster (``sys.executable`` + ``argv``, each
    with its TF_CONFIG) and return the exit status.

    The run is over when the chief (parameter servers) or every worker (mirrored) has
    exited; remaining servers get SIGTERM. A main task failing stops all tasks.
    """
    cluster = local_cluster(workers, ps, chief)
    procs: dict[tuple[str, int], subprocess.Popen] = {}
    for task_type, addresses in cluster.items():
        for index in range(len(addresses)):
            env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": task_type, "index": index}})}
            procs[(task_type, index)] = subprocess.Popen([sys.executable, *argv], env=env)
    main_tasks = [k for k in procs if k[0] == ("chief" if chief else "worker")]
    code = 0

    def on_term(signum, _frame):  # the spawner is stopped (e.g. timeout): stop the tasks
        _stop([p for p in procs.values() if p.poll() is None], 2)
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        while True:
            done = {k: p.poll() for k, p in procs.items()}
            failed = [k for k, c in done.items() if c not in (None, 0)]
            if failed:
                code = done[failed[0]]
                print(f"archbench.launch: task {failed[0][0]}:{failed[0][1]} exited with "
                      f"{code}; stopping the others", file=sys.stderr, flush=True)
                break
            if all(done[k] == 0 for k in main_tasks):
                break
            time.sleep(0.2)
    finally:
        _stop([p for p in procs.values() if p.poll() is None], grace_s)
    return code if code >= 0 else 128 - code


def _stop(procs: list[subprocess.Popen], grace_s: float) -> None:
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``spawn`` starts a local TF cluster running ``sys.executable ARGS...``."""
    p = argparse.ArgumentParser(prog="python -m archbench.launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spawn", help="run a local TF cluster (TF_CONFIG per process)")
    s.add_argument("--workers", type=int, required=True)
    s.add_argument("--ps", type=int, default=0, help="parameter servers")
    s.add_argument("--chief", action="store_true", help="add a chief (the PS coordinator)")
    s.add_argument("args", nargs=argparse.REMAINDER, help="-- then the interpreter's arguments")
    args = p.parse_args(argv)
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    if args.workers < 1 or args.ps < 0 or not rest:
        p.error("need --workers >= 1, --ps >= 0 and the command after --")
    return spawn(args.workers, args.ps, args.chief, rest)


if __name__ == "__main__":
    sys.exit(main())
