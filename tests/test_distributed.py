"""Multi-process training for real: 2-rank Horovod (MPI and Gloo) whose ranks must end
with identical weights, and the same Horovod summing torch tensors; MultiWorkerMirrored
with 2 workers, synchronous parameter servers with 2 PS + 2 workers on real data; plus the process identity helpers (the launchers are in test_launch.py).

Horovod tests are marked ``horovod``; without Horovod (or mpirun) they skip, except under
CI (CI=true) where they fail.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from archbench.core.marks import ENV as MARKS_ENV
from archbench.core.marks import read_marks
from archbench.core.record import read_record
from archbench.workloads.launch import RANK_VARIABLES
from archbench.workloads.tfenv import FRAMEWORK_ENV
from archbench.workloads.training import benchmark as train
from archbench.workloads.training import pinning as distributed
from archbench.workloads.training import strategies

SYSTEM = {"launcher": "local", "sockets": 1, "cores_per_socket": 2, "nodes": 1}
TINY = {
    "kind": "train", "model": "small_cnn", "batch_per_process": 4, "intra_threads": 1,
    "inter_threads": 1, "vendor_library_enabled": True, "data": "synthetic", "warmup_steps": 1,
    "measured_steps": 3, "image_size": 32, "num_classes": 10, "data_format": "NHWC",
    "nodes": 1, "processes_per_node": 2, "env": {}, "tuning": {},
}
RUN_TIMEOUT_S = 240


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Skip without ``what``, but fail under CI: CI must run these tests."""
    if not available:
        (pytest.fail if in_ci() else pytest.skip)(f"{what} is not available")


@functools.lru_cache(maxsize=1)
def _horovod_importable() -> bool:
    proc = subprocess.run([sys.executable, "-c", "import horovod.tensorflow as h; "
                           "assert h.mpi_built() and h.gloo_built()"],
                          capture_output=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return proc.returncode == 0


def horovod_ready() -> None:
    """Skip (fail under CI) unless Horovod with MPI and Gloo, and mpirun, are here."""
    require(_horovod_importable(), "Horovod with MPI and Gloo")
    require(shutil.which("mpirun") is not None, "mpirun")


def launch(measurement: dict, tmp_path: Path, *, weights: bool = True, system: dict = SYSTEM) -> dict:
    """Run ``command_for(measurement, system)`` like the supervisor; return the record."""
    out = tmp_path / "rec.json"
    argv = train.command_for(measurement, system) + ["--output", str(out)]
    if weights:
        argv += ["--weights-out", str(tmp_path / "weights")]
    env = {**os.environ, **FRAMEWORK_ENV, "TF_CPP_MIN_LOG_LEVEL": "2",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "OMPI_MCA_rmaps_base_oversubscribe": "1",
           **{k: str(v) for k, v in measurement["env"].items()}}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          start_new_session=True)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return read_record(out)


def assert_identical_weights(directory: Path, ranks: int) -> None:
    files = sorted(directory.glob("rank*.npz"))
    assert [f.name for f in files] == [f"rank{r}.npz" for r in range(ranks)]
    loaded = [np.load(f) for f in files]
    assert len(loaded[0].files) > 0
    for other in loaded[1:]:
        for key in loaded[0].files:
            np.testing.assert_array_equal(loaded[0][key], other[key])


def assert_two_worker_record(r: dict, strategy: str) -> None:
    assert r["status"] == "ok", r["reason"]
    assert r["strategy"] == strategy and r["workers"] == 2
    assert r["nodes"] == 1 and r["processes_per_node"] == 2 and r["global_batch"] == 8
    # throughput = images of ALL workers in the window / window wall time
    assert r["metrics"]["images"]["value"] == 2 * 4 * 3
    assert r["throughput"] == pytest.approx(24 / r["metrics"]["window_s"]["value"])
    assert r["hosts"] == [os.uname().nodename] or len(r["hosts"]) == 1


