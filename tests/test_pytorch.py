"""The PyTorch training loop beside the TensorFlow one: real training processes write the
same record (framework and version, throughput = images of all workers / window, loss,
devices, vendor evidence), bad combinations are refused in one line, the real data is
the TensorFlow pipeline's own TFRecord bytes, DDP and Horovod run 2 real ranks, and a
GPU run without a GPU is a failure record, never a CPU number."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from archbench.core.fields import config_id
from archbench.core.record import read_record
from archbench.workloads import sense
from archbench.workloads.training import benchmark as train
from archbench.workloads.training import frameworks
from archbench.workloads.training.models import LANGUAGE_MODELS, MODELS
from archbench.workloads.training.pytorch import data as torch_data
from archbench.workloads.training.pytorch import models as torch_models

TINY = ["--framework", "pytorch", "--model", "small_cnn", "--batch-per-process", "4", "--image-size", "32",
        "--num-classes", "10", "--warmup-steps", "1", "--steps", "4", "--intra-threads", "1"]


def train_process(out, *extra: str, launcher: tuple[str, ...] = (), timeout: int = 300,
                  env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m archbench.train`` in its own process (as the supervisor starts it)."""
    argv = [*launcher, sys.executable, "-m", "archbench.train", *TINY, *extra, "--output", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_a_pytorch_record_says_what_ran_and_makes_sense(tmp_path):
    done = train_process(tmp_path / "r.json")
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    import torch
    assert (r["status"], r["framework"], r["framework_version"]) == ("ok", "pytorch", torch.__version__)
    assert r["config_id"].endswith("_pytorch") and r["devices"] == ["CPU:0"]
    sense.check(r)  # images = batch x steps, throughput = images / window, steps within it
    assert r["throughput"] == pytest.approx(r["metrics"]["images"]["value"] / r["metrics"]["window_s"]["value"])
    assert len(r["step_times_s"]) == 4 and r["loss_first"] is not None
    # PyTorch's CPU convolutions ran oneDNN: the same probe as TensorFlow's says so
    assert r["vendor_evidence"]["library"] == "onednn" and r["vendor_mismatch"] == ""
    assert r["metrics"]["flops_per_image"]["value"] > 0


def test_onednn_off_is_recorded_from_the_evidence(tmp_path):
    done = train_process(tmp_path / "r.json", "--onednn", "off")
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    assert r["vendor_library_enabled"] is False
    # with torch.backends.mkldnn off no oneDNN convolution runs
    assert not any("conv" in name for name in r["vendor_evidence"]["implementations"]
                   if "gemm" not in name), r["vendor_evidence"]


def test_a_one_process_run_probes_a_step_of_its_own_as_the_child_would(tmp_path):
    """PyTorch switches oneDNN's verbose mode at run time: a one-process run probes one more
    step of its own and starts no probe child (here a child would fail), and sees the same
    implementations, as often, as the probe child of the same configuration."""
    out = tmp_path / "r.json"
    script = ("import sys; from archbench.workloads.training.vendor_evidence import probing; "
              "probing.probe_argv = lambda c: [sys.executable, '-c', 'raise SystemExit(9)']; "
              "from archbench.workloads.training.benchmark import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, *TINY, "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    here = read_record(out)["vendor_evidence"]
    assert here["library"] == "onednn" and here["error"] == "" and "source" not in here
    from archbench.workloads.training.vendor_evidence import probing
    child = probing.probe(train.parse_args([*TINY, "--output", str(out)]))
    assert child["library"] == "onednn", child
    assert {k: v["calls"] for k, v in here["implementations"].items()} == \
        {k: v["calls"] for k, v in child["implementations"].items()}
    assert (here["version"], here["isa"]) == (child["version"], child["isa"])


@pytest.mark.parametrize("bad, says", [
    (["--strategy", "mirrored"], "framework pytorch has no strategy 'mirrored'"),
    (["--strategy", "parameter_server"], "framework pytorch has no strategy 'parameter_server'"),
    (["--framework", "tensorflow", "--strategy", "ddp"], "framework tensorflow has no strategy 'ddp'"),
    (["--framework", "tensorflow", "--loader-workers", "2"], "--loader-workers"),
    (["--framework", "jax"], "invalid choice: 'jax'"),
])
def test_a_combination_the_framework_lacks_is_refused_in_one_line(bad, says, capsys):
    with pytest.raises(SystemExit) as done:
        train.parse_args([*TINY, *bad, "--output", "x"])
    assert done.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_every_model_has_a_pytorch_definition_of_the_same_name():
    assert sorted(torch_models.MODELS) == sorted({**MODELS, **LANGUAGE_MODELS})  # the only one with both
    assert sorted(frameworks.framework("pytorch").model_names()) == sorted(torch_models.MODELS)
    assert frameworks.strategies_of("pytorch") == ["single", "horovod", "ddp", "fsdp2"]


@pytest.mark.parametrize("name", ["small_cnn", "digits_cnn", "alexnet", "resnet50"])
def test_a_model_trains_one_step_at_its_smallest_size(name):
    import torch
    spec = MODELS[name]
    model = torch_models.build_model(name, spec.min_image_size, 10)
    images = torch.rand(2, spec.channels, spec.min_image_size, spec.min_image_size)
    loss = torch.nn.functional.cross_entropy(model(images), torch.tensor([1, 2]))
    loss.backward()
    assert model(images).shape == (2, 10)
    assert torch_models.training_flops(model, (spec.channels, spec.min_image_size, spec.min_image_size)) > 0


def test_config_ids_of_tensorflow_stay_and_pytorch_ones_say_so():
    conf = dict(kind="train", model="resnet50", batch_per_process=64, nodes=1, processes_per_node=1,
                intra_threads=4, inter_threads=1, vendor_library_enabled=True, data="synthetic",
                strategy="single")
    assert config_id(conf) == config_id({**conf, "framework": "tensorflow"}) == \
        "resnet50_b64_N1_p1_t4_i1_vlon_synthetic_single"
    assert config_id({**conf, "framework": "pytorch"}) == "resnet50_b64_N1_p1_t4_i1_vlon_synthetic_single_pytorch"


# ---------------------------------------------------------------- real data

def test_the_tfrecord_reader_gives_the_bytes_tensorflow_parses(tmp_path):
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    paths = make_tfrecords(tmp_path, images=12, image_size=32, shards=2, classes=5)
    import tensorflow as tf
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    for path in paths:
        theirs = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(str(path))]
        ours = [torch_data.example_features(p) for p in torch_data.tfrecord_records(str(path))]
        assert len(ours) == len(theirs) == 6
        for mine, tfs in zip(ours, theirs):
            assert mine["image/encoded"][0] == tfs["image/encoded"].numpy()
            assert mine["image/class/label"] == [int(tfs["image/class/label"])]


def test_each_worker_reads_its_own_shard_and_its_loader_processes_split_it(tmp_path):
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    make_tfrecords(tmp_path, images=8, image_size=16, shards=4, classes=4)
    files = sorted(str(p) for p in tmp_path.glob("train-*"))
    def records(shard: int, shards: int, part: int, parts: int, n: int) -> list[bytes]:
        source = torch_data.ImageNetShards(files, shard=shard, shards=shards, image_size=16,
                                           num_classes=4, seed=1)._records(part, parts)
        return [next(source) for _ in range(n)]
    worker0, worker1 = records(0, 2, 0, 1, 4), records(1, 2, 0, 1, 4)
    assert not set(worker0) & set(worker1)  # disjoint files per worker (2 files each)
    loader_a, loader_b = records(0, 2, 0, 2, 2), records(0, 2, 1, 2, 2)
    assert set(loader_a) | set(loader_b) == set(worker0) and not set(loader_a) & set(loader_b)


def test_real_data_trains_from_the_same_tfrecords_with_loader_workers(tmp_path):
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    make_tfrecords(tmp_path / "tfr", images=64, image_size=32, shards=4, classes=10)
    done = train_process(tmp_path / "r.json", "--data", "real", "--data-dir", str(tmp_path / "tfr"),
                         "--loader-workers", "1", "--vendor-probe", "off")
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    assert (r["status"], r["data"]) == ("ok", "real")
    assert r["metrics"]["loader_workers"]["value"] == 1
    assert r["config_id"].endswith("_real_single_pytorch")


def test_digits_train_to_a_real_accuracy(tmp_path):
    done = train_process(tmp_path / "r.json", "--model", "digits_cnn", "--image-size", "8",
                         "--data", "real", "--batch-per-process", "32", "--steps", "200", "--vendor-probe", "off")
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    assert r["loss_decreased"] is True
    assert r["metrics"]["accuracy"]["value"] > 0.5  # 10 classes: chance is 0.1


# ---------------------------------------------------------------- GPUs

def test_a_gpu_run_without_a_gpu_is_a_failure_record_not_a_cpu_number(tmp_path):
    done = train_process(tmp_path / "r.json", "--device", "gpu", env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == train.EXIT_BENCHMARK_FAILED
    r = read_record(tmp_path / "r.json")
    assert r["status"] == "failed" and r["throughput"] is None
    assert "no GPU visible to PyTorch" in r["reason"] and "Traceback" not in done.stderr
    import torch
    assert (r["framework"], r["device"], r["gpus"]) == ("pytorch", "gpu", 1)
    assert r["framework_version"] == torch.__version__  # read without loading torch


# ---------------------------------------------------------------- two ranks

def mpirun(ranks: int) -> tuple[str, ...]:
    root = ("--allow-run-as-root",) if os.geteuid() == 0 else ()
    return ("mpirun", *root, "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
            "-x", "PATH", "-x", "PYTHONPATH")


def two_rank_record(tmp_path, strategy: str, launcher: tuple[str, ...], env: dict | None = None) -> dict:
    done = train_process(tmp_path / f"{strategy}.json", "--strategy", strategy, "--vendor-probe", "off",
                         "--weights-out", str(tmp_path / "w"), launcher=launcher, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    r = read_record(tmp_path / f"{strategy}.json")
    assert (r["status"], r["strategy"], r["workers"], r["global_batch"]) == ("ok", strategy, 2, 8)
    assert r["metrics"]["images"]["value"] == 8 * 4  # both workers' images in the window
    assert r["metrics"]["replica_weight_spread"]["value"] == 0.0  # replicas stay identical
    after = [np.load(tmp_path / "w" / f"rank{k}.npz") for k in (0, 1)]
    before = np.load(tmp_path / "w" / "init-rank0.npz")
    assert all(np.array_equal(after[0][k], after[1][k]) for k in after[0].files)
    assert any(not np.array_equal(after[0][k], before[k]) for k in before.files)  # it trained
    sense.check(r)
    return r


@pytest.mark.skipif(not __import__("shutil").which("mpirun"), reason="needs OpenMPI (scripts/setup_env.sh)")
def test_ddp_trains_two_ranks_started_by_mpirun(tmp_path, monkeypatch):
    from archbench.workloads.training.strategies.ddp import ADDRESS, free_port
    r = two_rank_record(tmp_path, "ddp", mpirun(2) + ("-x", ADDRESS),
                        env={ADDRESS: f"127.0.0.1:{free_port()}"})
    assert r["metrics"]["ddp_backend"]["value"] == "gloo"


@pytest.mark.horovod
def test_horovod_pytorch_trains_two_ranks_under_mpirun(tmp_path):
    r = two_rank_record(tmp_path, "horovod", mpirun(2))
    assert r["metrics"]["horovod_controller"]["value"] == "mpi"
    assert r["metrics"]["allreduce_bytes"]["value"] > 0


@pytest.mark.horovod
def test_horovod_pytorch_trains_two_ranks_under_the_gloo_controller(tmp_path):
    from archbench.workloads.training.strategies.horovod import horovodrun
    r = two_rank_record(tmp_path, "horovod", (horovodrun(), "--gloo", "-np", "2", "-H", "localhost:2"))
    assert r["metrics"]["horovod_controller"]["value"] == "gloo"


def test_the_ddp_launch_gives_every_rank_the_rendezvous():
    from archbench.workloads.training.strategies import launcher_argv
    measurement = {"strategy": "ddp", "nodes": 1, "processes_per_node": 2}
    argv = launcher_argv(measurement, {"launcher": "local", "cores_per_socket": 2, "sockets": 1},
                         ["python", "-m", "archbench.train"])
    assert argv[0] == "mpirun" and "-np" in argv and argv[argv.index("-np") + 1] == "2"
    address = next(a for a in argv if a.startswith("ARCHBENCH_DDP_ADDRESS="))
    host, port = address.split("=", 1)[1].rsplit(":", 1)
    assert host == "127.0.0.1" and 0 < int(port) < 65536
    srun = launcher_argv({**measurement, "nodes": 2, "processes_per_node": 1},
                         {"launcher": "srun", "cores_per_socket": 2, "sockets": 1}, ["python"])
    assert srun[0] == "srun" and "--nodes=2" in srun and not any("DDP" in a for a in srun)


def test_the_record_json_is_the_tensorflow_one(tmp_path):
    """Both frameworks' records have the same fields (schema-valid, one schema)."""
    done = train_process(tmp_path / "p.json", "--vendor-probe", "off")
    tf_done = subprocess.run([sys.executable, "-m", "archbench.train", *TINY[2:], "--vendor-probe", "off",
                              "--output", str(tmp_path / "t.json")], capture_output=True, text=True,
                             timeout=300)
    assert done.returncode == tf_done.returncode == 0, (done.stderr[-1000:], tf_done.stderr[-1000:])
    p, t = (json.loads((tmp_path / n).read_text()) for n in ("p.json", "t.json"))
    assert set(p) == set(t) and (p["framework"], t["framework"]) == ("pytorch", "tensorflow")
    assert p["config_id"] == t["config_id"] + "_pytorch"


@pytest.mark.parametrize("name", ["small_cnn", "digits_cnn", "alexnet", "resnet50"])
def test_the_parameter_table_of_the_docs_is_what_the_code_builds(name):
    """docs/frameworks.md states each framework's trainable parameters per model."""
    from pathlib import Path

    from archbench.workloads.training.tensorflow.models import build_model
    text = (Path(__file__).resolve().parents[1] / "docs/frameworks.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
    stated_tf, stated_torch = (int(cell.strip().replace(",", "")) for cell in row.split("|")[2:4])
    spec = MODELS[name]
    keras_model = build_model(name, spec.native_image_size, spec.num_classes)
    assert sum(v.shape.num_elements() for v in keras_model.trainable_variables) == stated_tf
    torch_model = torch_models.build_model(name, spec.native_image_size, spec.num_classes)
    assert torch_models.parameter_count(torch_model) == stated_torch


@pytest.mark.parametrize("name, size", [("small_cnn", 32), ("digits_cnn", 8), ("alexnet", 64)])
def test_the_layer_count_of_old_pytorch_equals_the_flop_counter(name, size):
    """PyTorch before 2.1 (Debian's 1.13) has no FlopCounterMode: the per-layer count it
    falls back to gives the same FLOPs for the convolution and dense networks."""
    import torch
    model = torch_models.build_model(name, size, 10)
    shape = (MODELS[name].channels, size, size)
    assert torch_models.training_flops(model, shape) == 3 * torch_models._layer_flops(torch, model, shape, device="cpu") > 0


def test_what_pytorch_1_13_lacks_is_one_line_naming_the_version():
    """torch.compile, fp32_precision and the CPU GradScaler of PyTorch 2 asked of a 1.13
    (a stand-in module without them): one RuntimeError naming the version, no AttributeError."""
    from types import SimpleNamespace

    from archbench.workloads.training.pytorch import backends, loop
    parse_args = train.parse_args
    old = SimpleNamespace(__version__="1.13.1", amp=SimpleNamespace(),
                          backends=SimpleNamespace(mkldnn=SimpleNamespace(), cuda=None, cudnn=None))
    config = parse_args([*TINY, "--math-mode", "bf16", "--graph", "compiled", "--output", "x.json"])
    with pytest.raises(RuntimeError, match=r"^math_mode bf16: PyTorch 1\.13\.1 has no fp32_precision"):
        loop.set_math_mode(old, config)
    with pytest.raises(RuntimeError, match=r"^graph compiled: PyTorch 1\.13\.1 has no torch\.compile"):
        loop.compiled(old, config, object())
    with pytest.raises(RuntimeError, match=r"^precision fp16: PyTorch 1\.13\.1 has no GradScaler for cpu"):
        backends.grad_scaler(old, "cpu")
    loop.set_math_mode(old, parse_args([*TINY, "--output", "x.json"]))  # strict: nothing
