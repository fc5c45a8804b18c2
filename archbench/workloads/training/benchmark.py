"""Training benchmark, like tf_cnn_benchmarks and Horovod's synthetic benchmarks: one
training step timed over a measured window after warm-up, written as one JSON record, in
the framework the run names (:mod:`archbench.workloads.training.frameworks`).

    python -m archbench.train --framework NAME --model resnet50 --batch-per-process 64 --intra-threads 24 \
        --inter-threads 1 --onednn on --data synthetic --warmup-steps 10 --steps 100 \
        --image-size 224 --output run.json

Multi-process runs start one such process per worker (``--strategy horovod`` under
mpirun/srun/horovodrun; ``ddp``, DistributedDataParallel, under mpirun/srun;
``mirrored`` and ``parameter_server`` (tf.distribute) -- the latter's ``--variable-update``
parameter_server, distributed_replicated or ps_async -- under srun or
``python -m archbench.workloads.spawn spawn``); the first worker writes ONE record for the
whole job. ``command_for`` gives the full launcher argv of a measurement.

Throughput follows docs/metrics.md: images processed by ALL workers in the measured window
divided by the window's wall time (warm-up excluded; the window is bounded by barriers
and its length is the longest of the workers').
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from archbench.core import fields, provenance, storage
from archbench.core.failures import exception_failure
from archbench.core.marks import mark
from archbench.core.record import write_record
from archbench.workloads import gpu
from archbench.workloads.training import frameworks, matrix, settings, strategies
from archbench.workloads.training.datasets import batch_beyond_data
from archbench.workloads.training.models import spec as model_spec
from archbench.workloads.training.outcome import base_fields, failure_record, release_held
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies.horovod import horovod_knobs
from archbench.workloads.training.vendor_evidence import reuse

EXIT_BENCHMARK_FAILED = 3  # a failure record was written
__all__ = ["EXIT_BENCHMARK_FAILED", "base_fields", "check", "command_for", "evidence_argv", "main",
           "parse_args", "parser", "probe_key", "remember_evidence", "run", "setting_metrics",
           "train_and_record", "worker_argv"]


def parser() -> argparse.ArgumentParser:
    """The command line: one option per training setting (:mod:`archbench.workloads.training.settings`),
    the registries naming the frameworks, the strategies and their variable updates."""
    p = argparse.ArgumentParser(prog="python -m archbench.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    updates = ", ".join(strategies.strategy("parameter_server").variable_updates)
    settings.add_arguments(p, registered={
        "framework": dict(choices=list(frameworks.FRAMEWORKS),
                          help="; ".join(f"{name}: {f.help}" for name, f in frameworks.FRAMEWORKS.items())),
        "strategy": dict(choices=list(strategies.STRATEGIES),
                         help="; ".join(f"{name}: {s.help}" for name, s in strategies.STRATEGIES.items())),
        "variable_update": dict(help=f"how strategy parameter_server updates variables: {updates} "
                                     "(default: the first)")})
    return p


def check(config: TrainRun) -> None:
    """ValueError when ``config`` asks its framework or strategy for what it does not have."""
    gap = matrix.outside_matrix(config.framework, strategy=config.strategy,
                                variable_update=config.variable_update, device=config.device)
    if gap:  # the option at fault: a strategy the framework lacks names the framework
        key = gap[0] if gap[0] in ("variable_update", "device") else "framework"
        raise ValueError(f"--{key.replace('_', '-')} {getattr(config, key)}: {gap[1]}")
    why = matrix.lacks(config.framework, model=config.model, strategy=config.strategy,
                           variable_update=config.variable_update, device=config.device,
                           values={name: getattr(config, name)
                                   for name in (*fields.NUMERICS, "onednn")})
    if why:
        raise ValueError(f"--framework {config.framework}: {why}")
    for key in tuning_refused(config):
        takers = frameworks.taking(key)
        raise ValueError(f"--{key.replace('_', '-')} is a setting of framework "
                         f"{', '.join(takers)} only, not of {config.framework}")
    strategies.check(config)
    if config.data == "real":
        processes = (config.nodes or 1) * (config.processes_per_node or 1)
        why = batch_beyond_data(model_spec(config.model).dataset, config.batch_per_process, processes)
        if why:
            raise ValueError(f"--batch-per-process {why}")


def tuning_refused(config: TrainRun) -> list[str]:
    """The tuning keys ``config`` sets that only other frameworks take (each framework's
    ``tuning`` in the registry)."""
    mine = frameworks.framework(config.framework).tuning
    keys = {key for chosen in frameworks.FRAMEWORKS.values() for key in chosen.tuning}
    return [key for key in sorted(keys - set(mine)) if getattr(config, key, None) is not None]


def parse_args(argv: Sequence[str] | None = None) -> TrainRun:
    """The training run the command line asks for (model defaults filled in); a bad option
    ends the program with one argparse error line."""
    p = parser()
    try:
        config = TrainRun.from_args(p.parse_args(argv))
        check(config)
    except ValueError as exc:
        p.error(str(exc))
    return config


def run(config: TrainRun) -> dict | None:
    """Train ``config`` in its framework: the record on the writing worker, None elsewhere."""
    return frameworks.framework(config.framework).run(config)


def worker_argv(measurement: dict, system: dict) -> list[str]:
    """argv of one worker process of ``measurement`` (interpreter first, no launcher): its
    planned settings, and the system's data directory for real data."""
    argv = [sys.executable, "-m", "archbench.train", *settings.planned_argv(measurement)]
    if measurement["data"] == "real" and system.get("data_dir"):
        argv += ["--data-dir", system["data_dir"]]
    return argv


