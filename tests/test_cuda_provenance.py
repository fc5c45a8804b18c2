"""CUDA provenance in records: CUDA, cuDNN and NCCL versions and GPU models, from TensorFlow's
build info, the NVIDIA wheels and Horovod (TensorFlow's ``accelerators``, which
archbench.core.provenance reads through the frameworks' registry). No GPU is here: a GPU
process's build info is fed as TensorFlow 2.18.1's CUDA wheel returns it; this machine's
`tensorflow` wheel is a CUDA build that sees no GPU, and its CPU records are checked for
the empty values."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from archbench.core import provenance as p
from archbench.core.record import make_record, read_record
from archbench.results.collect import records_to_frame
from archbench.results.tables import build_table
from archbench.workloads.training.tensorflow import accelerators as tfa

# tf.sysconfig.get_build_info() of the tensorflow==2.18.1 wheel (CUDA build), as it prints it
CUDA_BUILD = {"cpu_compiler": "/usr/lib/llvm-18/bin/clang",
              "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
              "cuda_version": "12.5.1", "cudnn_version": "9", "is_cuda_build": True,
              "is_rocm_build": False, "is_tensorrt_build": False}
# ... and of tensorflow-cpu==2.18.1
CPU_BUILD = {"is_cuda_build": False, "is_rocm_build": False, "is_tensorrt_build": False}
WHEELS = {tfa.CUDNN_WHEEL: "9.3.0.75", tfa.NCCL_WHEEL: "2.21.5"}


def test_cuda_build_info_maps_to_the_record_fields():
    assert tfa.cuda_versions(CUDA_BUILD, WHEELS) == {
        "cuda_version": "12.5.1", "cudnn_version": "9.3.0.75", "nccl_version": "2.21.5"}


def test_without_the_wheels_the_build_and_horovod_say_what_they_know():
    # cuDNN: only the major TensorFlow was built with; NCCL: what Horovod was compiled with
    none = {tfa.CUDNN_WHEEL: None, tfa.NCCL_WHEEL: None}
    assert tfa.cuda_versions(CUDA_BUILD, none, horovod_nccl=22105) == {
        "cuda_version": "12.5.1", "cudnn_version": "9", "nccl_version": "2.21.5"}
    assert tfa.cuda_versions(CUDA_BUILD, none)["nccl_version"] is None


def test_cpu_build_reports_no_cuda_stack_even_beside_stray_wheels():
    assert tfa.cuda_versions(CPU_BUILD, WHEELS) == {
        "cuda_version": None, "cudnn_version": None, "nccl_version": None}
    assert tfa.cuda_versions({}, {}) == {"cuda_version": None, "cudnn_version": None, "nccl_version": None}


@pytest.mark.parametrize("code, text", [(22105, "2.21.5"), (21803, "2.18.3"), (2804, "2.8.4"),
                                        (2708, "2.7.8"), (0, None)])
def test_nccl_version_code(code, text):
    assert p.nccl_version_text(code) == text


def fake_tf(*details):
    gpus = [SimpleNamespace(name=f"/physical_device:GPU:{i}") for i in range(len(details))]
    lookup = dict(zip((g.name for g in gpus), details))
    config = SimpleNamespace(
        list_physical_devices=lambda kind: gpus if kind == "GPU" else [],
        experimental=SimpleNamespace(get_device_details=lambda gpu: lookup[gpu.name]))
    return SimpleNamespace(config=config)


def test_gpu_models_come_from_the_device_details():
    tf = fake_tf({"device_name": "Tesla V100-PCIE-16GB", "compute_capability": (7, 0)},
                 {"compute_capability": (7, 0)})  # no name reported: the device's name
    assert tfa.gpu_models(tf) == ["Tesla V100-PCIE-16GB", "/physical_device:GPU:1"]
    assert tfa.gpu_models(fake_tf()) == []


def test_a_process_without_tensorflow_records_nothing(monkeypatch):
    for name in ("tensorflow", "torch"):  # nor any other framework (an earlier test's torch)
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert p.accelerator_fields() == p.no_accelerator()
    assert {k: p.host_fields()[k] for k in p.no_accelerator()} == p.no_accelerator()


def test_this_machines_tensorflow_is_a_cuda_build_that_sees_no_gpu(monkeypatch):
    """The `tensorflow` wheel (pyproject's, for tf_keras) is a CUDA build: the process
    reports the build's CUDA and cuDNN and no GPU; a CPU run's record states none of them
    (the next test)."""
    import tensorflow as tf
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # an earlier test's (a CUDA build)
    info = tf.sysconfig.get_build_info()
    assert info.get("is_cuda_build")
    fields = p.accelerator_fields()
    assert fields == {"cuda_version": info["cuda_version"], "cudnn_version": info["cudnn_version"],
                      "nccl_version": None, "gpu_models": []}
    fields["gpu_models"].append("x")  # callers get their own list, never the cached one
    assert p.accelerator_fields()["gpu_models"] == []


@pytest.mark.parametrize("framework", ["tensorflow", "pytorch"])
def test_a_record_of_this_cpu_machine_says_no_cuda_and_no_gpu(framework, tmp_path):
    """Also PyTorch's: this machine's PyTorch is a CUDA build, whose CUDA, cuDNN and NCCL a
    run on the CPU never uses."""
    out = tmp_path / "rec.json"  # a process of its own: TensorFlow's thread pools are per process
    subprocess.run([sys.executable, "-m", "archbench.train", "--framework", framework, "--model", "small_cnn",
                    "--batch-per-process", "4", "--image-size", "32", "--num-classes", "10",
                    "--warmup-steps", "1", "--steps", "2", "--output", str(out)],
                   check=True, capture_output=True, timeout=300)
    r = read_record(out)
    assert r["status"] == "ok" and r["framework_version"].startswith("2.") and r["framework"] == framework
    assert r["cuda_version"] is None and r["cudnn_version"] is None and r["nccl_version"] is None
    assert r["gpu_models"] == []


def gpu_record(**fields) -> dict:
    base = dict(experiment="e", system="v100", arch="x86_64", kind="train", model="small_cnn",
                config_id="c1", repetition=0, throughput=10.0, throughput_unit="img/s",
                device="gpu", devices=["GPU:0", "GPU:1"],
                start_time="t0", end_time="t1", cuda_version="12.5.1", cudnn_version="9.3.0.75",
                nccl_version="2.21.5", gpu_models=["Tesla V100-PCIE-16GB", "Tesla V100-PCIE-16GB"])
    return make_record(**{**base, **fields})


def test_tidy_table_and_platform_table_carry_the_cuda_stack():
    frame = records_to_frame([gpu_record(), gpu_record(repetition=1, gpu_models=[])])
    assert frame["gpu_models"].tolist() == ["Tesla V100-PCIE-16GB,Tesla V100-PCIE-16GB", ""]
    row = build_table("platform", frame, systems={}).iloc[0]
    assert (row["cuda_version"], row["cudnn_version"], row["nccl_version"]) == (
        "12.5.1", "9.3.0.75", "2.21.5")
    assert row["recorded_gpu_models"] == "Tesla V100-PCIE-16GB,Tesla V100-PCIE-16GB"


STACK = ("cuda_version", "cudnn_version", "nccl_version")


# (what the record says its device is, whether its CUDA stack reaches the tidy table)
@pytest.mark.parametrize("device, kept", [
    ("gpu", True),
    ("cpu", False),  # a record written before provenance left the stack out of CPU runs
    (None, False),  # a record from before the device field: read as a CPU run
])
def test_collection_keeps_a_cuda_stack_only_on_gpu_records(device, kept):
    old = gpu_record(device=device, devices=["GPU:0"] if device == "gpu" else ["CPU:0"])
    frame = records_to_frame([old])
    row = frame.iloc[0]
    assert [row[c] for c in STACK] == (["12.5.1", "9.3.0.75", "2.21.5"] if kept else [None] * 3)
    assert row["gpu_models"] == ("Tesla V100-PCIE-16GB,Tesla V100-PCIE-16GB" if kept else "")
    platform = build_table("platform", frame, systems={}).iloc[0]
    if kept:
        assert platform["cuda_version"] == "12.5.1"
    else:  # every table, figure and comparison reads the tidy table: none shows the stack
        assert all(pd.isna(platform[c]) for c in (*STACK, "recorded_gpu_models"))


def test_records_without_the_fields_still_read():
    old = gpu_record()
    for key in ("cuda_version", "cudnn_version", "nccl_version", "gpu_models"):
        old.pop(key)
    frame = records_to_frame([make_record(**old)])
    assert pd.isna(frame.loc[0, "cuda_version"]) and frame.loc[0, "gpu_models"] == ""
