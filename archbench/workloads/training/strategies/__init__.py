"""Training strategies: each is one module holding what every framework shares of it (its
launcher, its launch rank, its label, whether it runs several processes and has parameter
servers), and one line of :data:`STRATEGIES`. The backend a process of the strategy
builds belongs to each framework (its registry entry's ``backends``, whose keys say which
frameworks run the strategy: :mod:`archbench.workloads.training.frameworks`).

* ``single``: one process.
* ``horovod``: allreduce under mpirun, srun or horovodrun --gloo.
* ``ddp``: DistributedDataParallel under mpirun or srun.
* ``fsdp2``: PyTorch's fully sharded data parallelism (``fully_shard``), launched as ddp.
* ``mirrored``: tf.distribute over a TF cluster started by srun or, on one node, by
  ``python -m archbench.workloads.spawn spawn``; ``parameter_server`` likewise, with its variable
  update (synchronous parameter_server or distributed_replicated in TF's v1 distributed
  runtime, or ps_async, tf.distribute's ParameterServerStrategy).

To add a strategy, write ``archbench/workloads/training/strategies/<name>.py`` defining ``STRATEGY =
Strategy(launch=..., ...)`` (see :class:`~archbench.workloads.training.strategies.base.Strategy`)
and register it below, then add its backend to each framework that runs it. Every list of strategy names reads this registry when it is
needed: the ``--strategy`` choices of ``archbench.train``, the experiment schema's strategy
and variable-update names, the names a record may carry (``archbench.workloads.names``), the
importer's choices and the figures' labels (``Strategy.label``).
"""

from __future__ import annotations

from archbench.workloads.launch import LaunchError
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies import ddp, fsdp2, horovod, mirrored, parameter_server, single
from archbench.workloads.training.strategies.base import Backend, Launch, Strategy

STRATEGIES: dict[str, Strategy] = {
    "single": single.STRATEGY,
    "horovod": horovod.STRATEGY,
    "mirrored": mirrored.STRATEGY,
    "parameter_server": parameter_server.STRATEGY,
    "ddp": ddp.STRATEGY,
    "fsdp2": fsdp2.STRATEGY,
}

__all__ = ["STRATEGIES", "Backend", "Launch", "Strategy", "check", "label", "launch_rank",
           "launcher_argv", "multi_process", "process_device", "strategy",
           "update_strategies"]


def strategy(name: str) -> Strategy:
    """The registered strategy ``name``; LaunchError naming the known ones otherwise."""
    if name not in STRATEGIES:
        raise LaunchError(f"unknown strategy '{name}' (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[name]


def multi_process() -> list[str]:
    """The registered strategies that run several processes (experiments may sweep them)."""
    return [name for name, s in STRATEGIES.items() if s.multi_process]


def update_strategies() -> dict[str, str]:
    """Every registered variable update -> the strategy that runs it."""
    return {update: name for name, s in STRATEGIES.items() for update in s.variable_updates}


def label(name: str) -> str:
    """The name a reader sees for strategy ``name``: its ``label``, else ``name`` itself
    (an unregistered name too, e.g. an imported row's)."""
    chosen = STRATEGIES.get(name)
    return chosen.label if chosen is not None and chosen.label else name


def check(config: TrainRun) -> None:
    """ValueError when ``config`` lacks what its strategy needs."""
    chosen = strategy(config.strategy)
    if chosen.parameter_servers and config.parameter_servers < 1:
        raise ValueError(f"--strategy {config.strategy} needs --parameter-servers >= 1")
    workers = (config.nodes or 0) * (config.processes_per_node or 0)
    if chosen.parameter_servers and workers and config.parameter_servers > workers:
        raise ValueError(f"--parameter-servers {config.parameter_servers} is above the "
                         f"{workers} workers (--nodes x --processes-per-node)")
    if config.variable_update is not None and config.variable_update not in chosen.variable_updates:
        raise ValueError(f"--variable-update {config.variable_update} is not one of strategy "
                         f"{config.strategy}'s ({', '.join(chosen.variable_updates) or 'none'})")


def process_device(config: TrainRun) -> str:
    """The device this process binds before its framework starts: the run's, except "cpu" for
    a process of a GPU run that only serves (a parameter server)."""
    if config.device == "gpu" and not strategy(config.strategy).trains(config):
        return "cpu"
    return config.device


def launch_rank(name: str) -> int:
    """This process's rank under strategy ``name`` as its launcher set it, before any
    framework initialises: 0 for the process that writes the record."""
    return strategy(name).launch_rank()


def launcher_argv(measurement: dict, system: dict, worker: list[str]) -> list[str]:
    """Full argv of ``measurement`` on ``system``: its strategy's launcher + ``worker`` (one
    worker's argv, starting with the interpreter)."""
    plan = Launch.of(measurement, system, worker)
    return strategy(measurement.get("strategy", "single")).launch(plan)
