"""The supervisor: every run leaves exactly one valid record, whatever the worker does."""

import json
import sys

import pytest

from archbench.core.failures import exit_failure
from archbench.core.record import raw_path, read_record
from archbench.execute import supervisor as run
from archbench.execute.specfiles import digest, spec_text, write_specs
from archbench.plan.campaign import config_id, load_campaign

SYSTEM = {"name": "local", "arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2,
          "threads_per_core": 1, "runtime_minutes": 5, "container_runtime": "none",
          "launcher": "local", "vendor_library": "onednn", "env": {}}


def measurement(**overrides):
    cfg = {"campaign": "t", "systems": ["local"],
           "system_definitions": {"local": {k: v for k, v in SYSTEM.items() if k != "name"}},
           "experiments": {"e": {"type": "thread_scaling", "models": ["small_cnn"],
                                 "batch_per_process": [4], "threads": [1], "repetitions": 1,
                                 "image_size": 32, "num_classes": 10, "warmup_steps": 1,
                                 "steps": 2}}}
    m = load_campaign(cfg).measurements[0]
    m.update(overrides)
    m["global_batch"] = m["batch_per_process"] * m["workers"]  # as planning derives it
    m["config_id"] = config_id(m)
    return m


def supervise(tmp_path, m):
    out = tmp_path / "raw" / "rep0.json"
    record = run.supervise(m, SYSTEM, output=out, log_path=tmp_path / "logs" / "rep0.worker.log")
    assert read_record(out) == record
    assert not list(out.parent.glob(".*"))  # no scratch file left behind
    return record


def test_successful_run_carries_identity_and_provenance(tmp_path):
    r = supervise(tmp_path, measurement())
    assert r["status"] == "ok" and r["throughput"] > 0 and r["throughput_unit"] == "img/s"
    assert r["experiment"] == "e" and r["system"] == "local" and r["run_id"].endswith("/rep0")
    assert r["framework_version"].startswith("2.") and r["cpu_model"]
    assert len(r["step_times_s"]) == 2 and r["config_hash"]


def test_worker_error_becomes_failure_record(tmp_path):
    r = supervise(tmp_path, measurement(image_size=4))  # below the model's minimum input
    assert r["status"] == "failed" and r["throughput"] is None
    assert "image_size" in r["reason"]


def test_out_of_memory_is_recorded_as_oom(tmp_path):
    m = measurement(model="alexnet", image_size=224, batch_per_process=1024,
                    memory_limit_mb=3000)
    r = supervise(tmp_path, m)
    assert r["status"] == "oom" and r["throughput"] is None
    assert "OOM" in r["reason"] or "memory" in r["reason"].lower()


def test_timeout_is_recorded_and_the_worker_killed(tmp_path):
    r = supervise(tmp_path, measurement(timeout_minutes=0.02))
    assert r["status"] == "timeout" and "wall time" in r["reason"]


def test_crash_without_record_is_classified(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "worker_command", lambda m, s: [
        sys.executable, "-c", "import sys; print('segfault in kernel', file=sys.stderr); sys.exit(7)"])
    r = supervise(tmp_path, measurement())
    assert r["status"] == "failed" and "exit 7" in r["reason"] and "segfault" in r["reason"]


def test_a_worker_record_that_makes_no_sense_becomes_a_failure(tmp_path, monkeypatch):
    """A worker that exits 0 with a record whose throughput disagrees with its own steps
    leaves a failure record naming why, never an ok number."""
    from test_sense import train_record
    nonsense = train_record(throughput=640 / 5.1 * 3)  # three times what its steps allow
    script = f"import sys; open(sys.argv[sys.argv.index('--output') + 1], 'w').write({json.dumps(nonsense)!r})"
    monkeypatch.setattr(run, "worker_command", lambda m, s: [sys.executable, "-c", script])
    r = supervise(tmp_path, measurement())
    assert r["status"] == "failed" and r["throughput"] is None
    assert "its record was refused" in r["reason"] and "throughput" in r["reason"]


def test_failed_horovod_setting_is_still_named(tmp_path, monkeypatch):
    """A failure record of a Horovod tuning run carries the setting it was given, so the
    tuning table names the setting that failed."""
    monkeypatch.setattr(run, "worker_command", lambda m, s: [sys.executable, "-c", "raise SystemExit(3)"])
    m = measurement(tuning={"horovod_cycle_time_ms": 20, "horovod_fusion_threshold_bytes": 0})
    r = supervise(tmp_path, m)
    assert r["status"] == "failed"
    assert r["metrics"] == {"horovod_cycle_time": {"value": 20, "unit": "ms"},
                            "horovod_fusion_threshold": {"value": 0, "unit": "B"}}
    assert supervise(tmp_path, measurement())["metrics"] == {}  # none given, none named


def test_failed_run_names_its_pinned_cores_and_environment(tmp_path, monkeypatch):
    """A failure record of an inter/intra sweep run carries the cores it was pinned to and
    the environment it was given (MKL settings), as a worker's record does, so the sweep
    tables place the failure under the right MKL setting."""
    monkeypatch.setattr(run, "worker_command", lambda m, s: [sys.executable, "-c", "raise SystemExit(3)"])
    m = measurement(tuning={"cores": 2}, env={"KMP_BLOCKTIME": "0"})
    r = supervise(tmp_path, m)
    assert r["status"] == "failed"
    assert r["metrics"] == {"cores": {"value": 2, "unit": "cores"}}
    assert r["env"]["KMP_BLOCKTIME"] == "0"


