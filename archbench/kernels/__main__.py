"""Run one HPC kernel on a cluster of TensorFlow workers and write one JSON record.

    python -m archbench.kernels matmul --size 4096 --tile-size 1024 --workers 2 --output run.json

Sizes: stream = fp64 elements per array per worker; stream_comm = message size in MB
(2**20 bytes); matmul, cg, fft = N. Locally the command spawns ``--workers`` - 1 worker
servers; under ``srun --ntasks=W`` every task runs this command and task 0 writes the
record. Without ``--output`` the record is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Sequence

from archbench import provenance
from archbench.kernels import KERNELS, STEPS, UNITS
from archbench.kernels.common import KernelResult
from archbench.record import make_record, write_record

EXIT_BENCHMARK_FAILED = 3  # a failure record was written
HELP = {"stream": "STREAM copy/scale/add/triad memory bandwidth (GB/s)",
        "stream_comm": "bandwidth of a vector pushed from task 0 to task 1 (MB/s)",
        "matmul": "tiled N x N fp32 matrix multiply (GFLOP/s)",
        "cg": "conjugate gradient, N x N fp64 SPD matrix in row blocks (GFLOP/s)",
        "fft": "1D complex128 FFT in interleaved tiles (GFLOP/s)"}
SIZE_HELP = {"stream": "fp64 elements per array per worker",
             "stream_comm": "message size in MB (2**20 bytes)"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command line: a subcommand per kernel with the common options."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workers", type=int, default=1, help="TensorFlow worker tasks (default 1)")
    common.add_argument("--threads", type=int, default=0,
                        help="intra-op threads per worker (0 = the node's CPUs shared by its workers)")
    common.add_argument("--warmup-steps", type=int, default=None, help="untimed repetitions first")
    common.add_argument("--steps", type=int, default=None, help="timed repetitions")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--cluster", choices=["auto", "local", "slurm"], default="auto",
                        help="auto = Slurm tasks inside a multi-task srun step, else local processes")
    common.add_argument("--output", default=None,
                        help="where to write the JSON record (default: print it)")
    ident = common.add_argument_group("record identity (the workflow's supervisor overrides these)")
    ident.add_argument("--experiment", default="adhoc")
    ident.add_argument("--system", default="local")
    ident.add_argument("--config-id", default=None)
    ident.add_argument("--repetition", type=int, default=0)

    p = argparse.ArgumentParser(prog="python -m archbench.kernels", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kernel", required=True, metavar="KERNEL")
    for kernel in KERNELS:
        k = sub.add_parser(kernel, parents=[common], help=HELP[kernel], description=HELP[kernel])
        k.add_argument("--size", type=int, required=True,
                       help=SIZE_HELP.get(kernel, "N (a power of two for matmul and fft)"))
        if kernel in ("matmul", "fft"):
            k.add_argument("--tile-size", type=int, default=None,
                           help="tile edge (matmul) or elements per tile (fft); a power of two <= N")
        if kernel in ("matmul", "fft"):
            k.add_argument("--verify", action="store_true",
                           help="compare with numpy and record max_relative_error (small N only)")
        if kernel == "matmul":
            k.add_argument("--reducers", type=int, default=1, help="workers accumulating C tiles")
            k.add_argument("--scratch", default=os.environ.get("ARCHBENCH_SCRATCH"),
                           help="directory for the tile files, readable by all workers "
                                "(default $ARCHBENCH_SCRATCH, else the system temp directory)")
        if kernel == "cg":
            k.add_argument("--iterations", type=int, default=500)
            k.add_argument("--tolerance", type=float, default=0.0,
                           help="stop once ||r|| <= tolerance * ||b|| (0 = run all iterations)")
    args = p.parse_args(argv)
    warmup, steps = STEPS[args.kernel]
    args.warmup_steps = warmup if args.warmup_steps is None else args.warmup_steps
    args.steps = steps if args.steps is None else args.steps
    return args


def run_kernel(args: argparse.Namespace, cluster) -> tuple[KernelResult, int | None]:
    """Run the kernel named by ``args.kernel``; return its result and the tile size used."""
    w, s = args.warmup_steps, args.steps
    if args.kernel == "stream":
        from archbench.kernels import stream
        return stream.run_memory(cluster, args.size, w, s, args.seed), None
    if args.kernel == "stream_comm":
        from archbench.kernels import stream
        return stream.run_comm(cluster, args.size, w, s, args.seed), None
    if args.kernel == "matmul":
        from archbench.kernels import matmul
        tile = args.tile_size or matmul.default_tile(args.size)
        return matmul.run(cluster, args.size, tile, args.reducers, w, s, args.scratch, args.seed,
                          args.verify), tile
    if args.kernel == "cg":
        from archbench.kernels import cg
        return cg.run(cluster, args.size, args.iterations, args.tolerance, w, s), None
    from archbench.kernels import fft
    tile = args.tile_size or fft.default_tile(args.size, args.workers)
    return fft.run(cluster, args.size, tile, w, s, args.seed, args.verify), tile


def base_fields(args: argparse.Namespace, cluster=None, tile: int | None = None) -> dict:
    """Record fields describing the configuration and where it ran."""
    from archbench.campaign import config_id
    conf = dict(kind="kernel", kernel=args.kernel, problem_size=args.size, tile_size=tile,
                workers=args.workers, nodes=cluster.nodes if cluster else 1,
                processes_per_node=cluster.processes_per_node if cluster else args.workers,
                strategy="workers", intra_threads=cluster.threads if cluster else args.threads)
    fields = {**provenance.host_fields(), **conf, "experiment": args.experiment,
              "system": args.system, "config_id": args.config_id or config_id(conf),
              "repetition": args.repetition, "framework": "tensorflow",
              "throughput_unit": UNITS[args.kernel], "warmup_steps": args.warmup_steps,
              "measured_steps": args.steps}
    if platform.machine() == "x86_64":  # on x86, matmul's dots run in oneDNN (through XLA)
        fields.update(vendor_library="onednn",
                      vendor_library_enabled=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0")
    if cluster:
        fields["hosts"] = sorted(set(cluster.hosts))
    return fields


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run, write the record; on an error write a failure record."""
    args = parse_args(argv)
    start = provenance.now()
    cluster = None
    from archbench.kernels import cluster as workers
    pump = workers.quiet_stderr() if args.workers > 1 else None
    try:
        cluster = workers.start(args.workers, args.threads, args.cluster)  # tasks > 0 never return
        import tensorflow as tf
        result, tile = run_kernel(args, cluster)
        record = make_record(**{
            **base_fields(args, cluster, tile), "framework_version": tf.__version__,
            "start_time": start, "end_time": provenance.now(),
            "step_times_s": result.step_times_s, "warmup_steps": result.warmup_steps,
            "measured_steps": result.measured_steps, "throughput": result.throughput,
            "metrics": result.metrics})
        code = 0
    except Exception as exc:  # noqa: BLE001 - any error becomes a failure record
        status = "oom" if type(exc).__name__ in ("ResourceExhaustedError", "MemoryError") else "failed"
        first_line = (str(exc).strip().splitlines() or [""])[0]
        reason = f"{type(exc).__name__}: {first_line}"[:500]
        record = make_record(**base_fields(args, cluster, getattr(args, "tile_size", None)),
                             start_time=start,
                             end_time=provenance.now(), status=status, reason=reason)
        print(f"archbench.kernels: {status}: {reason}", file=sys.stderr)
        code = EXIT_BENCHMARK_FAILED
    if args.output:
        write_record(args.output, record)
    else:
        print(json.dumps(record, indent=1, sort_keys=True))
    if record["status"] == "ok":
        print(f"{args.kernel} size={args.size} workers={args.workers}: "
              f"{record['throughput']:.3f} {record['throughput_unit']}", file=sys.stderr)
    if cluster is not None and cluster.mode != "inprocess":
        cluster.close()
        workers.flush_and_exit(code, pump)  # skip TF's remote-context teardown (workers are gone)
    return code


if __name__ == "__main__":
    sys.exit(main())
