"""HPC kernels in TensorFlow: single-worker correctness against numpy/scipy, the kernel
registry, the kernel experiment type, the schema, command_for, and the CLI writing valid
records."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from archbench.core.record import read_record
from archbench.plan.campaign import ConfigError, load_campaign
from archbench.workloads.kernels import KERNELS, command_for
from archbench.workloads.kernels.cli import parse_args
from archbench.workloads.kernels.common import KernelResult, KernelRun, split
from archbench.workloads.kernels.spec import FLOP_RATE, KernelSpec, Setting

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def one():
    """A one-worker cluster: the kernels run in this process."""
    from archbench.workloads.kernels import cluster
    return cluster.start(1)


def job(*argv: object) -> KernelRun:
    """The KernelRun of a command line (``python -m archbench.kernels *argv``)."""
    return parse_args([str(a) for a in argv])


def stream_reference(arrays, iterations, s=3.0):
    """The STREAM sequence in numpy."""
    a, b, c = (x.copy() for x in arrays)
    for _ in range(iterations):
        c[:] = a
        b[:] = s * c
        c[:] = a + b
        a[:] = b + s * c
    return a, b, c


def test_stream_memory_matches_numpy(one):
    from archbench.workloads.kernels.stream import OPS, StreamMemory
    stream = StreamMemory(one, 10_000, seed=3)
    start = stream.values()[0]
    for _ in range(3):
        for name in OPS:
            stream.run_op(name)
    for got, want in zip(stream.values()[0], stream_reference(start, 3)):
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_stream_memory_result_and_units(one):
    from archbench.workloads.kernels.stream import run_memory
    result = run_memory(one, job("stream", "--size", 1 << 16, "--warmup-steps", 1, "--steps", 2))
    assert result.throughput_unit == "GB/s" and result.throughput > 0
    assert set(result.metrics) >= {"copy", "scale", "add", "triad"}
    assert result.metrics["triad"]["value"] == result.throughput
    assert len(result.step_times_s) == 2


def test_stream_memory_records_where_it_computed(one):
    from archbench.workloads.kernels.stream import StreamMemory
    stream = StreamMemory(one, 1_000)
    stream.run_op("triad")
    assert stream.devices == ["CPU:0"]
    with pytest.raises(ValueError, match="needs a GPU run"):
        StreamMemory(one, 1_000, memory="host")


def test_stream_host_memory_reads_and_writes_back_every_operation(one):
    """memory host: arrays in host memory, each operation computed on the compute device
    and written back. Here the "compute device" is the CPU as well (this machine has no
    GPU): the numbers must equal numpy's, and the placement says CPU, which a GPU run
    turns into a failure (see test_cli_gpu_run_placed_on_cpus_is_a_failure)."""
    from archbench.workloads.kernels.cluster import Cluster
    from archbench.workloads.kernels.stream import OPS, StreamMemory
    pretend = Cluster(workers=1, devices=one.devices, host_devices=one.host_devices,
                      hosts=one.hosts, mode="inprocess", threads=one.threads, device="gpu")
    stream = StreamMemory(pretend, 10_000, seed=5, memory="host")
    start = stream.values()[0]
    for _ in range(2):
        for name in OPS:
            stream.run_op(name)
    for got, want in zip(stream.values()[0], stream_reference(start, 2)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    assert stream.devices == ["CPU:0"]


def test_kernels_record_the_devices_their_step_ran_on(one, tmp_path):
    from archbench.workloads.kernels import cg, fft, matmul
    for result in (matmul.run(one, job("matmul", "--size", 64, "--tile-size", 32, "--steps", 1,
                                       "--scratch", tmp_path)),
                   cg.run(one, job("cg", "--size", 64, "--iterations", 3)),
                   fft.run(one, job("fft", "--size", 256, "--tile-size", 64, "--steps", 1))):
        assert result.devices == ["CPU:0"]


def test_stream_comm_needs_two_workers(one):
    from archbench.workloads.kernels.stream import StreamComm
    with pytest.raises(ValueError, match="two workers"):
        StreamComm(one, 2)


@pytest.mark.parametrize("n, tile", [(256, 64), (128, 128)])
def test_matmul_matches_numpy(one, n, tile, tmp_path):
    from archbench.workloads.kernels.matmul import TiledMatmul
    mm = TiledMatmul(one, n, tile, scratch=str(tmp_path))
    mm.multiply()
    mm.multiply()  # repeated multiplies overwrite C, never accumulate into it
    a, b = mm.inputs()
    assert a.dtype == np.float32 and a.shape == (n, n) and not np.allclose(a, b)
    np.testing.assert_allclose(mm.result(), a @ b, rtol=1e-4, atol=1e-4)
    mm.cleanup()
    assert not mm.dir.exists()


def test_matmul_loads_tiles_from_disk_in_every_multiply(one, tmp_path):
    """The timed multiply reads its tiles from their files each time (nothing cached or
    folded into the graph): a tile rewritten between multiplies changes C."""
    import tensorflow as tf

    from archbench.workloads.kernels.matmul import TILE, TiledMatmul
    mm = TiledMatmul(one, 128, 64, scratch=str(tmp_path))
    mm.multiply()
    a, b = mm.inputs()
    tf.raw_ops.SaveV2(prefix=mm.path("A", 1, 0), tensor_names=[TILE], shape_and_slices=[""],
                      tensors=[tf.constant(-3 * a[64:, :64])])
    mm.multiply()
    a[64:, :64] *= -3
    np.testing.assert_allclose(mm.inputs()[0], a)
    np.testing.assert_allclose(mm.result(), a @ b, rtol=1e-4, atol=1e-4)
    mm.cleanup()


def test_matmul_run_reports_gflops_and_cleans_up(one, tmp_path):
    from archbench.workloads.kernels import matmul
    result = matmul.run(one, job("matmul", "--size", 128, "--tile-size", 64, "--warmup-steps", 1,
                                 "--steps", 1, "--scratch", tmp_path, "--verify"))
    assert result.throughput_unit == "GFLOP/s" and result.throughput > 0
    assert result.metrics["max_relative_error"]["value"] < 1e-5
    assert result.metrics["tile_products"]["value"] == 8 and result.tile_size == 64
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("n, tile", [(100, 64), (256, 512), (255, 64)])
def test_matmul_rejects_bad_sizes(one, n, tile):
    from archbench.workloads.kernels.matmul import TiledMatmul
    with pytest.raises(ValueError, match="powers of two"):
        TiledMatmul(one, n, tile)


def test_cg_matrix_is_spd_and_matches_numpy_definition(one):
    from archbench.workloads.kernels.cg import ConjugateGradient, matrix_numpy
    solver = ConjugateGradient(one, 96)
    a = solver.matrix()
    np.testing.assert_allclose(a, matrix_numpy(96), rtol=1e-14)
    np.testing.assert_array_equal(a, a.T)
    assert np.linalg.eigvalsh(a).min() > 0


def test_cg_converges_to_numpy_solution(one):
    from archbench.workloads.kernels.cg import ConjugateGradient, rhs_numpy
    solver = ConjugateGradient(one, 200)
    iterations = solver.solve(500, tolerance=1e-12)
    assert iterations < 500  # stopped by the tolerance
    x = np.linalg.solve(solver.matrix(), rhs_numpy(200))
    np.testing.assert_allclose(solver.solution(), x, rtol=1e-8, atol=1e-8)
    assert solver.residual() <= 1e-11


def test_cg_fixed_iterations_match_scipy(one):
    from scipy.sparse.linalg import cg as scipy_cg

    from archbench.workloads.kernels.cg import ConjugateGradient, rhs_numpy
    solver = ConjugateGradient(one, 300)
    assert solver.solve(6) == 6  # CG trajectories on this matrix amplify rounding: few steps
    x, _ = scipy_cg(solver.matrix(), rhs_numpy(300), rtol=0.0, atol=0.0, maxiter=6)
    np.testing.assert_allclose(solver.solution(), x, rtol=1e-9, atol=1e-9)


def test_cg_run_reports_flops_of_iterations_done(one):
    from archbench.workloads.kernels import cg
    result = cg.run(one, job("cg", "--size", 128, "--iterations", 40, "--warmup-steps", 1, "--steps", 2))
    assert result.metrics["iterations"]["value"] == 40
    assert 0 < result.metrics["residual"]["value"] < 1
    assert result.throughput == pytest.approx(40 * 2 * 128**2 * 2 / sum(result.step_times_s) / 1e9)


@pytest.mark.parametrize("n, tile", [(1 << 12, 1 << 12), (1 << 12, 1 << 8), (1 << 10, 1)])
def test_fft_matches_numpy(one, n, tile):
    from archbench.workloads.kernels.fft import TiledFFT
    fft = TiledFFT(one, n, tile, seed=5)
    fft.transform()
    x = fft.input()
    assert x.dtype == np.complex128 and np.abs(x.imag).max() > 0
    np.testing.assert_allclose(fft.result(), np.fft.fft(x), rtol=1e-10, atol=1e-9)


def test_fft_without_merge_stops_at_the_collected_tile_spectra(one):
    """merge 0 (KTH/ORNL 2019 Sec. VI-D): worker 0 holds each tile's own FFT, unmerged."""
    from archbench.workloads.kernels.fft import TiledFFT
    n, tile = 1 << 10, 1 << 6
    fft = TiledFFT(one, n, tile, seed=3, merge=False)
    fft.transform()
    x, tiles = fft.input(), n // tile
    expected = np.stack([np.fft.fft(x[m::tiles]) for m in range(tiles)]).reshape(-1)
    np.testing.assert_allclose(fft.result(), expected, rtol=1e-10, atol=1e-9)
    assert not np.allclose(fft.result(), np.fft.fft(x))


