"""Strategy ``horovod``: data parallelism with gradients averaged by allreduce (MPI or Gloo).

Launched by ``mpirun`` (launcher local|mpirun), ``srun`` (launcher srun), or
``horovodrun --gloo`` on one node for the Gloo controller (``tuning.horovod_controller``).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from archbench.workloads.srun import srun_argv
from archbench.workloads.tfcluster import LaunchError, process_rank
from archbench.workloads.tfenv import FRAMEWORK_ENV
from archbench.workloads.training.horovod_timeline import AllreduceCount, count_allreduces, settled_events
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.base import Backend, Launch, Strategy, unique

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


class HorovodBackend(Backend):
    """Horovod data parallelism: gradients averaged by allreduce (MPI or Gloo)."""

    def __init__(self, tf, config: TrainRun):
        super().__init__(tf, config)
        if config.horovod_cycle_time is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = f"{config.horovod_cycle_time:g}"
        if config.horovod_fusion_threshold is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(config.horovod_fusion_threshold)
        # a timeline that starts and stops on request (the allreduce count after the window)
        os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")
        import horovod.tensorflow as hvd
        hvd.init()
        self.allreduces: AllreduceCount | None = None
        # compiled, so the op (and the timeline) carries the name; eager ops lose it
        self._barrier = tf.function(lambda: hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name=BARRIER))
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._hosts = unique(hvd.allgather_object(socket.gethostname()))

    def layout(self) -> tuple[int, int]:
        if self.config.nodes is None and self.config.processes_per_node is None:
            return self.hvd.cross_size(), self.hvd.local_size()
        return super().layout()

    def gradients(self, tape, loss, variables):
        return self.hvd.DistributedGradientTape(tape).gradient(loss, variables)

    def start(self, model) -> None:
        self.hvd.broadcast_variables(model.variables, root_rank=0)

    def barrier(self) -> None:
        self._barrier()

    def gather(self, values):
        row = self.tf.constant([list(map(float, values))], dtype=self.tf.float64)
        return self.hvd.allgather(row).numpy().tolist()

    def hosts(self) -> list[str]:
        return self._hosts

    def window(self, step, batches, *, warmup, steps, batch_size, settle=lambda: None):
        measured = super().window(step, batches, warmup=warmup, steps=steps, batch_size=batch_size,
                                  settle=settle)
        self.allreduces = self._count_allreduces(step, batches)
        return measured

    def _count_allreduces(self, step, batches) -> AllreduceCount | None:
        """Allreduces of PROBE_STEPS more steps, from Horovod's timeline (recorded after the
        measured window; armed but off inside it, see scripts/bench_timeline_overhead.py).
        None off rank 0, when the user records a timeline of their own (HOROVOD_TIMELINE
        set to a file), or when the count fails: it never costs the measurement itself."""
        if os.environ.get("HOROVOD_TIMELINE") != "DYNAMIC":
            return None
        with tempfile.TemporaryDirectory(prefix="archbench-timeline-") as tmp:
            path = os.path.join(tmp, "timeline.json")
            try:  # fails on every rank alike (Horovod not set up for a dynamic timeline)
                self.hvd.start_timeline(path)
            except ValueError as exc:
                print(f"archbench: no allreduce count ({exc})", file=sys.stderr)
                return None
            self.barrier()  # the timeline is on in every rank's background loop
            for _ in range(PROBE_STEPS):
                float(step(*next(batches)))
            self.barrier()
            self.hvd.stop_timeline()
            if self.rank != 0:
                return None
            try:
                count = count_allreduces(settled_events(path), skip=BARRIER)
            except (OSError, ValueError, KeyError) as exc:  # an unreadable timeline
                print(f"archbench: no allreduce count ({exc!r})", file=sys.stderr)
                return None
        return AllreduceCount(count.tensors / PROBE_STEPS, count.collectives / PROBE_STEPS)

    def metrics(self, model) -> dict:
        variables = model.trainable_variables
        out = {
            "horovod_controller": {"value": "gloo" if self.hvd.gloo_enabled() else "mpi", "unit": ""},
            "allreduce_tensors": {"value": len(variables), "unit": "tensors/step"},
            "allreduce_bytes": {"value": int(sum(v.shape.num_elements() * v.dtype.size
                                                 for v in variables)), "unit": "B/step"},
        }
        if self.allreduces is not None:
            out["allreduces_per_step"] = {"value": self.allreduces.collectives, "unit": "allreduces/step"}
            out["allreduce_tensors_timeline"] = {"value": self.allreduces.tensors, "unit": "tensors/step"}
        if self.config.device == "gpu":  # GPU tensors go through NCCL when Horovod was built with it
            out["horovod_nccl"] = {"value": "built" if self.hvd.nccl_built() else "not built", "unit": ""}
        out.update(horovod_knobs(self.config.horovod_cycle_time, self.config.horovod_fusion_threshold))
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
    2-rank TensorFlow run waited 1.5-5.4 s on its dataset iterator's threads. It waits for
    no other rank: a rank may end before rank 0 has written the record, which is no loss,
    since mpirun (and so the supervisor, which reads the record only then) waits for every
    rank, and a rank that finalised MPI and exits 0 ends no other."""
    for name in ("horovod.tensorflow", "horovod.torch"):
        hvd = sys.modules.get(name)
        if hvd is not None and hvd.is_initialized():
            hvd.shutdown()


STRATEGY = Strategy(backend=HorovodBackend, launch=launch, launch_rank=process_rank,
                    help="Horovod allreduce (MPI or Gloo controller)", label="Horovod",
                    frameworks=("tensorflow", "pytorch"), finish=shut_down)
