"""GPU binding by local rank, placement-based device labels and the no-GPU failure."""

import os
import re
import subprocess
import sys

import pytest

from archbench.core.fields import config_id
from archbench.core.record import make_record
from archbench.workloads import gpu


@pytest.mark.parametrize("rank, inherited, expected", [
    (0, None, "0"), (3, None, "3"), (1, "", "1"),
    (1, "4,5,6,7", "5"), (2, "0,1", "0"),  # more ranks than listed GPUs wrap around
    (1, "6", "6"),                          # Slurm bound one GPU per task: keep it
    (1, "NoDevFiles", "1"),                 # Slurm's gres counts without device files
])
def test_visible_device_by_local_rank(rank, inherited, expected):
    assert gpu.visible_device_for(rank, inherited) == expected


def test_bind_gpu_uses_the_launchers_local_rank(monkeypatch):
    monkeypatch.setenv("SLURM_LOCALID", "1")
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert gpu.bind_gpu("gpu", env) == "3" and env["CUDA_VISIBLE_DEVICES"] == "3"
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert gpu.bind_gpu("cpu", env) == "" and env["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize("name, short, kind", [
    ("/job:localhost/replica:0/task:0/device:GPU:0", "GPU:0", "gpu"),
    ("/job:localhost/replica:0/task:0/device:CPU:0", "CPU:0", "cpu"),   # in-process kernels
    ("/job:worker/replica:0/task:0/device:CPU:0", "task0/CPU:0", "cpu"),  # a kernel cluster's worker 0
    ("/job:worker/replica:0/task:1/device:CPU:0", "task1/CPU:0", "cpu"),
    ("/job:worker/replica:0/task:2/device:GPU:1", "task2/GPU:1", "gpu"),
])
def test_device_names(name, short, kind):
    assert gpu.short_device(name) == short
    assert gpu.device_kind(short) == kind


def test_bind_gpu_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("ARCHBENCH_LOCAL_RANK", "2")
    gpu.bind_gpu("gpu", {})
    assert capsys.readouterr().err == "archbench.workloads.gpu: local rank 2 bound to CUDA_VISIBLE_DEVICES=2\n"
    gpu.bind_gpu("cpu", {})
    assert capsys.readouterr().err == ""


def test_device_mismatch():
    assert gpu.device_mismatch("gpu", ["GPU:0", "task1/GPU:0"]) == ""
    assert "ran on CPU:0" in gpu.device_mismatch("gpu", ["CPU:0"])
    assert "ran on" in gpu.device_mismatch("gpu", ["GPU:0", "task1/CPU:0"])
    assert gpu.device_mismatch("cpu", ["CPU:0"]) == ""
    assert gpu.device_mismatch("cpu", ["GPU:0"]) != ""
    assert gpu.device_mismatch("gpu", []) != ""


def in_fresh_tensorflow(code: str) -> str:
    """Run ``code`` in a new interpreter (TensorFlow's runtime settings are per process, and
    other tests set its thread pools) and return what it printed."""
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_placed_devices_of_real_tensors():
    out = in_fresh_tensorflow(
        "import tensorflow as tf\nfrom archbench.workloads import gpu\n"
        "with tf.device('/device:CPU:0'):\n    x = tf.ones((2, 2)) * 2\n"
        "print(gpu.placed_devices([x]))")
    assert out == "['CPU:0']"


def test_require_gpu_fails_clearly_on_this_cpu_machine():
    out = in_fresh_tensorflow(
        "import tensorflow as tf\nfrom archbench.workloads import gpu\n"
        "assert not tf.config.list_physical_devices('GPU'), 'this test expects no GPU'\n"
        "try:\n    gpu.require_gpu(tf)\nexcept gpu.NoGPUError as exc:\n    print(exc)")
    assert out.startswith(gpu.NO_GPU)


def test_gpu_configurations_have_their_own_ids_and_cpu_ids_are_unchanged():
    conf = dict(kind="kernel", kernel="matmul", problem_size=64, tile_size=32, workers=2, nodes=1)
    assert config_id(conf) == "matmul_n64_t32_w2_N1"
    assert config_id({**conf, "device": "cpu"}) == config_id(conf)
    assert config_id({**conf, "device": "gpu", "gpus_per_node": 2}) == "matmul_n64_t32_w2_N1_gpu2"


def test_records_carry_device_fields():
    record = make_record(experiment="e", system="s", config_id="c", repetition=0, kind="kernel",
                         arch="x86_64", device="gpu", devices=["GPU:0"], kernel="matmul",
                         throughput=1.0, throughput_unit="GFLOP/s", start_time="t", end_time="t")
    assert record["device"] == "gpu" and record["devices"] == ["GPU:0"]


def test_unsupported_gpus_by_compute_capability():
    built = [6.0, 7.0, 8.0, 8.9, 9.0]
    assert gpu.unsupported_gpus(7.0, built) == "" and gpu.unsupported_gpus(7.5, built) == ""
    assert gpu.unsupported_gpus(9.0, built) == "" and gpu.unsupported_gpus(12.0, built) == ""
    assert "capability 3.7 is older than 6.0," in gpu.unsupported_gpus(3.7, built)
    assert gpu.unsupported_gpus(3.7, []) == ""  # nothing known: no warning


def test_the_plan_warns_of_gpus_the_cuda_image_cannot_run(monkeypatch):
    from conftest import REPO

    from archbench.plan.campaign import load_campaign_file
    from archbench.plan.submission import campaign_plan
    monkeypatch.chdir(REPO)
    kth = load_campaign_file("config/campaigns/kth-ornl-2019.yaml")
    _, text = campaign_plan(kth.name, kth.measurements, kth.systems)
    warned = {line.split()[2] for line in text.splitlines() if line.startswith("**Warning:**")}
    # Kepler (K420 3.0, K80 3.7) predates TensorFlow 2.21's CUDA build; the V100 does not
    assert warned == {"tegner-k420", "tegner-k80", "kebnekaise-k80"}, text


def test_the_cuda_images_capability_label_is_what_its_test_checks():
    from conftest import REPO

    from archbench.plan.containers import parse_definition
    definition = parse_definition(REPO / "containers/x86_64-cuda.def")
    label = definition.labels["cuda_compute_capabilities"].split()
    checked = re.search(r'== \[([^\]]*)\], c', definition.sections["test"]).group(1)
    assert [c.replace(".", "") for c in label] == re.findall(r'"(\d+)"', checked)
