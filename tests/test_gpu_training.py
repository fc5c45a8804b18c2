"""Training on GPUs on this CPU-only machine: a GPU measurement is recorded as a failure
(no GPU visible, or a step placed elsewhere), never as a CPU number under a GPU name; CPU
runs record where TensorFlow placed their step; GPU configurations of the experiment types
(one process per GPU, skipped where the system lacks GPUs); the collection-time check and
the tables' device identity."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from archbench.core.fields import config_id
from archbench.core.record import make_record, write_record
from archbench.plan.experiment_types import EXPERIMENT_TYPES
from archbench.plan.experiment_types.base import expand_with_skips
from archbench.results.collect import collect
from archbench.results.tables.common import normalise, summarise
from archbench.workloads import gpu
from archbench.workloads.training.benchmark import EXIT_BENCHMARK_FAILED

TINY = ["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "16", "--num-classes", "4",
        "--warmup-steps", "1", "--steps", "2", "--vendor-probe", "off"]


def train(tmp_path, *extra: str, prelude: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``archbench.train`` in a fresh interpreter (``prelude`` first); its record."""
    out = tmp_path / "run.json"
    argv = [*TINY, *extra, "--output", str(out)]
    code = f"{prelude}\nfrom archbench import train\nraise SystemExit(train.main({argv!r}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return proc, json.loads(out.read_text())


def test_gpu_run_without_a_gpu_is_recorded_as_that_failure(tmp_path):
    proc, record = train(tmp_path, "--device", "gpu")
    assert proc.returncode == EXIT_BENCHMARK_FAILED, proc.stderr
    assert record["status"] == "failed" and gpu.NO_GPU in record["reason"]
    assert record["throughput"] is None
    assert (record["device"], record["gpus"], record["gpus_per_node"]) == ("gpu", 1, 1)
    assert record["config_id"].endswith("_gpu1")
    assert "Traceback" not in proc.stderr  # an expected outcome, said in one line


