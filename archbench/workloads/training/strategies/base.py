"""What every training strategy is made of: a :class:`Backend` that the training loop of
``archbench.train`` drives in each process, and a launcher that starts the processes.

A *backend* hides the strategy from the training loop: it builds the compiled step, feeds
each worker its shard of the data, synchronises the workers at the edges of the measured
window and combines per-worker values. Throughput follows docs/metrics.md: images
processed by ALL workers in the window / the window's wall time, where the window starts
after a barrier and ends after a barrier, and its length is the maximum over workers.

The base class is one process without communication (strategy ``single``); the other
strategies override what they do differently.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from archbench.core.hardware import cpus_per_process
from archbench.core.marks import mark
from archbench.workloads import energy as energy_meters
from archbench.workloads.launch import LaunchError, local_rank
from archbench.workloads.training.settings import TrainRun


@dataclass(frozen=True, kw_only=True)
class Launch:
    """What a launcher needs to start a measurement's processes on a system."""

    worker: tuple[str, ...]  # one worker's argv, interpreter first
    launcher: str  # the system's launcher: local | mpirun | srun
    nodes: int
    processes_per_node: int
    cpus_per_process: int  # cores of a node // processes per node
    tuning: Mapping[str, Any]  # the measurement's ``tuning``
    parameter_servers: int  # the measurement's parameter-server tasks (0: none)
    env: Mapping[str, str]  # the measurement's ``env``
    variable_update: str | None = None  # the measurement's (strategy parameter_server)
    ps_nodes: int = 0  # nodes of the parameter servers' own (0: beside the workers)

    @classmethod
    def of(cls, measurement: dict, system: dict, worker: Sequence[str]) -> Launch:
        """The launch of ``measurement`` on ``system``, each process running ``worker``."""
        nodes, ppn = int(measurement.get("nodes", 1)), int(measurement.get("processes_per_node", 1))
        return cls(worker=tuple(worker), launcher=system.get("launcher", "local"), nodes=nodes,
                   processes_per_node=ppn, cpus_per_process=cpus_per_process(system, ppn),
                   tuning=measurement.get("tuning") or {},
                   parameter_servers=int(measurement.get("parameter_servers") or 0),
                   env={k: str(v) for k, v in (measurement.get("env") or {}).items()},
                   variable_update=measurement.get("variable_update"),
                   ps_nodes=ps_nodes(measurement))

    @property
    def ranks(self) -> int:
        """Training processes of the run: nodes x processes per node."""
        return self.nodes * self.processes_per_node

    def require_one_node_if_local(self) -> None:
        """LaunchError when the local launcher is asked for several nodes."""
        if self.launcher == "local" and self.nodes > 1:
            raise LaunchError(f"launcher local runs on one node, not {self.nodes}")


def ps_nodes(measurement: dict) -> int:
    """Nodes a measurement's parameter servers take beside its workers' nodes: one per
    parameter server with ``tuning.ps_placement: separate`` (CESGA 2018's PS node), else
    0 (beside the workers, CSCS 2017)."""
    if (measurement.get("tuning") or {}).get("ps_placement") != "separate":
        return 0
    return int(measurement.get("parameter_servers") or 0)


def unique(items: Sequence[str]) -> list[str]:
    """``items`` in order, each once."""
    return list(dict.fromkeys(items))


