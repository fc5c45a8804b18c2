"""HPC kernels on two TensorFlow workers (this process = worker 0, a spawned server =
worker 1): results equal numpy/scipy, ops really run in the worker process, and the Slurm
code path works with two emulated Slurm tasks."""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from test_kernels import job, stream_reference

from archbench.core.record import read_record
from archbench.workloads import gpu
from archbench.workloads.kernels.cli import EXIT_BENCHMARK_FAILED

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def two():
    """A two-worker local cluster (worker 1 is a separate server process)."""
    from archbench.workloads.kernels import cluster
    with cluster.start(2) as workers:
        yield workers


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_cluster_has_two_workers_in_two_processes(two):
    assert two.workers == 2 and two.mode == "local" and two.nodes == 1
    assert two.devices[1].startswith("/job:worker/replica:0/task:1")
    assert two.device == "cpu" and two.host_devices == two.devices
    assert len(two.procs) == 1 and two.procs[0].poll() is None


def test_local_workers_get_their_local_rank_and_the_nodes_gpus(monkeypatch):
    from archbench.workloads.kernels.cluster import _worker_env
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")  # worker 0 already took its GPU
    env = _worker_env(3, "2,3,4,5")
    assert env["ARCHBENCH_LOCAL_RANK"] == "3" and env["CUDA_VISIBLE_DEVICES"] == "2,3,4,5"
    assert gpu.visible_device_for(3, env["CUDA_VISIBLE_DEVICES"]) == "5"
    assert "CUDA_VISIBLE_DEVICES" not in _worker_env(1, None)  # none inherited: GPU = rank