@pytest.mark.horovod
def test_horovod_mpi_two_ranks_agree(tmp_path):
    horovod_ready()
    m = {**TINY, "strategy": "horovod", "env": {"KMP_BLOCKTIME": "0"},
         "tuning": {"horovod_cycle_time_ms": 2, "horovod_fusion_threshold_bytes": 0}}
    r = launch(m, tmp_path)
    assert_two_worker_record(r, "horovod")
    assert r["metrics"]["horovod_controller"]["value"] == "mpi"
    assert r["metrics"]["replica_weight_spread"]["value"] == 0.0
    assert r["metrics"]["allreduce_tensors"]["value"] == 6  # 3 kernels + 3 biases
    # Horovod's timeline saw the same 6 tensors per step, and without fusion one
    # allreduce operation each
    assert r["metrics"]["allreduce_tensors_timeline"]["value"] == 6
    assert r["metrics"]["allreduces_per_step"]["value"] == 6
    assert r["env"]["HOROVOD_CYCLE_TIME"] == "2" and r["env"]["KMP_BLOCKTIME"] == "0"
    assert r["env"]["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert_identical_weights(tmp_path / "weights", 2)


@pytest.mark.horovod
def test_horovod_gloo_two_ranks_on_real_data_agree(tmp_path):
    """Gloo controller (horovodrun), each rank reading its shard of generated TFRecords."""
    horovod_ready()
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    make_tfrecords(tmp_path / "tfr", images=16, image_size=32, shards=2)
    m = {**TINY, "strategy": "horovod", "data": "real",
         "tuning": {"horovod_controller": "gloo", "horovod_cycle_time_ms": 50}}
    r = launch(m, tmp_path, system={**SYSTEM, "data_dir": str(tmp_path / "tfr")})
    assert_two_worker_record(r, "horovod")
    assert r["data"] == "real" and r["metrics"]["horovod_controller"]["value"] == "gloo"
    # a long cycle with fusion on (the default 64 MiB): a step's 6 gradients ready
    # within a cycle or two go out as one fused allreduce each
    assert r["metrics"]["allreduce_tensors_timeline"]["value"] == 6
    assert 1 <= r["metrics"]["allreduces_per_step"]["value"] <= 3
    assert_identical_weights(tmp_path / "weights", 2)


# Each rank imports both frameworks' Horovod, then sums a torch tensor over the 2 ranks.
TORCH_ALLREDUCE = """
import horovod.tensorflow as hvd_tf
import torch
import horovod.torch as hvd
assert hvd_tf.mpi_built() and hvd_tf.gloo_built(), "horovod.tensorflow without MPI or Gloo"
assert hvd.mpi_built() and hvd.gloo_built(), "horovod.torch without MPI or Gloo"
hvd.init()
total = hvd.allreduce(torch.tensor([hvd.rank() + 1.0, 10.0]), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()}: {total.tolist()}", flush=True)
"""


@pytest.mark.horovod
def test_one_horovod_serves_tensorflow_and_torch():
    """The environment's one Horovod imports for both frameworks, and 2 real torch ranks
    under mpirun sum a tensor."""
    require(importlib.util.find_spec("horovod") is not None, "Horovod")
    require(shutil.which("mpirun") is not None, "mpirun")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    proc = subprocess.run(["mpirun", *root, "-np", "2", "--bind-to", "none", sys.executable, "-c",
                           TORCH_ALLREDUCE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                               "OMPI_MCA_rmaps_base_oversubscribe": "1"},
                          start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # mpirun forwards both ranks' output to one stream: a line may follow another unbroken
    lines = sorted(re.findall(r"rank \d+ of \d+: \[[^\]]*\]", proc.stdout))
    assert lines == ["rank 0 of 2: [3.0, 20.0]", "rank 1 of 2: [3.0, 20.0]"]


@pytest.mark.horovod
def test_horovod_ranks_that_succeed_end_without_the_frameworks_teardown(tmp_path, monkeypatch):
    """Both ranks of a Horovod run that succeeded shut Horovod down (MPI finalised) and end
    without TensorFlow's teardown, which waited seconds on the dataset iterator's threads:
    mpirun exits 0 with the record written, and MPI reports nothing.

    Rank 0 alone writes the record, and ends after it; another rank may end before it is
    written (Horovod's shutdown waits for no rank), which is fine: mpirun, and so the
    supervisor, which reads the record only then, waits for every rank. The order is
    asserted within rank 0 alone: marks of one process come from one clock, whatever the
    clocks of other processes say."""
    horovod_ready()
    monkeypatch.setenv(MARKS_ENV, "1")
    out = tmp_path / "rec.json"
    argv = train.command_for({**TINY, "strategy": "horovod"}, SYSTEM) + ["--output", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          start_new_session=True,
                          env={**os.environ, **FRAMEWORK_ENV, "TF_CPP_MIN_LOG_LEVEL": "2",
                               "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_record(out)["status"] == "ok"
    marks = read_marks(proc.stderr)
    ended = {pid for name, _, pid, _ in marks if name == "ending-at-once"}
    assert len(ended) == 2 and len({pid for _, _, pid, _ in marks}) == 2
    writes = [(t, pid) for name, t, pid, _ in marks if name == "record-written"]
    assert len(writes) == 1, marks
    written, writer = writes[0]
    assert [t >= written for name, t, pid, _ in marks if name == "ending-at-once" and pid == writer] == [True]
    assert "MPI_Finalize" not in proc.stderr and "exiting improperly" not in proc.stderr


def test_multi_worker_mirrored_two_workers_agree(tmp_path):
    r = launch({**TINY, "strategy": "mirrored"}, tmp_path)
    assert_two_worker_record(r, "mirrored")
    assert r["metrics"]["replica_weight_spread"]["value"] == 0.0
    assert_identical_weights(tmp_path / "weights", 2)


def test_synchronous_parameter_servers_two_workers_on_real_data_shards(tmp_path):
    """1 PS + 2 workers, each worker reading its own shard of generated TFRecords; the
    variables spread greedily over two parameter servers. (Synchrony itself:
    test_sync_ps.py; the asynchronous ps_async there too.)"""
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    make_tfrecords(tmp_path / "tfr", images=16, image_size=32, shards=2)
    m = {**TINY, "strategy": "parameter_server", "parameter_servers": 2, "data": "real",
         "variable_update": "parameter_server", "tuning": {"ps_variable_placement": "greedy"}}
    r = launch(m, tmp_path, weights=False, system={**SYSTEM, "data_dir": str(tmp_path / "tfr")})
    assert_two_worker_record(r, "parameter_server")
    assert r["data"] == "real" and r["variable_update"] == "parameter_server"
    assert r["metrics"]["parameter_servers"]["value"] == 2
    assert r["metrics"]["ps_variable_placement"]["value"] == "greedy"
    assert len(r["step_times_s"]) == 3 and r["loss_first"] is not None


# ---------------------------------------------------------------- process identity

def test_launch_rank_from_the_environment(monkeypatch):
    for name in RANK_VARIABLES + ("TF_CONFIG",):
        monkeypatch.delenv(name, raising=False)
    assert strategies.launch_rank("horovod") == 0
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    assert strategies.launch_rank("horovod") == 3
    assert strategies.launch_rank("single") == 0
    cluster = {"worker": ["a:1", "b:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    assert strategies.launch_rank("mirrored") == 0
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {**cluster, "chief": ["c:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert strategies.launch_rank("parameter_server") == 1


def test_pin_cores_restricts_affinity():
    before = os.sched_getaffinity(0)
    try:
        chosen = distributed.pin_cores(1, 0)
        assert os.sched_getaffinity(0) == set(chosen) and len(chosen) == 1
        with pytest.raises(ValueError, match="needs more"):
            distributed.pin_cores(len(before) + 1)
    finally:
        os.sched_setaffinity(0, before)