def test_killed_worker_is_classified_oom(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "worker_command", lambda m, s: [
        sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    r = supervise(tmp_path, measurement())
    assert r["status"] == "oom" and "exit -9" in r["reason"]


def test_retries_rerun_a_failed_worker(tmp_path, monkeypatch):
    counter = tmp_path / "attempts"
    good = measurement()
    # First attempt fails; the second writes a valid record through the real train CLI.
    script = (f"import pathlib, subprocess, sys; p = pathlib.Path({str(counter)!r}); "
              "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
              "sys.exit(5) if n == 0 else sys.exit(subprocess.call("
              f"{run.worker_command(good, SYSTEM)!r} + sys.argv[1:]))")
    monkeypatch.setattr(run, "worker_command", lambda m, s: [sys.executable, "-c", script])
    r = supervise(tmp_path, {**good, "retries": 1})
    assert counter.read_text() == "2" and r["status"] == "ok"


def test_cli_writes_record_and_exits_zero_on_failure(tmp_path):
    spec = json.dumps({"measurement": measurement(image_size=4), "system": SYSTEM})
    out = tmp_path / "r.json"
    assert run.main(["--spec", spec, "--output", str(out), "--log", str(tmp_path / "w.log")]) == 0
    assert read_record(out)["status"] == "failed"


def test_cli_takes_its_spec_from_a_planned_spec_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    planned = {"measurement": measurement(image_size=4), "system": SYSTEM}
    write_specs([spec_text(planned)], tmp_path / "specs")
    spec_file = tmp_path / "specs" / f"{digest(spec_text(planned))}.json"
    out = f"results/{raw_path(planned['measurement'])}"
    argv = ["--spec-file", str(spec_file), "--log", "w.log", "--output"]
    assert run.main([*argv, out]) == 0
    # its own record (image_size 4 fails), also given as an absolute path
    assert read_record(tmp_path / out)["status"] == "failed"
    assert run.main([*argv, str(tmp_path / out)]) == 0
    with pytest.raises(SystemExit, match=r"the spec of raw/.*, not of results/raw/missing.json"):
        run.main([*argv, "results/raw/missing.json"])
    assert not (tmp_path / "results/raw/missing.json").exists()


@pytest.mark.parametrize("log, status", [
    ("srun: error: task 1 launch failed: Unspecified error\nsrun: error: n1: task 0: Killed",
     "failed"),
    ("slurmstepd: error: *** STEP 4.0 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***",
     "timeout"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=5.0. Some of the step tasks "
     "have been OOM Killed.", "oom"),
    ("", "oom"),
])
def test_killed_step_is_classified_by_what_slurm_said(log, status):
    assert exit_failure(137, log)[0] == status


def test_a_step_ended_by_one_task_names_that_task_and_its_error_before_the_kill():
    """kill-on-bad-exit: the task that failed first, then srun terminating the rest; the
    reason keeps the cause, not only the last lines (which are the others' termination)."""
    log = "\n".join([
        "I0000 00:00:1.0 port.cc:153] oneDNN custom operations are on.",
        "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
        "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer",
        "srun: error: n1: task 0: Exited with exit code 1",
        "srun: launch/slurm: _step_signal: Terminating StepId=52.0",
        "srun: error: n2: task 1: Terminated", "srun: Force Terminated StepId=52.0"])
    status, reason = exit_failure(143, log)
    assert status == "failed" and reason == (
        "exit 143: RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer"
        " | srun: error: n1: task 0: Exited with exit code 1 | ... | srun: launch/slurm: "
        "_step_signal: Terminating StepId=52.0 | srun: error: n2: task 1: Terminated | "
        "srun: Force Terminated StepId=52.0")
    # a cause among the last lines is not said twice; a log without one keeps its tail
    assert exit_failure(1, "a\nValueError: bad\nb")[1] == "exit 1: a | ValueError: bad | b"
    assert exit_failure(1, "E0000 cuda.cc:52] failed call to cuInit: INTERNAL: x\nend")[1] == \
        "exit 1: E0000 cuda.cc:52] failed call to cuInit: INTERNAL: x | end"


def test_an_inherited_tf_config_does_not_reach_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["elsewhere:1"]}}')
    monkeypatch.setattr(run, "worker_command", lambda m, s: [
        sys.executable, "-c", "import os, sys; sys.exit(3 if 'TF_CONFIG' in os.environ else 4)"])
    r = supervise(tmp_path, measurement())
    assert r["status"] == "failed" and "exit 4" in r["reason"]


@pytest.mark.parametrize("spec, line", [
    ("", "--spec is not JSON"),
    ("[1]", "--spec must be a JSON object"),
    ('{"measurement": {}}', "--spec must be a JSON object"),
])
def test_a_bad_inline_spec_is_one_line_and_no_record(tmp_path, spec, line):
    out = tmp_path / "rep0.json"
    with pytest.raises(SystemExit, match=line):
        run.main(["--spec", spec, "--log", str(tmp_path / "w.log"), "--output", str(out)])
    assert not out.exists()
