"""Run one HPC kernel on a cluster of TensorFlow workers and write one JSON record.

    python -m archbench.kernels matmul --size 4096 --tile-size 1024 --workers 2 --output run.json

One subcommand per registered kernel (``archbench.workloads.kernels.KERNELS``), with the common
options below and the kernel's own (``--size`` and its spec's options). Locally the
command spawns ``--workers`` - 1 worker servers; under ``srun --ntasks=W`` every task
runs this command and task 0 writes the record. Without ``--output`` the record is printed.

The record states the devices TensorFlow placed the measured step on (``devices``, from
the tensors the step produced on each worker). A ``--device gpu`` run whose workers see
no GPU, or whose step ran anywhere but on GPUs, is recorded as a failure with the reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
from types import MappingProxyType
from typing import Sequence

from archbench.core import provenance, storage
from archbench.core.failures import exception_failure
from archbench.core.fields import config_id
from archbench.core.marks import mark
from archbench.core.record import make_record, write_record
from archbench.workloads import gpu
from archbench.workloads.kernels import KERNELS
from archbench.workloads.kernels import cluster as workers
from archbench.workloads.kernels.common import KernelResult, KernelRun
from archbench.workloads.kernels.spec import KERNEL_STRATEGY

EXIT_BENCHMARK_FAILED = 3  # a failure record was written


def _common_options() -> argparse.ArgumentParser:
    """The options every kernel's subcommand takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workers", type=int, default=1, help="TensorFlow worker tasks (default 1)")
    common.add_argument("--threads", type=int, default=0,
                        help="intra-op threads per worker (0 = the node's CPUs shared by its workers)")
    common.add_argument("--warmup-steps", type=int, default=None,
                        help="untimed repetitions first (default: the kernel's)")
    common.add_argument("--steps", type=int, default=None, help="timed repetitions (default: the kernel's)")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--device", choices=list(gpu.DEVICES), default="cpu",
                        help="gpu: each worker on the GPU of its local rank, failing with "
                             f"'{gpu.NO_GPU}' when it has none; cpu hides every GPU")
    common.add_argument("--cluster", dest="cluster_mode", choices=["auto", "local", "slurm"],
                        default="auto",
                        help="auto = Slurm tasks inside a multi-task srun step, else local processes")
    common.add_argument("--output", default=None,
                        help="where to write the JSON record (default: print it)")
    ident = common.add_argument_group("record identity (the workflow's supervisor overrides these)")
    ident.add_argument("--experiment", default="adhoc")
    ident.add_argument("--system", default="local")
    ident.add_argument("--config-id", default=None)
    ident.add_argument("--repetition", type=int, default=0)
    return common