def bindings(stderr: str) -> dict[int, str]:
    """local rank -> CUDA_VISIBLE_DEVICES from the binding lines of every rank."""
    lines = re.findall(r"^archbench\.workloads\.gpu: local rank (\d+) bound to CUDA_VISIBLE_DEVICES=(\S*)$",
                       stderr, re.MULTILINE)
    ranks = [int(rank) for rank, _ in lines]
    assert len(ranks) == len(set(ranks)), stderr[-2000:]  # distinct ranks, one line each
    return {int(rank): value for rank, value in lines}


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (this test's own workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_gpu_run_without_a_gpu_is_a_failure_record_and_every_worker_stops(tmp_path):
    """On this CPU-only machine a GPU kernel run (local mode, two workers) binds each
    worker to the GPU of its local rank, finds none, writes the failure record, exits
    EXIT_BENCHMARK_FAILED, and leaves no worker behind."""
    out, marker = tmp_path / "rec.json", f"ARCHBENCH_TEST_RUN={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-m", "archbench.kernels", "matmul", "--size", "64",
                           "--tile-size", "32", "--workers", "2", "--device", "gpu",
                           "--cluster", "local", "--output", str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == EXIT_BENCHMARK_FAILED, proc.stderr[-2000:]
    record = read_record(out)
    assert record["status"] == "failed" and gpu.NO_GPU in record["reason"]
    assert record["device"] == "gpu" and record["devices"] == [] and record["throughput"] is None
    assert (record["gpus_per_node"], record["gpus"]) == (2, 2)
    assert record["config_id"] == "matmul_n64_t32_w2_N1_gpu2"
    assert bindings(proc.stderr) == {0: "0", 1: "1"}  # worker 0 and the spawned worker 1
    assert "Traceback" not in proc.stderr
    assert processes_with(marker) == []


def test_ops_placed_on_worker_1_run_in_its_process(two, tmp_path):
    from archbench.workloads.kernels.matmul import TiledMatmul
    mm = TiledMatmul(two, 1024, 256, scratch=str(tmp_path))  # 64 tile products, 32 per worker
    mm.multiply()
    worker, client = cpu_seconds(two.procs[0].pid), cpu_seconds(os.getpid())
    for _ in range(3):
        mm.multiply()
    worker, client = cpu_seconds(two.procs[0].pid) - worker, cpu_seconds(os.getpid()) - client
    assert worker > 0.3 * client, (worker, client)  # worker 1 computed its half itself
    mm.cleanup()


def test_stream_memory_on_both_workers(two):
    from archbench.workloads.kernels.stream import OPS, StreamMemory
    stream = StreamMemory(two, 5_000, seed=7)
    assert "task:1" in stream.arrays[1][0].device
    start = stream.values()
    for _ in range(2):
        for name in OPS:
            stream.run_op(name)
    for worker in range(2):
        for got, want in zip(stream.values()[worker], stream_reference(start[worker], 2)):
            np.testing.assert_allclose(got, want, rtol=1e-13)
    assert stream.bytes_moved("triad") == 2 * 3 * 8 * 5_000


def test_stream_comm_adds_the_pushed_vector(two):
    from archbench.workloads.kernels.stream import StreamComm, run_comm
    comm = StreamComm(two, 1)
    assert "task:0" in comm.message.device and "task:1" in comm.received.device
    for _ in range(3):
        comm.push()
    np.testing.assert_allclose(comm.received.numpy(), 3 * comm.message.numpy(), rtol=1e-15)
    result = run_comm(two, job("stream_comm", "--size", 2, "--workers", 2, "--warmup-steps", 1,
                               "--steps", 2))
    assert result.throughput_unit == "MiB/s" and result.throughput > 0


SMALL = {"stream": ["--size", 4096], "stream_comm": ["--size", 1], "matmul": ["--size", 64, "--tile-size", 32],
         "cg": ["--size", 64, "--iterations", 5], "fft": ["--size", 256, "--tile-size", 64]}


@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_every_kernel_writes_a_record_that_makes_sense(two, kernel, tmp_path):
    """A real two-worker run's record reads back (its throughput is its work over its
    step times, archbench.workloads.sense); the same record 1% off is refused."""
    from archbench.core.record import RecordError, write_record
    from archbench.workloads import sense
    from archbench.workloads.kernels import KERNELS
    from archbench.workloads.kernels.cli import measured_record
    assert set(SMALL) == set(KERNELS)
    extra = ["--scratch", tmp_path] if kernel == "matmul" else []
    run = job(kernel, *SMALL[kernel], *extra, "--workers", 2, "--warmup-steps", 1, "--steps", 2)
    record = measured_record(run, two, KERNELS[kernel].run(two, run), start="t", framework_version="x")
    assert record["status"] == "ok" and KERNELS[kernel].work(record) > 0
    assert read_record(write_record(tmp_path / "rep0.json", record)) == record
    with pytest.raises(RecordError, match=r"^record: throughput: .* is not .*'s work over its step times"):
        sense.check({**record, "throughput": record["throughput"] * 1.01})


@pytest.mark.parametrize("reducers", [1, 2])
def test_matmul_two_workers_matches_numpy(two, reducers, tmp_path):
    from archbench.workloads.kernels.matmul import TiledMatmul
    mm = TiledMatmul(two, 256, 64, reducers=reducers, scratch=str(tmp_path))
    mm.multiply()
    a, b = mm.inputs()
    np.testing.assert_allclose(mm.result(), a @ b, rtol=1e-4, atol=1e-4)
    if reducers == 2:
        assert "task:1" in mm.c_tiles[0, 1].device
    mm.cleanup()


def test_cg_two_workers_matches_numpy_and_scipy(two):
    from scipy.sparse.linalg import cg as scipy_cg

    from archbench.workloads.kernels.cg import ConjugateGradient, rhs_numpy
    solver = ConjugateGradient(two, 201)  # uneven row blocks: 101 + 100
    assert "task:1" in solver.a[1].device and solver.rows == [(0, 101), (101, 201)]
    a, b = solver.matrix(), rhs_numpy(201)
    assert solver.solve(6) == 6  # few steps: CG amplifies rounding differences on this matrix
    x, _ = scipy_cg(a, b, rtol=0.0, atol=0.0, maxiter=6)
    np.testing.assert_allclose(solver.solution(), x, rtol=1e-9, atol=1e-9)
    solver.solve(500, tolerance=1e-12)
    np.testing.assert_allclose(solver.solution(), np.linalg.solve(a, b), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("n, tile", [(1 << 12, 1 << 8), (1 << 12, 1 << 11), (1 << 6, 1 << 6)])
def test_fft_two_workers_matches_numpy(two, n, tile):
    from archbench.workloads.kernels.fft import TiledFFT
    fft = TiledFFT(two, n, tile, seed=11)
    if n // tile >= 2:
        assert "task:1" in fft.stacks[1].device
    fft.transform()
    np.testing.assert_allclose(fft.result(), np.fft.fft(fft.input()), rtol=1e-10, atol=1e-9)


def test_fft_without_merge_collects_both_workers_tiles_on_worker_0(two):
    """merge 0: worker 0 ends up with every tile's spectrum, worker 0's tiles (0, 2, ...)
    first, then worker 1's (1, 3, ...)."""
    from archbench.workloads.kernels.fft import TiledFFT
    n, tile = 1 << 10, 1 << 7
    fft = TiledFFT(two, n, tile, seed=2, merge=False)
    fft.transform()
    x, tiles = fft.input(), n // tile
    order = [*range(0, tiles, 2), *range(1, tiles, 2)]
    expected = np.concatenate([np.fft.fft(x[m::tiles]) for m in order])
    np.testing.assert_allclose(fft.result(), expected, rtol=1e-10, atol=1e-9)


def free_base(count: int) -> int:
    """A port p such that p .. p + count - 1 are free on 127.0.0.1."""
    for _ in range(100):
        base = random.randint(30000, 60000)
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def test_slurm_tasks_form_the_cluster(tmp_path):
    """Two processes with the environment srun gives its tasks (one node, two tasks)."""
    out = tmp_path / "rec.json"
    base = free_base(3)
    env = {**os.environ, "SLURM_JOB_ID": "4242", "SLURM_STEP_NUM_TASKS": "2",
           "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "localhost",
           "SLURM_STEP_TASKS_PER_NODE": "2", "ARCHBENCH_PORT_BASE": str(base)}
    argv = [sys.executable, "-m", "archbench.kernels", "fft", "--size", "4096",
            "--tile-size", "512", "--workers", "2", "--verify", "--output", str(out)]
    tasks = [subprocess.Popen(argv, env={**env, "SLURM_PROCID": str(rank)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (1, 0)]
    results = [task.communicate(timeout=240) for task in tasks]
    assert [task.returncode for task in tasks] == [0, 0], results[1][1][-2000:]
    record = read_record(out)
    assert record["status"] == "ok" and record["workers"] == 2
    assert record["hosts"] == ["localhost"] and record["processes_per_node"] == 2
    assert record["metrics"]["max_relative_error"]["value"] < 1e-12
    assert record["slurm_job_id"] == "4242"
    assert record["devices"] == ["task0/CPU:0", "task1/CPU:0"]


def test_slurm_gpu_tasks_bind_by_slurm_localid_and_all_stop_without_a_gpu(tmp_path):
    """Under srun each task binds the GPU of its SLURM_LOCALID; task 1 finds none and tells
    task 0, which records the failure; both end at once (no start-up timeout)."""
    out = tmp_path / "rec.json"
    base = free_base(3)
    env = {**os.environ, "SLURM_JOB_ID": "4243", "SLURM_STEP_NUM_TASKS": "2",
           "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "localhost",
           "SLURM_STEP_TASKS_PER_NODE": "2", "ARCHBENCH_PORT_BASE": str(base),
           "CUDA_VISIBLE_DEVICES": "6,7"}  # the job's GPUs on the node
    argv = [sys.executable, "-m", "archbench.kernels", "cg", "--size", "64", "--workers", "2",
            "--device", "gpu", "--output", str(out)]
    tasks = [subprocess.Popen(argv, env={**env, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (1, 0)]
    results = [task.communicate(timeout=120) for task in tasks]
    assert [task.returncode for task in tasks] == [1, EXIT_BENCHMARK_FAILED], results[1][1][-2000:]
    assert bindings(results[0][1]) == {1: "7"} and bindings(results[1][1]) == {0: "6"}
    record = read_record(out)
    assert record["status"] == "failed" and gpu.NO_GPU in record["reason"]
    assert record["device"] == "gpu" and record["slurm_job_id"] == "4243"