def setting_metrics(measurement: dict) -> dict:
    """The settings a run of ``measurement`` is given that its record keeps as metrics (a
    failure record too, so a setting that only failed is still named in its table)."""
    tuning = measurement.get("tuning") or {}
    return horovod_knobs(tuning.get("horovod_cycle_time_ms"), tuning.get("horovod_fusion_threshold_bytes"))


def probe_key(measurement: dict, env: dict) -> str:
    """The name under which the runs of ``measurement``'s system find the last record that
    probed as its run will (its planned probe settings, the environment ``env`` its
    worker gets)."""
    return reuse.probe_key(settings.planned_argv(measurement, probe=True), env,
                           measurement.get("intra_threads"))


def evidence_argv(measurement: dict, output: str | os.PathLike, config_hash: str, *,
                  env: dict) -> list[str]:
    """``--vendor-evidence-from RECORD`` for a CPU run when a record holds evidence its own
    probe gathered, probing as this run will: another repetition of the configuration
    hashed ``config_hash`` beside ``output``
    (:func:`~archbench.workloads.training.vendor_evidence.reuse.earlier_record`), else the last
    such run of the system (:func:`~archbench.workloads.training.vendor_evidence.reuse.indexed_record`).
    The worker states it instead of probing where it holds for the run. Empty otherwise."""
    if measurement.get("device") == "gpu":
        return []
    earlier = (reuse.earlier_record(output, config_hash)
               or reuse.indexed_record(output, probe_key(measurement, env)))
    return ["--vendor-evidence-from", str(earlier)] if earlier else []


def remember_evidence(measurement: dict, output: str | os.PathLike, record: dict, *,
                      env: dict) -> None:
    """Name record ``output`` to the later runs of its system that probe as it did, if its
    own probe gave evidence (:func:`~archbench.workloads.training.vendor_evidence.reuse.remember`)."""
    if measurement.get("device") != "gpu":
        reuse.remember(output, probe_key(measurement, env), record)


def command_for(measurement: dict, system: dict) -> list[str]:
    """Full argv that runs ``measurement`` on ``system``, launcher included (mpirun, srun,
    horovodrun or the local TF-cluster spawner for multi-process strategies); the
    supervisor appends ``--output PATH``."""
    if measurement.get("best_of") or "tune_round" in measurement:
        raise ValueError(f"measurement {measurement.get('config_id')} is a placeholder (a `best` "
                         "layout or a tuner's trial); the workflow resolves it first "
                         "(archbench.plan.placeholders)")
    return strategies.launcher_argv(measurement, system, worker_argv(measurement, system))


def main(argv: Sequence[str] | None = None, *, exit_at_once: bool = False) -> int:
    """CLI entry point: run, write the record; on OOM or error the writing worker writes a
    failure record (other workers only report the error and exit non-zero). A record the
    file system refuses raises storage.Unwritable. ``exit_at_once`` (the command line): a
    one-process run ends its process once its streams are flushed, without the framework's
    teardown (1-3 s, and nothing in it is the run's); so does each process of a
    multi-process run that succeeded where its strategy says how to finish first (Horovod:
    shut down); the others exit as usual."""
    mark("worker-imported")
    config = parse_args(argv)
    code = train_and_record(config)
    strategy = strategies.strategy(config.strategy)
    if exit_at_once and (not strategy.multi_process or (strategy.finish and code == 0)):
        if strategy.multi_process:
            strategy.finish()
        mark("ending-at-once")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    release_held()
    return code


def train_and_record(config: TrainRun) -> int:
    """Run ``config`` and write its record (a failure record on the writing worker when it
    fails); the exit status."""
    start = provenance.now()
    writer = strategies.launch_rank(config.strategy) == 0
    try:
        record = run(config)
    except Exception as exc:  # noqa: BLE001 - any framework error becomes a failure record
        status, summary = exception_failure(exc)  # MemoryError, ResourceExhaustedError: oom
        if not isinstance(exc, (MemoryError, gpu.NoGPUError, gpu.DevicePlacementError)):
            traceback.print_exc(file=sys.stderr)
        if writer:
            write_record(config.output, failure_record(config, status=status, reason=summary,
                                                       start=start,
                                                       devices=getattr(exc, "devices", ())))
        print(f"archbench.train: {status}: {summary}", file=sys.stderr)
        return EXIT_BENCHMARK_FAILED
    if record is None:
        return 0
    write_record(config.output, record)
    mark("record-written")
    trend = {True: "decreasing", False: "NOT decreasing", None: "n/a"}[record["loss_decreased"]]
    print(f"{record['model']}: {record['throughput']:.2f} {record['throughput_unit']}, {record['strategy']} x "
          f"{record['workers']} (loss {record['loss_first']} -> {record['loss_last']}, {trend})")
    return 0


if __name__ == "__main__":  # a record the disk refuses: one line, exit 73
    sys.exit(storage.exit_status(lambda: main(exit_at_once=True)))