def test_fft_run_reports_merge_and_refuses_to_verify_without_it(one):
    from archbench.workloads.kernels.fft import run
    result = run(one, job("fft", "--size", 1 << 10, "--tile-size", 1 << 6, "--merge", 0))
    assert result.metrics["merged"]["value"] == 0 and result.metrics["tiles"]["value"] == 16
    with pytest.raises(ValueError, match="merge"):
        run(one, job("fft", "--size", 1 << 10, "--merge", 0, "--verify"))


def test_fft_rejects_non_power_of_two(one):
    from archbench.workloads.kernels.fft import TiledFFT
    with pytest.raises(ValueError, match="powers of two"):
        TiledFFT(one, 1000)


def test_split_is_contiguous_and_balanced():
    assert split(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split(2, 2) == [(0, 1), (1, 2)]


# ---- experiment type, schema and command ----

def campaign(experiment: dict, nodes: int = 2, launcher: str = "local") -> dict:
    system = {"arch": "auto", "nodes": nodes, "cores_per_socket": 4, "launcher": launcher}
    return {"campaign": "k", "systems": ["box"], "system_definitions": {"box": system},
            "experiments": {"kern": {"type": "kernel", "repetitions": 1, **experiment}}}


def test_kernel_experiment_expands_axes():
    loaded = load_campaign(campaign({
        "kernels": ["matmul", "stream_comm", "cg"],
        "sizes": {"matmul": [1024, 4096], "stream_comm": [2, 128], "cg": [1000]},
        "tile_sizes": [2048], "workers": [1, 2, 4], "nodes": [1, 2, 4], "iterations": 50}))
    ms = loaded.measurements
    matmul = [m for m in ms if m["kernel"] == "matmul"]
    assert {m["problem_size"] for m in matmul} == {4096}  # tile 2048 > N=1024 skipped
    assert {(m["workers"], m["nodes"]) for m in matmul} == {(1, 1), (2, 1), (4, 1), (2, 2), (4, 2)}
    assert all(m["processes_per_node"] * m["nodes"] == m["workers"] for m in ms)
    comm = [m for m in ms if m["kernel"] == "stream_comm"]
    assert {m["workers"] for m in comm} == {2} and len(comm) == 4  # 2 sizes x 1|2 nodes
    cg = [m for m in ms if m["kernel"] == "cg"]
    assert all(m["iterations"] == 50 and m["tile_size"] is None for m in cg)
    assert all((m["warmup_steps"], m["measured_steps"]) == (1, 1) for m in cg)
    for m in ms:
        assert m["kind"] == "kernel" and m["strategy"] == "workers"
        unit = {"matmul": "GFLOP/s", "stream_comm": "MiB/s", "cg": "GFLOP/s"}[m["kernel"]]
        assert m["throughput_unit"] == unit
        assert m["intra_threads"] == 4 // m["processes_per_node"]
    assert len({m["config_id"] for m in ms}) == len(ms)


def test_workers_per_node_gives_each_worker_count_its_nodes():
    """4 instances per node (KTH/ORNL 2019 Table I): 2 and 4 workers on one node, 8 on two,
    16 on four; 6 on two nodes (3 each); 5 do not split evenly; 16 need more than 2 nodes."""
    layout = {"kernels": ["cg"], "sizes": [64], "workers": [2, 4, 5, 6, 8, 16], "workers_per_node": 4}
    placed = {(m["workers"], m["nodes"], m["processes_per_node"])
              for m in load_campaign(campaign(layout, nodes=4)).measurements}
    assert placed == {(2, 1, 2), (4, 1, 4), (6, 2, 3), (8, 2, 4), (16, 4, 4)}
    small = {m["workers"] for m in load_campaign(campaign(layout, nodes=2)).measurements}
    assert small == {2, 4, 6, 8}
    one_each = load_campaign(campaign({**layout, "workers": [2, 4], "workers_per_node": 1}, nodes=4))
    assert {(m["workers"], m["nodes"]) for m in one_each.measurements} == {(2, 2), (4, 4)}


@pytest.mark.parametrize("experiment, message", [
    ({"kernels": ["cg"], "sizes": [64], "workers": [2], "workers_per_node": 1, "nodes": [2]},
     "exclude each other"),
    ({"kernels": ["cg"], "sizes": [64], "workers_per_node": 0}, "workers_per_node"),
    ({"kernels": ["fft"], "sizes": [64], "merge": 2}, "merge"),
    ({"kernels": ["fft"], "sizes": [1000]}, "powers of two"),
    ({"kernels": ["matmul"], "sizes": [1024], "tile_sizes": [1000]}, "powers of two"),
    ({"kernels": ["lu"], "sizes": [1024]}, "kernels.0"),
    ({"kernels": ["cg"], "sizes": [1024], "threads": [1]}, "threads: not a key of kernel experiments"),
    ({"kernels": ["cg"]}, "sizes"),
    ({"kernels": ["cg", "fft"], "sizes": {"cg": [64]}}, "no sizes given for kernel 'fft'"),
    ({"kernels": ["cg"], "sizes": [0]}, "sizes"),
])
def test_kernel_experiment_rejects_bad_input(experiment, message):
    with pytest.raises(ConfigError, match=message):
        load_campaign(campaign(experiment))


def test_schema_describes_every_kernel_key():
    from archbench.plan.campaign import experiment_schema
    definition = experiment_schema()["$defs"]["kernel"]
    assert definition["unevaluatedProperties"] is False
    assert {"$ref": "#/$defs/common"} in definition["allOf"]
    assert all("description" in spec for spec in definition["properties"].values())


def gpu_box(gpus: int) -> dict:
    return {"arch": "auto", "nodes": 4, "cores_per_socket": 4, "launcher": "srun",
            "vendor_library": "none", "gpus_per_node": gpus}


def test_kernel_experiment_device_axis_runs_one_worker_per_gpu():
    """device [cpu, gpu]: the CPU configurations are those of an experiment without the
    axis (ids too); a GPU one has one worker per GPU (KTH/ORNL 2019 Table I)."""
    from archbench.plan.experiment_types.base import expand_with_skips
    from archbench.plan.experiment_types.kernel import expand
    layout = {"kernels": ["cg"], "sizes": [64], "workers": [1, 2, 4, 8], "workers_per_node": 4}
    cpu_only = expand(layout, gpu_box(4))
    both = expand({**layout, "device": ["cpu", "gpu"]}, gpu_box(4))
    cpus = [c for c in both if "device" not in c]
    gpus = [c for c in both if c.get("device") == "gpu"]
    assert cpus == cpu_only and len(gpus) == 4 and len(both) == 8
    for conf in gpus:
        per_node = conf["workers"] // conf["nodes"]
        assert conf["gpus_per_node"] == conf["processes_per_node"] == per_node
        assert conf["gpus"] == conf["workers"] and conf["scaling_unit"] == "gpus"
    assert {(c["workers"], c["nodes"], c["gpus_per_node"]) for c in gpus} == {
        (1, 1, 1), (2, 1, 2), (4, 1, 4), (8, 2, 4)}
    # two GPUs per node: 4 instances per node do not fit, only the smaller counts run
    confs, reasons = expand_with_skips(expand, {**layout, "device": ["gpu"]}, gpu_box(2))
    assert {c["workers"] for c in confs} == {1, 2}
    assert "gpus_per_node 4 > the system's 2" in reasons
    confs, reasons = expand_with_skips(expand, {**layout, "device": ["gpu"]}, gpu_box(0))
    assert confs == [] and any("no GPUs" in r for r in reasons)


def test_stream_memory_host_is_a_gpu_only_setting():
    from archbench.plan.experiment_types.base import expand_with_skips
    from archbench.plan.experiment_types.kernel import expand
    experiment = {"kernels": ["stream"], "sizes": [1024], "workers": [2], "memory": "host",
                  "device": ["cpu", "gpu"]}
    confs, reasons = expand_with_skips(expand, experiment, gpu_box(2))
    (conf,) = confs
    assert conf["device"] == "gpu" and conf["tuning"] == {"memory": "host"}
    assert any("memory host" in r and "GPU" in r for r in reasons)
    argv = command_for(conf, gpu_box(2))
    assert argv[argv.index("--device") + 1] == "gpu" and argv[argv.index("--memory") + 1] == "host"
    device = expand({**experiment, "memory": "device"}, gpu_box(2))
    assert {c.get("device") for c in device} == {None, "gpu"}  # device memory: CPUs too
    from archbench.core.fields import config_id
    assert len({config_id(c) for c in device + confs}) == 3
    with pytest.raises(ConfigError, match="memory"):
        load_campaign(campaign({"kernels": ["stream"], "sizes": [8], "memory": "gpu"}))


def test_cli_refuses_host_memory_on_cpus(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(["stream", "--size", "8", "--memory", "host"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("--memory host needs --device gpu")
    assert job("stream", "--size", 8, "--memory", "host", "--device", "gpu").option("memory") == "host"


def test_cli_gpu_run_placed_on_cpus_is_a_failure(one):
    """Never a CPU number under a GPU name: a GPU run whose step TensorFlow placed on a CPU
    is recorded as failed with the placement, without its throughput."""
    from archbench.workloads.kernels.cli import measured_record
    result = KernelResult(2.0, "GFLOP/s", [0.5], 0, devices=["CPU:0"])
    record = measured_record(job("cg", "--size", 64, "--device", "gpu"), one, result,
                             start="t", framework_version="x")
    assert record["status"] == "failed" and "asked for GPUs, the step ran on CPU:0" in record["reason"]
    assert record["throughput"] is None and record["devices"] == ["CPU:0"]
    assert record["device"] == "gpu" and record["config_id"].endswith("_gpu1")
    ok = measured_record(job("cg", "--size", 64), one, result, start="t", framework_version="x")
    assert ok["status"] == "ok" and ok["throughput"] == 2.0 and ok["device"] == "cpu"


def test_command_for_local_and_srun():
    loaded = load_campaign(campaign({"kernels": ["matmul", "cg"], "sizes": [4096],
                                     "tile_sizes": [1024], "workers": [2], "nodes": [1, 2],
                                     "reducers": 2, "tolerance": 1e-9}, launcher="srun"))
    system = loaded.systems["box"]
    by = {(m["kernel"], m["nodes"]): m for m in loaded.measurements}
    local = command_for(by["matmul", 1], system)
    assert local[:4] == [sys.executable, "-m", "archbench.kernels", "matmul"]
    assert local[local.index("--size") + 1] == "4096"
    assert local[local.index("--tile-size") + 1] == "1024"
    assert local[local.index("--workers") + 1] == "2"
    assert local[local.index("--reducers") + 1] == "2"
    assert "--output" not in local
    remote = command_for(by["matmul", 2], system)
    assert remote[0] == "srun" and "--ntasks=2" in remote and "--cpus-per-task=4" in remote
    assert {"--nodes=2", "--distribution=block", "--export=ALL", "--kill-on-bad-exit=1"} <= set(remote)
    assert remote[remote.index(sys.executable) + 2] == "archbench.kernels"
    cg = command_for(by["cg", 1], system)
    assert cg[cg.index("--iterations") + 1] == "500" and "--tolerance" in cg
    assert "--tile-size" not in cg
    assert command_for(by["matmul", 2], {**system, "launcher": "mpirun"})[0] == sys.executable


# ---- the registry ----

def test_registry_stays_free_of_tensorflow():
    """The campaign loader imports the registry: no kernel module may import TensorFlow."""
    code = ("import sys, archbench.kernels, archbench.workloads.kernels.cli, archbench.plan.experiment_types.kernel\n"
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]


def test_every_registered_kernel_has_a_subcommand_with_its_defaults():
    for name, spec in KERNELS.items():
        run = job(name, "--size", 64)
        assert (run.kernel, run.size, run.tile_size, run.workers) == (name, 64, None, 1)
        assert (run.warmup_steps, run.steps) == spec.steps
        assert {s.name: s.default for s in spec.settings}.items() <= dict(run.options).items()
    assert job("matmul", "--size", 8, "--reducers", 2, "--steps", 4).option("reducers") == 2
    assert job("cg", "--size", 8, "--steps", 4).steps == 4
    with pytest.raises(SystemExit):
        parse_args(["cg", "--size", "8", "--tile-size", "4"])  # cg is not tiled


def test_a_new_kernel_needs_only_its_spec(monkeypatch):
    """A spec in the registry gets a subcommand, an expansion with its settings and
    defaults, and a worker command line."""
    from archbench.plan.experiment_types.kernel import expand
    toy = KernelSpec(name="toy", help="a toy kernel", unit="GFLOP/s", measures=FLOP_RATE,
                     size_help="N", run=lambda cluster, job: KernelResult(1.0, "GFLOP/s", [1.0], 0),
                     work=lambda record: 1.0,
                     steps=(0, 2), tile_help="elements per tile", power_of_two=True,
                     settings=(Setting(name="sweeps", type=int, default=3, help="sweeps per step"),))
    monkeypatch.setitem(KERNELS, "toy", toy)
    run = job("toy", "--size", 16, "--tile-size", 4, "--sweeps", 5)
    assert (run.option("sweeps"), run.tile_size, run.warmup_steps, run.steps) == (5, 4, 0, 2)
    system = {"nodes": 1, "cores_per_socket": 4, "vendor_library": "none", "launcher": "local"}
    (conf,) = expand({"kernels": ["toy"], "sizes": [16], "tile_sizes": [4], "sweeps": 7}, system)
    assert conf["tuning"] == {"sweeps": 7} and conf["throughput_unit"] == "GFLOP/s"
    assert (conf["warmup_steps"], conf["measured_steps"], conf["tile_size"]) == (0, 2, 4)
    argv = command_for(conf, system)
    assert argv[argv.index("--sweeps") + 1] == "7" and argv[argv.index("--tile-size") + 1] == "4"
    with pytest.raises(ConfigError, match="powers of two"):
        expand({"kernels": ["toy"], "sizes": [12]}, system)


def test_tables_classify_kernels_by_what_their_spec_measures():
    from archbench.results.tables.kernels import measures_bandwidth
    assert measures_bandwidth("stream") and measures_bandwidth("stream_comm")
    assert not any(measures_bandwidth(k) for k in ("matmul", "cg", "fft", "lu", None, float("nan")))


# ---- the CLI ----

def run_cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archbench.kernels", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_two_workers_writes_valid_record(tmp_path):
    out = tmp_path / "rec.json"
    proc = run_cli("matmul", "--size", "256", "--tile-size", "64", "--workers", "2", "--verify",
                   "--steps", "2", "--scratch", str(tmp_path), "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = read_record(out)
    assert record["kind"] == "kernel" and record["kernel"] == "matmul"
    assert record["status"] == "ok" and record["throughput_unit"] == "GFLOP/s"
    assert (record["workers"], record["nodes"], record["processes_per_node"]) == (2, 1, 2)
    assert (record["problem_size"], record["tile_size"]) == (256, 64)
    assert record["strategy"] == "workers" and record["framework_version"]
    assert record["metrics"]["max_relative_error"]["value"] < 1e-5
    assert len(record["step_times_s"]) == record["measured_steps"] == 2
    assert record["start_time"] <= record["end_time"]
    assert record["device"] == "cpu" and record["devices"] == ["task0/CPU:0", "task1/CPU:0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]  # tiles deleted
    assert "Traceback" not in proc.stderr and "I0000" not in proc.stderr


def test_cli_failure_writes_failure_record(tmp_path):
    out = tmp_path / "rec.json"
    proc = run_cli("fft", "--size", "1000", "--output", str(out))
    assert proc.returncode == 3
    record = read_record(out)
    assert record["status"] == "failed" and "powers of two" in record["reason"]
    assert record["throughput"] is None and record["kernel"] == "fft"


def test_cli_prints_record_without_output():
    proc = run_cli("stream", "--size", "4096", "--steps", "1", "--warmup-steps", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    assert record["throughput_unit"] == "GB/s" and record["metrics"]["copy"]["unit"] == "GB/s"
    assert record["devices"] == ["CPU:0"]  # one worker: in this process


def test_supervisor_runs_a_kernel_measurement(tmp_path):
    """The workflow path: campaign -> measurement -> supervisor -> command_for -> record."""
    from archbench.execute.supervisor import supervise
    loaded = load_campaign(campaign({"kernels": ["cg"], "sizes": [64], "iterations": 10,
                                     "tolerance": 1e-30, "workers": [1]}))
    (measurement,) = loaded.measurements
    record = supervise(measurement, loaded.systems["box"], output=tmp_path / "rep0.json",
                       log_path=tmp_path / "log")
    assert record["status"] == "ok", record["reason"]
    assert record["config_id"] == measurement["config_id"] and record["experiment"] == "kern"
    assert record["metrics"]["iterations"]["value"] == 10
    assert read_record(tmp_path / "rep0.json")["throughput_unit"] == "GFLOP/s"