def parser() -> argparse.ArgumentParser:
    """The command line: a subcommand per registered kernel."""
    common = _common_options()
    p = argparse.ArgumentParser(prog="python -m archbench.kernels", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kernel", required=True, metavar="KERNEL")
    for spec in KERNELS.values():
        spec.add_options(sub.add_parser(spec.name, parents=[common], help=spec.help,
                                        description=spec.help))
    return p


def parse_args(argv: Sequence[str] | None = None) -> KernelRun:
    """The run the command line asks for; unset step counts take the kernel's defaults."""
    values = vars(parser().parse_args(argv))
    own = {f.name for f in dataclasses.fields(KernelRun)}
    run = {k: v for k, v in values.items() if k in own}
    warmup, steps = KERNELS[run["kernel"]].steps
    run["warmup_steps"] = warmup if run["warmup_steps"] is None else run["warmup_steps"]
    run["steps"] = steps if run["steps"] is None else run["steps"]
    options = MappingProxyType({k: v for k, v in values.items() if k not in own})
    for setting in KERNELS[run["kernel"]].settings:
        if run["device"] != "gpu" and options[setting.name] in setting.gpu_only:
            parser().error(f"{setting.flag} {options[setting.name]} needs --device gpu")
    return KernelRun(**run, options=options)


def base_fields(job: KernelRun, cluster: workers.Cluster | None = None, tile: int | None = None) -> dict:
    """Record fields describing the configuration and where it ran."""
    conf = dict(kind="kernel", kernel=job.kernel, problem_size=job.size, tile_size=tile,
                workers=job.workers, nodes=cluster.nodes if cluster else 1,
                processes_per_node=cluster.processes_per_node if cluster else job.workers,
                strategy=KERNEL_STRATEGY, intra_threads=cluster.threads if cluster else job.threads,
                device=job.device)
    if job.device == "gpu":  # one worker per GPU
        conf.update(gpus_per_node=conf["processes_per_node"], gpus=job.workers)
    fields = {**provenance.host_fields(job.device), **conf, "experiment": job.experiment,
               "system": job.system, "config_id": job.config_id or config_id(conf),
               "repetition": job.repetition, "framework": "tensorflow",
               "throughput_unit": KERNELS[job.kernel].unit, "warmup_steps": job.warmup_steps,
               "measured_steps": job.steps}
    if platform.machine() == "x86_64":  # on x86, matmul's dots run in oneDNN (through XLA)
        fields.update(vendor_library="onednn",
                       vendor_library_enabled=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0")
    if cluster:
        fields["hosts"] = sorted(set(cluster.hosts))
    return fields


def measured_record(job: KernelRun, cluster: workers.Cluster, result: KernelResult, *,
                    start: str, framework_version: str) -> dict:
    """The record of a finished run; a GPU run whose step TensorFlow placed anywhere but on
    GPUs (``gpu.device_mismatch``) is a failure with that reason and no throughput."""
    fields = {**base_fields(job, cluster, result.tile_size), "framework_version": framework_version,
              "start_time": start, "end_time": provenance.now(), "devices": result.devices,
              "warmup_steps": result.warmup_steps}
    mismatch = gpu.device_mismatch(job.device, result.devices) if job.device == "gpu" else ""
    if mismatch:
        return make_record(**fields, status="failed", reason=mismatch)
    return make_record(**{**fields, "step_times_s": result.step_times_s,
                          "measured_steps": result.measured_steps,
                          "throughput": result.throughput, "metrics": result.metrics})


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run, write the record; on an error write a failure record. A record
    the file system refuses is told in one line, exit status storage.EXIT_UNWRITABLE."""
    mark("worker-imported")
    job = parse_args(argv)
    node_gpus = os.environ.get("CUDA_VISIBLE_DEVICES")  # the node's, before binding our own
    gpu.bind_gpu(job.device)  # before TensorFlow loads
    start = provenance.now()
    cluster = None
    pump = workers.quiet_stderr() if job.workers > 1 else None
    try:
        # Slurm tasks other than 0 serve inside start() and never return
        cluster = workers.start(job.workers, threads=job.threads, mode=job.cluster_mode,
                                device=job.device, node_gpus=node_gpus)
        import tensorflow as tf
        mark("framework-imported")
        if job.device == "gpu":
            gpu.require_gpu(tf)  # fails with gpu.NO_GPU: a CPU never stands in for a GPU
        result = KERNELS[job.kernel].run(cluster, job)
        record = measured_record(job, cluster, result, start=start, framework_version=tf.__version__)
        code = 0 if record["status"] == "ok" else EXIT_BENCHMARK_FAILED
        if code:
            print(f"archbench.kernels: {record['status']}: {record['reason']}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - any error becomes a failure record
        status, reason = exception_failure(exc)
        record = make_record(**base_fields(job, cluster, job.tile_size), start_time=start,
                             end_time=provenance.now(), status=status, reason=reason)
        print(f"archbench.kernels: {status}: {reason}", file=sys.stderr)
        code = EXIT_BENCHMARK_FAILED
    mark("record-fields")
    if job.output:
        try:
            write_record(job.output, record)
        except storage.Unwritable as fault:  # one line, then the cluster's usual end
            storage.tell(str(fault))
            code = storage.EXIT_UNWRITABLE
    else:
        print(json.dumps(record, indent=1, sort_keys=True))
    mark("record-written")
    if code == 0:
        print(f"{job.kernel} size={job.size} workers={job.workers}: "
              f"{record['throughput']:.3f} {record['throughput_unit']}", file=sys.stderr)
    if cluster is not None and cluster.mode != "inprocess":
        cluster.close()
        workers.flush_and_exit(code, pump)  # skip TF's remote-context teardown (workers are gone)
    return code
