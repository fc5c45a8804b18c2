"""The local TF-cluster spawner: one process per task of a TF cluster on free 127.0.0.1
ports, each with its TF_CONFIG, for the tf.distribute strategies on one node::

    python -m archbench.workloads.spawn spawn --workers 2 --ps 1 --chief -- -m archbench.train ...

The parameter servers and workers of a ParameterServer run serve until the chief is done,
then the spawner stops them. On a Slurm system, srun starts the tasks instead and each
finds the cluster from the job step (``archbench.workloads.training.tensorflow.cluster``); the launcher argv of every
strategy is built in ``archbench.workloads.training.strategies``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Sequence

from archbench.core.net import free_ports

SERVER_GRACE_S = 10  # servers left after the chief finished are stopped after this


def spawn_argv(worker: Sequence[str], *, workers: int, ps: int = 0, chief: bool = False) -> list[str]:
    """argv running ``worker`` (interpreter first) as every task of a local TF cluster;
    the interpreter stays the first ``sys.executable`` (containers are inserted there)."""
    worker = list(worker)
    at = worker.index(sys.executable) if sys.executable in worker else 0
    return (worker[:at + 1] + ["-m", "archbench.workloads.spawn", "spawn", "--workers", str(workers),
                               "--ps", str(ps)]
            + (["--chief"] if chief else []) + ["--"] + worker[at + 1:])


def local_cluster(workers: int, *, ps: int = 0, chief: bool = False) -> dict[str, list[str]]:
    """A cluster spec of local tasks on free ports."""
    ports = iter(free_ports(workers + ps + int(chief)))
    cluster = {}
    if chief:
        cluster["chief"] = [f"127.0.0.1:{next(ports)}"]
    cluster["worker"] = [f"127.0.0.1:{next(ports)}" for _ in range(workers)]
    if ps:
        cluster["ps"] = [f"127.0.0.1:{next(ports)}" for _ in range(ps)]
    return cluster


def spawn(argv: list[str], *, workers: int, ps: int = 0, chief: bool = False,
          grace_s: float = SERVER_GRACE_S) -> int:
    """Run one local process per task of a TF cluster (``sys.executable`` + ``argv``, each
    with its TF_CONFIG) and return the exit status.

    The run is over when the chief (parameter servers) or every worker (mirrored) has
    exited; remaining servers get SIGTERM. A main task failing stops all tasks.
    """
    cluster = local_cluster(workers, ps=ps, chief=chief)
    procs: dict[tuple[str, int], subprocess.Popen] = {}
    for task_type, addresses in cluster.items():
        for index in range(len(addresses)):
            # the rest of the environment (FRAMEWORK_ENV included) is the spawner's
            env = {**os.environ, "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": task_type, "index": index}}),
                   "ARCHBENCH_LOCAL_RANK": str(len(procs))}  # its GPU (archbench.workloads.gpu)
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
                print(f"archbench.workloads.spawn: task {failed[0][0]}:{failed[0][1]} exited with "
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
    p = argparse.ArgumentParser(prog="python -m archbench.workloads.spawn", description=__doc__,
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
    return spawn(rest, workers=args.workers, ps=args.ps, chief=args.chief)


if __name__ == "__main__":
    sys.exit(main())