class Backend:
    """One process, no communication (strategy ``single``)."""

    compile_seconds: float | None = None  # the compiling first step's (see window)
    energy: list[dict] | None = None  # the window's energy entries (see window; record field)

    def __init__(self, module, config: TrainRun):
        self.module = module  # the framework's module (each framework's backends name it)
        self.config = config
        self.rank, self.size = 0, 1

    @property
    def is_writer(self) -> bool:
        """True for the one process that writes the record."""
        return self.rank == 0

    @property
    def workers(self) -> int:
        """Training workers (processes that compute gradients)."""
        return self.size

    def layout(self) -> tuple[int, int]:
        """(nodes, processes per node) of the run; ``--nodes``/``--processes-per-node`` win."""
        nodes = self.config.nodes or max(1, len(self.hosts()))
        ppn = self.config.processes_per_node or max(1, self.workers // nodes)
        if nodes * ppn != self.workers:
            raise LaunchError(f"{self.workers} workers started, but nodes x processes per node "
                              f"= {nodes} x {ppn}")
        return nodes, ppn

    def scope(self):
        """Context in which the model and optimizer are created."""
        return contextlib.nullcontext()

    def make_step(self, model, optimizer, loss_fn: Callable) -> Callable:
        """Compiled step(images, labels) -> loss: forward, backward, update."""
        raise NotImplementedError

    def device_batches(self, make_batch: Callable[[int], Any]) -> Iterator | None:
        """Iterator repeating ONE synthetic batch made on this process's GPU by
        ``make_batch(shard)`` -> (images, labels), so that no step copies data from the
        host; None where the strategy feeds only datasets (then :meth:`batches`)."""
        return None

    def step_devices(self, model) -> list[str]:
        """The devices the framework placed the measured step on, e.g. ["GPU:0"]."""
        raise NotImplementedError

    def batches(self, dataset_fn: Callable[[int, int], Any]) -> Iterator:
        """Iterator over this worker's batches; ``dataset_fn(shard, shards)`` -> an iterable
        of this shard's batches."""
        return iter(dataset_fn(self.rank, self.size))

    def start(self, model) -> None:
        """Called once the model exists, before the first step (e.g. broadcast weights)."""

    def barrier(self) -> None:
        """Return when every worker has reached this point."""

    def gather(self, values: Sequence[float]) -> list[list[float]]:
        """Every worker's ``values`` (same length everywhere), one row per worker."""
        return [list(map(float, values))]

    def hosts(self) -> list[str]:
        """Hosts of all workers, in rank order, each once."""
        return [socket.gethostname()]

    def window(self, step: Callable, batches: Iterator, *, warmup: int, steps: int,
               batch_size: int, settle: Callable[[], object] = lambda: None,
               compiles: bool = False) -> tuple[list[float], list[float], float, int]:
        """Warm-up, then the measured window between two barriers. ``settle`` (waiting for
        work beside the run to end) is called after the first warm-up step, which traces
        the step, or before the window when there is no warm-up: the other warm-up steps
        and the window run alone. ``compiles`` (graph compiled): ``settle`` first, then
        one step that compiles the step, timed alone as :attr:`compile_seconds`, before
        the warm-up (neither warm-up nor window).

        The sensors of :mod:`archbench.workloads.energy` are read just before the barrier
        that opens the window and just after the one that closes it; their sum over the
        workers is :attr:`energy`.

        Returns (this worker's step times, its losses, window wall time = max over
        workers, images processed by all workers in the window).
        """
        self.compile_seconds = None
        meter = energy_meters.Meter.open(self.config.device, rank=self.rank, local_rank=local_rank())
        if compiles:
            settle()
            settle = lambda: None  # noqa: E731 - waited for already
            start = time.perf_counter()
            float(step(*next(batches)))
            self.compile_seconds = time.perf_counter() - start
            mark("compiled")
        for done in range(warmup):
            float(step(*next(batches)))
            if done == 0:
                mark("first-step")
                settle()
        if not warmup:
            settle()
        meter.start()
        self.barrier()
        mark("warmup")
        times, losses = [], []
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            loss = step(*next(batches))
            losses.append(float(loss))
            times.append(time.perf_counter() - t0)
        self.last_loss = loss  # where the step ran (placement)
        self.barrier()
        wall = time.perf_counter() - start
        used = meter.stop()
        mark("window")
        rows = self.gather([wall, batch_size * steps, *used])
        self.energy = energy_meters.combine(meter, [r[2:] for r in rows])
        return times, losses, max(r[0] for r in rows), int(sum(r[1] for r in rows))

    def predictor(self, model) -> Callable:
        """images -> logits of ``model`` in inference mode, as numpy."""
        raise NotImplementedError

    def weights(self, model) -> list:
        """This worker's trainable weights as numpy arrays."""
        raise NotImplementedError

    def weight_spread(self, model) -> float | None:
        """Largest difference between workers of per-variable checksums (sum and sum of
        absolute values, in float64) of the trainable weights: 0 when replicas agree;
        None when there are no replicas to compare."""
        if self.workers < 2:
            return None
        sums = []
        for w in self.weights(model):
            w = np.asarray(w, dtype=np.float64)
            sums += [float(w.sum()), float(np.abs(w).sum())]
        rows = self.gather(sums)
        return max((max(col) - min(col) for col in zip(*rows)), default=0.0)

    def metrics(self, model) -> dict:
        """Strategy-specific record metrics."""
        return {}

    def peak_memory(self) -> int | None:
        """This process's peak memory in bytes so far: its peak resident set on a CPU
        (``ru_maxrss``, the framework's import and the model's build included); None on a
        GPU, where a framework that reads its allocator's peak says so itself."""
        if self.config.device == "gpu":
            return None
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def rank_zero() -> int:
    """The launch rank of a one-process run."""
    return 0


def every_process_trains(config: TrainRun) -> bool:
    """Every process of the strategy trains (none only serves)."""
    return True


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """A registered training strategy: how its processes train and how they are started.

    The strategy holds what every framework shares; each framework holds its own
    :class:`Backend` of the strategy (its registry entry's ``backends``, whose keys say
    which frameworks run it). ``launch(plan)`` is the full argv that starts all processes of a :class:`Launch`
    (launcher + worker argv); ``launch_rank()`` is this process's rank as its launcher set
    it, before any framework initialises (0 = the process that writes the record);
    ``parameter_servers``: the run has parameter-server tasks (``--parameter-servers``);
    ``variable_updates``: the ``--variable-update`` values it takes, the first the default;
    ``cpu_only_updates``: those of them that do not run on GPUs;
    ``multi_process``: the strategy runs several processes (experiments may sweep it);
    ``trains(config)``: False for a process that only serves (a parameter server, a
    coordinator), known before its framework starts: in a GPU run it gets no GPU;
    ``label``: its name in figure legends and titles ("" = the registry name);
    ``finish``: what a
    process of a multi-process run that succeeded does before it ends without the
    framework's teardown (None: it ends as usual).
    """

    launch: Callable[[Launch], list[str]]
    help: str
    launch_rank: Callable[[], int] = rank_zero
    parameter_servers: bool = False
    variable_updates: tuple[str, ...] = ()
    cpu_only_updates: tuple[str, ...] = ()
    multi_process: bool = True
    trains: Callable[[TrainRun], bool] = every_process_trains
    label: str = ""
    finish: Callable[[], None] | None = None