def test_cpu_run_records_the_devices_tensorflow_placed_its_step_on(tmp_path):
    proc, record = train(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert record["status"] == "ok" and record["throughput"] > 0
    assert (record["device"], record["devices"]) == ("cpu", ["CPU:0"])
    assert record["gpus"] is None and "_gpu" not in record["config_id"]


def test_a_gpu_run_whose_step_ran_on_the_cpu_is_a_failure(tmp_path):
    """TensorFlow is told a GPU exists (require_gpu passes), but the step really runs on
    the CPU: the placement, not the configuration, decides, and the run fails."""
    prelude = "import archbench.workloads.gpu as g\ng.require_gpu = lambda tf: ['/physical_device:GPU:0']"
    proc, record = train(tmp_path, "--device", "gpu", "--data-format", "NHWC", prelude=prelude)
    assert proc.returncode == EXIT_BENCHMARK_FAILED, proc.stderr
    assert record["status"] == "failed" and record["throughput"] is None
    assert "asked for GPUs, the step ran on CPU:0" in record["reason"]
    assert record["devices"] == ["CPU:0"] and record["device"] == "gpu"


# ------------------------------------------------------------- experiment types

GPU_NODES = {"name": "g", "arch": "x86_64", "sockets": 2, "cores_per_socket": 8, "nodes": 16,
             "gpus_per_node": 8, "launcher": "srun", "vendor_library": "none"}
CPU_NODES = {**GPU_NODES, "name": "c", "gpus_per_node": 0}
SCALING = {"models": ["resnet50"], "batch_per_process": [64], "strategies": ["horovod"]}


def expand(kind: str, experiment: dict, system: dict) -> tuple[list[dict], list[str]]:
    return expand_with_skips(EXPERIMENT_TYPES[kind].expand, experiment, system)


def test_node_scaling_gpus_pack_one_process_per_gpu():
    confs, skipped = expand("node_scaling", {**SCALING, "device": ["gpu"], "gpus": [1, 4, 8, 12, 16, 256]},
                            GPU_NODES)
    layouts = [(c["gpus"], c["nodes"], c["gpus_per_node"], c["processes_per_node"], c["workers"],
                c["intra_threads"], c["global_batch"]) for c in confs]
    assert layouts == [(1, 1, 1, 1, 1, 16, 64), (4, 1, 4, 4, 4, 4, 256), (8, 1, 8, 8, 8, 2, 512),
                       (16, 2, 8, 8, 16, 2, 1024)]
    assert all(c["device"] == "gpu" and c["scaling_unit"] == "gpus" and c["data_format"] == "NCHW"
               for c in confs)
    assert skipped == ["gpus 12 do not fill whole nodes of 8 GPUs",
                       "gpus 256 need 32 nodes > the system's 16"]


def test_node_scaling_cpu_and_gpu_side_by_side_keep_the_cpu_ids():
    cpu_only, _ = expand("node_scaling", {**SCALING, "nodes": [1, 2]}, GPU_NODES)
    both, _ = expand("node_scaling", {**SCALING, "nodes": [1, 2], "device": ["cpu", "gpu"],
                                      "gpus_per_node": [2]}, GPU_NODES)
    assert both[:len(cpu_only)] == cpu_only  # CPU configurations and ids unchanged
    gpus = both[len(cpu_only):]
    assert [(c["nodes"], c["gpus"], c["processes_per_node"]) for c in gpus] == [(1, 2, 2), (2, 4, 2)]
    assert [config_id(c) for c in gpus] == [config_id({**c, "device": None}) + "_gpu2" for c in gpus]


def test_gpu_configurations_are_skipped_where_the_system_has_too_few_gpus():
    confs, skipped = expand("node_scaling", {**SCALING, "device": ["gpu"], "nodes": [1]}, CPU_NODES)
    assert confs == [] and skipped == ["device gpu: the system has no GPUs (gpus_per_node 0)"]
    confs, skipped = expand("node_scaling", {**SCALING, "device": ["gpu"], "nodes": [1],
                                             "gpus_per_node": [4, 16]}, GPU_NODES)
    assert [c["gpus_per_node"] for c in confs] == [4] and skipped == ["gpus_per_node 16 > the system's 8"]
    confs, skipped = expand("batch_sweep", {"models": ["resnet50"], "batch_per_process": [8],
                                            "device": ["cpu", "gpu"]}, CPU_NODES)
    assert [c.get("device") for c in confs] == [None] and skipped


def test_batch_sweep_on_one_gpu():
    confs, _ = expand("batch_sweep", {"models": ["resnet50"], "batch_per_process": [8, 16],
                                      "device": ["gpu"]}, GPU_NODES)
    assert [(c["device"], c["gpus"], c["processes_per_node"], c["intra_threads"], c["data_format"])
            for c in confs] == [("gpu", 1, 1, 16, "NCHW")] * 2


@pytest.mark.parametrize("experiment, message", [
    ({"gpus_per_node": [1]}, "gpus_per_node: only GPU configurations take it"),
    ({"device": ["gpu"], "gpus": [2], "nodes": [1]}, "gpus: give it or nodes"),
    ({"device": ["gpu"], "processes_per_node": 2}, "processes_per_node: GPU runs start one process per GPU"),
])
def test_node_scaling_refuses_gpu_keys_that_cannot_mean_anything(experiment, message):
    from archbench.core.validate import ConfigError
    with pytest.raises(ConfigError, match=message):
        expand("node_scaling", {**SCALING, **experiment}, GPU_NODES)


# ------------------------------------------------------------- collection and tables

def gpu_record(devices: list[str], *, rep: int = 0, device: str | None = "gpu", throughput=100.0) -> dict:
    conf = {"kind": "train", "model": "resnet50", "batch_per_process": 64, "nodes": 1,
            "processes_per_node": 1, "intra_threads": 4, "inter_threads": 1,
            "vendor_library_enabled": False, "data": "synthetic", "strategy": "single",
            "device": device, "gpus_per_node": 1 if device == "gpu" else None}
    gpus = {"gpus": 1, "gpus_per_node": 1} if device == "gpu" else {}
    return make_record(
        experiment="e", experiment_type="batch_sweep", system="s", arch="x86_64", kind="train",
        model="resnet50", data="synthetic", strategy="single", nodes=1, processes_per_node=1,
        workers=1, intra_threads=4, inter_threads=1, batch_per_process=64, global_batch=64,
        vendor_library_enabled=False, config_id=config_id(conf), repetition=rep,
        start_time="t0", end_time="t1", throughput=throughput, throughput_unit="img/s",
        device=device, devices=devices, **gpus)


def test_collection_never_reports_a_cpu_step_as_a_gpu_measurement(tmp_path):
    """A hand-made record claiming an ok GPU run whose step ran on the CPU: the table shows
    it failed with the reason and no throughput; a real GPU placement stays ok."""
    liar = write_record(tmp_path / "liar.json", gpu_record(["CPU:0"], rep=0))
    mixed = write_record(tmp_path / "mixed.json", gpu_record(["GPU:0", "task1/CPU:0"], rep=1))
    unplaced = write_record(tmp_path / "unplaced.json", gpu_record([], rep=2))
    honest = write_record(tmp_path / "honest.json", gpu_record(["GPU:0"], rep=3))
    frame, errors = collect([liar, mixed, unplaced, honest])
    assert errors == []
    rows = frame.set_index("repetition")
    for rep in (0, 1, 2):
        assert rows.loc[rep, "status"] == "failed"
        assert rows.loc[rep, "reason"].startswith("not a GPU measurement: ")
        assert rows.loc[rep, "throughput"] != rows.loc[rep, "throughput"]  # NaN
    assert "the step ran on CPU:0" in rows.loc[0, "reason"]
    assert (rows.loc[3, "status"], rows.loc[3, "throughput"], rows.loc[3, "devices"]) == ("ok", 100.0, "GPU:0")
    summary = summarise(frame)
    assert (summary["n"].tolist(), summary["n_failed"].tolist()) == ([1], [3])


def test_gpu_and_cpu_runs_never_share_a_row_and_old_records_read_as_cpu(tmp_path):
    old = gpu_record([], device=None, throughput=10.0)  # before the field: a CPU run
    new_cpu = {**gpu_record(["CPU:0"], device="cpu", throughput=12.0), "repetition": 1,
               "run_id": f"{old['config_id']}/rep1"}
    on_gpu = gpu_record(["GPU:0"], throughput=100.0)
    frame, _ = collect([write_record(tmp_path / f"{i}.json", r)
                        for i, r in enumerate((old, new_cpu, on_gpu))])
    assert normalise(frame)["device"].tolist().count("cpu") == 2
    summary = summarise(frame).set_index("device")
    assert summary.loc["cpu", "n"] == 2 and summary.loc["cpu", "mean"] == 11.0
    assert summary.loc["gpu", "n"] == 1 and summary.loc["gpu", "mean"] == 100.0
