"""Training worker: CLI, records of single-process runs (synthetic, real TFRecords, digits),
loss sanity, failure records, and the launcher argv of every strategy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from archbench.core.failures import error_summary
from archbench.core.record import read_record
from archbench.plan import submission as plan
from archbench.workloads.launch import LaunchError
from archbench.workloads.training import benchmark as train
from archbench.workloads.training import outcome

# In-process runs share one TensorFlow context: keep the default thread pools (0/0).
TINY = ["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "32", "--num-classes", "10",
        "--warmup-steps", "1", "--steps", "3", "--intra-threads", "0", "--inter-threads", "0"]


def run_main(tmp_path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "rec.json"
    code = train.main([*TINY, *extra, "--output", str(out)])
    return code, read_record(out)


def test_the_runs_framework_objects_outlive_the_writing_of_its_record(tmp_path, monkeypatch):
    """Destroying the run's dataset iterator can wait seconds: it happens after the record
    is written (a one-process command line run then ends without it), and main lets go of
    what it held."""
    held_at_write = []
    write = train.write_record
    monkeypatch.setattr(train, "write_record",
                        lambda path, record: (held_at_write.append(len(outcome._HELD)), write(path, record)))
    code, record = run_main(tmp_path)
    assert code == 0 and record["status"] == "ok"
    assert held_at_write and held_at_write[0] >= 1 and outcome._HELD == []


def test_defaults_come_from_the_model():
    args = train.parse_args(["--model", "digits_cnn", "--batch-per-process", "8", "--output", "x"])
    assert (args.image_size, args.num_classes, args.learning_rate) == (8, 10, 0.1)
    args = train.parse_args(["--model", "resnet50", "--batch-per-process", "8", "--output", "x"])
    assert (args.image_size, args.num_classes, args.learning_rate) == (224, 1000, 0.01)


@pytest.mark.parametrize("bad", [["--batch-per-process", "0"], ["--model", "nonesuch"],
                                 ["--strategy", "parameter_server", "--parameter-servers", "0"],
                                 ["--nodes", "0"]])
def test_cli_rejects_bad_options(bad):
    with pytest.raises(SystemExit):
        train.parse_args([*TINY, *bad, "--output", "x"])


@pytest.mark.parametrize("bad, flag", [
    (["--strategy", "parameter_server", "--variable-update", "bogus"], "--variable-update bogus"),
    (["--strategy", "horovod", "--variable-update", "parameter_server"], "--variable-update"),
    (["--strategy", "parameter_server", "--parameter-servers", "3", "--nodes", "1",
      "--processes-per-node", "2"], "--parameter-servers 3"),
])
def test_cli_names_the_bad_parameter_server_option(bad, flag, capsys):
    with pytest.raises(SystemExit):
        train.parse_args([*TINY, *bad, "--output", "x"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in error


@pytest.mark.parametrize("losses,expected", [
    ([3.0, 2.9, 2.5, 2.4, 2.2, 2.0], True),
    ([2.0, 2.5, 1.9, 2.6, 2.4, 2.5], False),
    ([2.0, 1.0], True), ([1.0, 1.0], False), ([1.0], None),
    ([2.0, float("nan"), 1.0], False),
    ([3.0, 1.0, 2.9, 1.1, 2.0, 1.2, 2.1, 1.0, 1.5], True),  # noisy but trending down
])
def test_loss_trend(losses, expected):
    assert outcome.loss_decreased(losses) is expected


def test_synthetic_run_writes_a_complete_record(tmp_path):
    code, r = run_main(tmp_path, "--steps", "9")
    assert code == 0 and r["status"] == "ok"
    assert r["strategy"] == "single" and r["workers"] == 1 and r["global_batch"] == 4
    assert len(r["step_times_s"]) == 9 and r["measured_steps"] == 9
    window = r["metrics"]["window_s"]["value"]
    assert r["throughput"] == pytest.approx(4 * 9 / window) and r["throughput_unit"] == "img/s"
    assert r["metrics"]["images"]["value"] == 36
    assert r["metrics"]["flops_per_image"]["value"] > 0
    assert r["loss_decreased"] is True  # fixed seed, one fixed batch: the loss must fall
    assert r["hosts"] and r["framework_version"].startswith("2.")


def test_a_real_record_makes_sense_and_one_off_its_steps_does_not(tmp_path):
    """The window holds the step times: throughput at most their rate, and not far below
    (archbench.workloads.sense); a record raised above that rate, or far below, is refused."""
    import math

    from archbench.core.record import RecordError
    from archbench.workloads.sense import check as validate
    code, r = run_main(tmp_path, "--steps", "5")
    assert code == 0 and r["status"] == "ok"
    steps_rate = r["global_batch"] * 5 / math.fsum(r["step_times_s"])
    assert r["throughput"] <= steps_rate
    for wrong in (steps_rate * 1.05, r["throughput"] / (1.3 + 1 / math.fsum(r["step_times_s"]))):
        window = {"window_s": {"value": r["global_batch"] * 5 / wrong, "unit": "s"}}
        with pytest.raises(RecordError, match="^record: throughput: .* its step times' rate"):
            validate({**r, "throughput": wrong, "metrics": {**r["metrics"], **window}})


def test_real_data_run_from_generated_tfrecords(tmp_path):
    from archbench.workloads.training.tensorflow.data import make_tfrecords
    make_tfrecords(tmp_path / "tfr", images=16, image_size=40, shards=2)
    code, r = run_main(tmp_path, "--data", "real", "--data-dir", str(tmp_path / "tfr"))
    assert code == 0 and r["status"] == "ok" and r["data"] == "real"
    assert r["config_id"].endswith("_real_single")


def test_digits_run_records_accuracy(tmp_path):
    out = tmp_path / "rec.json"
    code = train.main(["--model", "digits_cnn", "--batch-per-process", "32", "--warmup-steps", "1",
                       "--steps", "3", "--intra-threads", "0", "--inter-threads", "0",
                       "--data", "real", "--output", str(out)])
    r = read_record(out)
    assert code == 0 and r["image_size"] == 8
    assert 0.0 <= r["metrics"]["accuracy"]["value"] <= 1.0
    assert r["metrics"]["accuracy"]["unit"] == "fraction"


def test_real_data_without_a_directory_is_a_failure_record(tmp_path):
    code, r = run_main(tmp_path, "--data", "real")
    assert code == train.EXIT_BENCHMARK_FAILED
    assert r["status"] == "failed" and r["throughput"] is None
    assert "DataError" in r["reason"] and "data directory" in r["reason"]


def test_impossible_configuration_gives_a_failure_record(tmp_path):
    out = tmp_path / "rec.json"
    code = train.main(["--model", "inception_v4", "--batch-per-process", "2", "--image-size", "32",
                       "--output", str(out), "--intra-threads", "0", "--inter-threads", "0"])
    r = read_record(out)
    assert code == train.EXIT_BENCHMARK_FAILED
    assert r["status"] == "failed" and "image_size >= 75" in r["reason"]
    assert r["model"] == "inception_v4" and r["throughput"] is None


def test_nchw_without_onednn_fails_clearly(tmp_path):
    """Plain TensorFlow CPU kernels have no NCHW convolutions: a failure record says so."""
    out = tmp_path / "rec.json"
    proc = subprocess.run([sys.executable, "-m", "archbench.train", *TINY, "--onednn", "off",
                           "--data-format", "NCHW", "--output", str(out)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == train.EXIT_BENCHMARK_FAILED
    r = read_record(out)
    assert r["status"] == "failed" and "NCHW is not supported" in r["reason"]
    assert "NCHW is not supported" in proc.stderr


def test_error_summary_finds_the_real_error():
    exc = ValueError("in user code:\n\n  File x, line 1\n    foo\n\n  ValueError: the cause\n")
    assert error_summary(exc) == "ValueError: in user code: ... ValueError: the cause"
    assert error_summary(RuntimeError("one line")) == "RuntimeError: one line"


# ---------------------------------------------------------------- command_for

MEASUREMENT = {
    "kind": "train", "model": "resnet50", "batch_per_process": 32, "intra_threads": 4,
    "inter_threads": 1, "vendor_library_enabled": True, "data": "synthetic",
    "warmup_steps": 2, "measured_steps": 5, "image_size": 224, "num_classes": 1000,
    "data_format": "NHWC", "strategy": "single", "nodes": 1, "processes_per_node": 1,
    "env": {"KMP_BLOCKTIME": "0"}, "tuning": {},
}
SYSTEM = {"launcher": "local", "sockets": 2, "cores_per_socket": 4, "nodes": 4,
          "data_dir": "/data/imagenet"}


def m_(**kw) -> dict:
    return {**MEASUREMENT, **kw}


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_single_process_argv_is_the_worker_itself():
    argv = train.command_for(m_(), SYSTEM)
    assert argv[:3] == [sys.executable, "-m", "archbench.train"]
    assert value(argv, "--intra-threads") == "4" and value(argv, "--strategy") == "single"
    assert "--data-dir" not in argv
    real = train.command_for(m_(data="real"), SYSTEM)
    assert value(real, "--data-dir") == "/data/imagenet"
    assert value(train.command_for(m_(vendor_library_enabled=False), SYSTEM), "--onednn") == "off"
    pinned = train.command_for(m_(tuning={"cores": 3}), SYSTEM)
    assert value(pinned, "--cores") == "3"


def test_horovod_local_uses_mpirun_with_environment_on_every_rank():
    m = m_(strategy="horovod", processes_per_node=2,
           tuning={"horovod_cycle_time_ms": 2.5, "horovod_fusion_threshold_bytes": 1048576})
    argv = train.command_for(m, SYSTEM)
    assert argv[0] == "mpirun" and value(argv, "-np") == "2"
    assert "--oversubscribe" in argv and value(argv, "--bind-to") == "none"
    assert "TF_USE_LEGACY_KERAS=1" in argv and "KMP_BLOCKTIME=0" in argv
    worker = argv[argv.index(sys.executable):]
    assert value(worker, "--strategy") == "horovod" and value(worker, "--processes-per-node") == "2"
    assert value(worker, "--horovod-cycle-time") == "2.5"
    assert value(worker, "--horovod-fusion-threshold") == "1048576"


def test_horovod_on_a_cluster_with_mpirun_binds_cores_per_rank():
    argv = train.command_for(m_(strategy="horovod", nodes=2, processes_per_node=4),
                             {**SYSTEM, "launcher": "mpirun"})
    assert value(argv, "-np") == "8" and value(argv, "--map-by") == "ppr:4:node:PE=2"


def test_horovod_under_slurm_uses_srun():
    argv = train.command_for(m_(strategy="horovod", nodes=2, processes_per_node=4),
                             {**SYSTEM, "launcher": "srun"})
    assert argv[0] == "srun"
    assert {"--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--cpus-per-task=2"} <= set(argv)
    assert value(argv, "--nodes") == "2"  # the worker's own --nodes flag


def test_gloo_uses_horovodrun_on_one_node_only():
    m = m_(strategy="horovod", processes_per_node=2, tuning={"horovod_controller": "gloo"})
    argv = train.command_for(m, SYSTEM)
    assert argv[0].endswith("horovodrun") and argv[1:3] == ["--gloo", "-np"]
    assert value(argv, "-H") == "localhost:2"
    with pytest.raises(LaunchError, match="Gloo"):
        train.command_for({**m, "nodes": 2}, {**SYSTEM, "launcher": "mpirun"})


def test_tf_strategies_spawn_locally_and_srun_on_clusters():
    ps = m_(strategy="parameter_server", processes_per_node=2, parameter_servers=3,
            variable_update="ps_async")
    argv = train.command_for(ps, SYSTEM)
    assert argv[:4] == [sys.executable, "-m", "archbench.workloads.spawn", "spawn"]
    assert value(argv, "--workers") == "2" and value(argv, "--ps") == "3" and "--chief" in argv
    assert argv.count(sys.executable) == 1  # the supervisor inserts containers there
    tail = argv[argv.index("--") + 1:]
    assert tail[:2] == ["-m", "archbench.train"] and value(tail, "--parameter-servers") == "3"
    assert value(tail, "--variable-update") == "ps_async"
    srun = train.command_for({**ps, "nodes": 2}, {**SYSTEM, "launcher": "srun"})
    assert "--ntasks=8" in srun and "--overcommit" in srun  # 4 workers + 3 PS + chief
    mirrored = train.command_for(m_(strategy="mirrored", processes_per_node=2), SYSTEM)
    assert value(mirrored, "--workers") == "2" and "--chief" not in mirrored
    with pytest.raises(LaunchError, match="srun"):
        train.command_for(m_(strategy="mirrored", nodes=2), {**SYSTEM, "launcher": "mpirun"})


def test_synchronous_parameter_servers_beside_the_workers_or_on_nodes_of_their_own():
    sync = m_(strategy="parameter_server", nodes=2, parameter_servers=1,
              variable_update="distributed_replicated", tuning={"ps_variable_placement": "greedy"})
    local = train.command_for({**sync, "nodes": 1, "processes_per_node": 2}, SYSTEM)
    assert value(local, "--workers") == "2" and value(local, "--ps") == "1"
    assert "--chief" not in local  # worker 0 writes the record
    srun_system = {**SYSTEM, "launcher": "srun", "nodes": 4, "runtime_minutes": 10}
    beside = train.command_for(sync, srun_system)
    assert value(beside, "--variable-update") == "distributed_replicated"
    assert value(beside, "--ps-variable-placement") == "greedy"
    # 2 workers + 1 PS on the workers' 2 nodes, sharing their cores
    assert {"--nodes=2", "--ntasks=3", "--overcommit"} <= set(beside)
    assert plan.job_resources(sync, srun_system)["nodes"] == 2
    separate = {**sync, "tuning": {"ps_placement": "separate"}}
    own = train.command_for(separate, srun_system)
    assert {"--nodes=3", "--ntasks=3"} <= set(own) and "--overcommit" not in own
    resources = plan.job_resources(separate, srun_system)  # the plan counts the PS node
    assert (resources["nodes"], resources["tasks"]) == (3, 3)
    # one worker + its PS is still a multi-task srun step (run from the batch step)
    assert plan.job_resources({**separate, "nodes": 1}, srun_system)["mpi"] == "srun"
    with pytest.raises(LaunchError, match="srun"):
        train.command_for({**separate, "nodes": 1}, SYSTEM)


def test_impossible_launches_are_refused():
    with pytest.raises(LaunchError, match="one node"):
        train.command_for(m_(strategy="horovod", nodes=2), SYSTEM)
    with pytest.raises(LaunchError, match="one process"):
        train.command_for(m_(processes_per_node=2), SYSTEM)
    with pytest.raises(ValueError, match="placeholder"):
        train.command_for(m_(best_of="hybrid"), SYSTEM)


def test_command_runs_under_the_supervisor_contract(tmp_path):
    """The argv plus --output is a complete worker invocation (checked by argparse)."""
    argv = train.command_for(m_(model="small_cnn", image_size=32), SYSTEM)
    args = train.parse_args(argv[3:] + ["--output", str(tmp_path / "r.json")])
    assert args.model == "small_cnn" and args.nodes == 1
    assert json.dumps(argv)  # plain strings only
