"""Vendor-library evidence: oneDNN verbose parsing (x86_64 captured, aarch64 ACL and
reference fixtures), the declared-vs-evidence check, the probe after a real tiny training
run (flag on and off, through the supervisor too), the probe of a step in the measured
process, repetitions stating the evidence an earlier repetition's probe gathered, and the
vendor_evidence table."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from archbench.core.record import read_record, write_record
from archbench.execute import supervisor as run
from archbench.results.collect import flatten, records_to_frame
from archbench.results.tables import TABLES, build_table
from archbench.workloads.training import benchmark as train
from archbench.workloads.training.vendor_evidence import library, onednn_verbose, probing, reuse

DATA = Path(__file__).parent / "data"
TINY = ["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "32", "--num-classes", "10",
        "--warmup-steps", "1", "--steps", "2", "--intra-threads", "0", "--inter-threads", "0"]


def fixture(name: str) -> str:
    return (DATA / name).read_text()


def exec_times(lines: list[str], needle: str) -> float:
    """Summed last field of the exec lines containing ``needle`` (counted independently)."""
    return sum(float(line.rsplit(",", 1)[1]) for line in lines
               if ",exec," in line and needle in line)


# ------------------------------------------------------------------ parsing fixtures
def test_aarch64_acl_fixture_shows_onednn_with_acl_and_its_reference_share():
    e = onednn_verbose.parse_verbose(fixture("onednn-aarch64-acl.txt"))
    assert e["library"] == "onednn+acl"
    assert e["version"] == "3.6.2" and e["isa"].startswith("AArch64")
    assert {"gemm:acl", "indirect_gemm:acl", "acl", "gemm:ref", "ref:any", "jit:uni"} == set(
        e["implementations"])
    # the header's sums: 10 ms in all, 2.5 ms reference, creation lines not counted
    assert sum(i["ms"] for i in e["implementations"].values()) == pytest.approx(10.0)
    assert e["reference_share"] == pytest.approx(0.25)
    assert e["optimized_share"] == pytest.approx(0.75)
    assert e["implementations"]["gemm:acl"] == {"calls": 2, "ms": 3.25, "share": 0.325}
    assert e["gemm_api_share"] == 0


def test_aarch64_without_acl_is_onednn_mostly_reference():
    e = onednn_verbose.parse_verbose(fixture("onednn-aarch64-noacl.txt"))
    assert e["library"] == "onednn" and e["version"] == "2.7.3"
    assert e["reference_share"] == pytest.approx(0.8)
    assert e["implementations"]["gemm:ref"]["calls"] == 2
    assert library.mismatch("onednn-acl", True, e) == "declared onednn-acl, evidence onednn"


def test_x86_probe_counts_only_the_probe_step():
    text = fixture("onednn-x86_64-probe.txt")
    _, step = onednn_verbose.probe_lines(text)
    every_exec = [line for line in text.splitlines() if ",exec," in line]
    e = onednn_verbose.parse_verbose(text)
    calls = sum(i["calls"] for i in e["implementations"].values())
    assert calls == sum(",exec," in line for line in step) < len(every_exec)
    assert e["library"] == "onednn" and e["version"] == "3.5.0"
    api = exec_times(step, ",gemm_api,")
    total = exec_times(step, "")
    assert e["gemm_api_share"] == pytest.approx(api / total)
    assert e["optimized_share"] + e["reference_share"] + e["gemm_api_share"] == pytest.approx(1.0)


def test_mkldnn_v0_lines_without_engine_and_unknown_lines():
    text = ("mkldnn_verbose,info,Intel MKL-DNN v0.21.3 (commit N/A)\n"
            "mkldnn_verbose,exec,convolution,jit:avx2,forward_training,fsrc:nchw,,mb1,1.5\n"
            "some other program output\n"
            "onednn_verbose,graph,exec,cpu,100002,conv,,1.0\n")
    e = onednn_verbose.parse_verbose(text)
    assert e["version"] == "0.21.3" and list(e["implementations"]) == ["jit:avx2"]
    assert e["library"] == "onednn" and e["optimized_share"] == 1.0


def test_nothing_executed_is_library_none_without_shares():
    e = onednn_verbose.parse_verbose("onednn_verbose,info,oneDNN v3.5.0 (commit N/A)\n")
    assert e["library"] == "none" and e["implementations"] == {}
    assert e["optimized_share"] is None and e["reference_share"] is None


@pytest.mark.parametrize("name, kind", [("gemm:ref", "reference"), ("ref:any", "reference"),
                                        ("ref_fused_convolution:any", "reference"),
                                        ("brg_conv_fwd:avx2", "optimized"),
                                        ("indirect_gemm:acl", "optimized"),
                                        ("jit:uni", "optimized"), ("gemm_api", "api")])
def test_classify(name, kind):
    assert library.classify(name) == kind


def test_armpl_needs_blas_execution_and_libarmpl():
    assert library.library_of(["gemm:blas"], ["libarmpl_lp64.so"]) == "armpl"
    assert library.library_of(["gemm:blas"], []) == "onednn"
    assert library.library_of(["gemm_api"], ["libarmpl_lp64.so"]) == "none"  # loaded is not ran


# ------------------------------------------------------------------ declared vs evidence
def test_a_record_states_the_library_that_ran_not_the_declared_one():
    acl = onednn_verbose.parse_verbose(fixture("onednn-aarch64-acl.txt"))
    nothing = {**acl, "library": "none", "loaded_libraries": ["libarmpl_lp64.so"]}
    assert library.recorded_library("armpl", True, acl) == "onednn-acl"
    assert library.recorded_library("onednn-acl", True, acl) == "onednn-acl"
    assert library.recorded_library("armpl", False, acl) == "armpl"  # off: the flag's own mismatch
    assert library.recorded_library("armpl", True, nothing) == "armpl"  # no trace: flagged, kept
    assert library.recorded_library("armpl", True, None) == "armpl"  # not probed


def test_mismatch_rules():
    acl = onednn_verbose.parse_verbose(fixture("onednn-aarch64-acl.txt"))
    eigen = {**acl, "library": "none", "loaded_libraries": ["libarmpl_lp64.so"]}
    assert library.mismatch("onednn-acl", True, acl) == ""
    assert library.mismatch("armpl", True, acl) == "declared armpl, evidence onednn+acl"
    assert "no oneDNN primitive ran" in library.mismatch("armpl", True, eigen)
    assert "libarmpl_lp64.so" in library.mismatch("armpl", True, eigen)
    assert library.mismatch("onednn", False, acl) == "vendor library off, but onednn+acl primitives ran"
    assert library.mismatch("onednn", False, eigen) == ""
    assert library.mismatch("mkl", True, {**acl, "library": "onednn"}) == ""  # MKL-DNN is oneDNN
    assert library.mismatch("onednn", True, probing.failed_evidence("probe exited 1")) == ""


def test_failed_or_slow_probe_never_fails_the_run(monkeypatch):
    config = train.parse_args([*TINY, "--output", "x"])
    monkeypatch.setattr(probing, "probe_argv", lambda c: [sys.executable, "-c", "raise SystemExit(3)"])
    e = probing.probe(config)
    assert e["library"] is None and e["error"].startswith("probe exited 3")
    monkeypatch.setattr(probing, "probe_argv", lambda c: [sys.executable, "-c",
                                                     "import time; time.sleep(30)"])
    assert "exceeded" in probing.probe(config, timeout_s=0.5)["error"]


def test_a_probe_child_never_waits_for_its_parent_to_read(monkeypatch):
    """The child writes to files: a megabyte of output (more than a pipe holds) before its
    markers does not stall it while the parent, importing its framework, reads nothing."""
    config = train.parse_args([*TINY, "--output", "x"])
    script = f"print('x' * 1_000_000); print({onednn_verbose.PROBE_BEGIN!r}); print({onednn_verbose.PROBE_END!r})"
    monkeypatch.setattr(probing, "probe_argv", lambda c: [sys.executable, "-c", script])
    child = probing.ProbeChild(config, timeout_s=30)
    deadline = time.monotonic() + 30
    while child.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child.running  # exited before anyone read its output
    evidence = child.evidence()
    assert not (evidence["error"] or "").startswith(("probe exited", "probe exceeded"))


def test_a_run_that_fails_leaves_no_probe_child_running(monkeypatch):
    """A TensorFlow run starts its probe child before importing TensorFlow; when the run
    fails before it waits for the child, the child is killed, not left to share the CPU
    with the next measurement."""
    from archbench.workloads.training import outcome
    from archbench.workloads.training.tensorflow import loop as tf_loop
    config = train.parse_args([*TINY, "--output", "x"])
    monkeypatch.setattr(probing, "probe_argv", lambda c: [sys.executable, "-c", "import time; time.sleep(60)"])
    started = []
    early = outcome.early_probe
    monkeypatch.setattr(outcome, "early_probe", lambda c: started.append(early(c)) or started[-1])

    def fail(config, **kwargs):
        assert started[0].running  # the child runs while the model is built
        raise RuntimeError("model build failed")
    monkeypatch.setattr(tf_loop, "train", fail)
    with pytest.raises(RuntimeError, match="model build failed"):
        tf_loop.run(config)
    assert len(started) == 1 and not started[0].running


def test_only_a_probing_writer_starts_a_probe_child(tmp_path):
    from archbench.workloads.training import outcome
    stated = train.parse_args([*TINY, "--output", "x", "--vendor-evidence-from", str(tmp_path / "rep0.json")])
    off = train.parse_args([*TINY, "--output", "x", "--vendor-probe", "off"])
    assert outcome.early_probe(stated) is None and outcome.early_probe(off) is None


# ------------------------------------------------------------------ real runs
@pytest.fixture(scope="module")
def real_records(tmp_path_factory):
    """Real tiny trainings: vendor on, off, and on with a declared library that is wrong."""
    tmp = tmp_path_factory.mktemp("vendor")
    records = {}
    for name, extra in (("on", []), ("off", ["--onednn", "off"]),
                        ("acl", ["--vendor-library", "onednn-acl"])):
        out = tmp / f"{name}.json"
        assert train.main([*TINY, *extra, "--output", str(out)]) == 0
        records[name] = read_record(out)
    return records


def test_real_run_records_what_ran(real_records):
    on, off, acl = real_records["on"], real_records["off"], real_records["acl"]
    assert on["vendor_evidence"]["library"] == "onednn" and on["vendor_mismatch"] == ""
    assert on["vendor_evidence"]["version"].startswith("3.")
    assert on["vendor_evidence"]["optimized_share"] > 0.5
    # flag off: no oneDNN primitive; only the sgemm Eigen's contraction calls, if any
    assert off["vendor_evidence"]["library"] == "none" and off["vendor_mismatch"] == ""
    assert set(off["vendor_evidence"]["implementations"]) <= {"gemm_api"}
    assert acl["vendor_library"] == "onednn"  # the record states what ran
    assert acl["vendor_mismatch"] == "declared onednn-acl, evidence onednn"
    # no runtime that reads KMP_* is mapped by the pinned TensorFlow: MKL settings are inert
    assert flatten(on)["kmp_read_by"] == "none"
    # the probe is not part of the measured window
    assert len(on["step_times_s"]) == 2 and on["metrics"]["images"]["value"] == 8


def test_vendor_evidence_table_on_real_records(real_records):
    # the wrongly declared run stands for another system (config_id ignores the library)
    records = [real_records["on"], real_records["off"], {**real_records["acl"], "system": "arm"}]
    frame = records_to_frame(records)
    assert "vendor_evidence" not in frame and frame["vendor_evidence_library"].notna().all()
    t = build_table("vendor_evidence", frame)
    assert TABLES["vendor_evidence"].uses_runs
    by = {(r.system, bool(r.vendor_library_enabled)): r for r in t.itertuples()}
    assert len(by) == len(t) == 3
    assert by[("local", True)].library == "onednn" and not by[("local", True)].mismatch
    assert by[("local", False)].library == "none" and by[("local", False)].status == "ok"
    wrong = by[("arm", True)]
    assert wrong.mismatch and wrong.status == "mismatch" and "evidence onednn" in wrong.mismatch_reason
    assert by[("local", True)].n_probed == 1 and by[("local", True)].version.startswith("3.")


def test_table_without_evidence_says_not_probed(real_records):
    old = {**real_records["on"], "vendor_evidence": None, "vendor_mismatch": "",
           "run_id": "old/rep0", "config_id": "old"}
    t = build_table("vendor_evidence", records_to_frame([old]))
    assert t["status"].tolist() == ["not probed"] and t["n_probed"].tolist() == [0]


def test_supervisor_keeps_the_workers_evidence_and_passes_the_declared_library(tmp_path):
    system = {"name": "local", "arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2,
              "threads_per_core": 1, "runtime_minutes": 5, "container_runtime": "none",
              "launcher": "local", "vendor_library": "armpl", "env": {}}
    m = {"kind": "train", "experiment": "e", "system": "local", "arch": "x86_64",
         "model": "small_cnn", "batch_per_process": 4, "intra_threads": 1, "inter_threads": 1,
         "vendor_library": "armpl", "vendor_library_enabled": True, "data": "synthetic",
         "warmup_steps": 1, "measured_steps": 2, "image_size": 32, "num_classes": 10,
         "strategy": "single", "nodes": 1, "processes_per_node": 1, "workers": 1,
         "global_batch": 4, "config_id": "small_cnn_armpl", "repetition": 0}
    assert train.worker_argv(m, system)[-2:] == ["--vendor-library", "armpl"]
    r = run.supervise(m, system, output=tmp_path / "rep0.json", log_path=tmp_path / "rep0.log")
    assert r["status"] == "ok"
    assert r["vendor_evidence"]["library"] == "onednn"  # ArmPL did not run here
    assert r["vendor_library"] == "onednn"  # so the record does not say ArmPL
    assert r["vendor_mismatch"] == "declared armpl, evidence onednn"
    assert "MISMATCH" in (tmp_path / "rep0.log").read_text()


def test_optimized_share_of_many_small_times_is_at_most_one():
    """A probe whose every primitive is optimized has share 1, not 1 + rounding (a PyTorch
    step over many implementations gave 1.0000000000000002, which the record schema
    refused)."""
    line = "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2_{},forward_training,,,,{}"
    times = [0.174, 0.549, 0.703, 0.675, 0.375, 0.44, 0.509, 0.779, 0.521, 0.394, 0.49, 0.031,
             0.044, 0.704, 0.983, 0.594, 0.394, 0.171, 0.503, 0.982]
    e = onednn_verbose.parse_verbose("\n".join(line.format(i, t) for i, t in enumerate(times)) + "\n")
    assert len(e["implementations"]) == len(times)
    assert e["optimized_share"] == 1.0 and e["reference_share"] == 0.0


# ------------------------------------------------------------------ the probe in the process
def test_a_probe_in_the_process_counts_only_its_step(capfd):
    line = "onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx2,forward_training,,,,{}\n"
    print(line.format(9.0), end="")  # before the probe: not its step
    e = probing.probe_in_process(lambda: os.write(1, line.format(0.5).encode()), contextlib.nullcontext)
    assert e["error"] == "" and e["library"] == "onednn"
    assert e["implementations"] == {"brg_conv_fwd:avx2": {"calls": 1, "ms": 0.5, "share": 1.0}}
    print("after the probe")
    out = capfd.readouterr().out
    assert "after the probe" in out and "9.0" in out and "0.5" not in out  # stdout is back


def test_a_failed_probe_in_the_process_never_fails_the_run(capfd):
    def step():
        raise RuntimeError("no step")
    e = probing.probe_in_process(step, contextlib.nullcontext)
    assert e["library"] is None and "no step" in e["error"]
    print("still printing")
    assert "still printing" in capfd.readouterr().out


# ------------------------------------------------------------------ evidence of another repetition
def probed(k: int, *, config_hash: str = "h", **evidence) -> dict:
    """A record of repetition ``k`` of configuration c whose probe saw oneDNN."""
    from test_sense import train_record
    own = {**onednn_verbose.parse_verbose(fixture("onednn-x86_64-probe.txt")), **evidence}
    return train_record(run_id=f"c/rep{k}", repetition=k, config_hash=config_hash,
                        framework_version="2.18.1", cpu_model="cpu", vendor_evidence=own)


def put(directory: Path, record: dict) -> Path:
    path = directory / f"rep{record['repetition']}.json"
    path.write_text(json.dumps(record))
    return path


def test_the_earliest_repetition_whose_own_probe_gave_evidence_is_offered(tmp_path):
    out = tmp_path / "rep5.json"
    assert reuse.earlier_record(out, "h") is None  # nothing beside it: the run probes
    put(tmp_path, probed(0, library=None, error="probe exited 1: x"))  # its probe failed
    put(tmp_path, probed(1, config_hash="other"))  # another configuration's
    put(tmp_path, probed(2, source="c/rep7"))  # states another's evidence
    (tmp_path / "rep3.json").write_text("{truncated")
    assert reuse.earlier_record(out, "h") is None
    put(tmp_path, probed(10))
    put(tmp_path, probed(4))
    put(tmp_path, probed(5))  # the run's own output, rerun: never its own source
    assert reuse.earlier_record(out, "h") == tmp_path / "rep4.json"


def test_evidence_is_stated_only_where_it_holds_for_the_run(tmp_path, capsys):
    earlier = probed(0)
    path = tmp_path / "rep0.json"
    write_record(path, earlier)
    fields = {k: earlier[k] for k in reuse.SAME_FOR_EVIDENCE} | {"env": dict(earlier["env"])}
    shared = reuse.shared_evidence(path, fields)
    assert shared == {**earlier["vendor_evidence"], "source": "c/rep0"}
    for key, value in (("framework_version", "2.19.0"), ("cpu_model", "another cpu"),
                       ("image_sha256", "ab12"), ("git_commit", "f00"), ("intra_threads", 2)):
        assert reuse.shared_evidence(path, {**fields, key: value}) is None
        assert f"its {key}" in capsys.readouterr().err
    assert reuse.shared_evidence(path, {**fields, "env": {"KMP_BLOCKTIME": "0"}}) is None
    assert reuse.shared_evidence(path, fields, "NCHW") is None
    assert reuse.shared_evidence(tmp_path / "missing.json", fields) is None
    write_record(path, {**earlier, "vendor_evidence": {**earlier["vendor_evidence"], "source": "c/rep9"}})
    assert reuse.shared_evidence(path, fields) is None  # evidence at second hand is not passed on
    assert "no evidence of its own probe" in capsys.readouterr().err


def test_repetitions_after_the_first_state_its_evidence_and_a_failed_probe_is_redone(tmp_path):
    """Real tiny runs through the supervisor: rep0 probes; rep1 states rep0's evidence,
    naming it, without a probe of its own; once rep0's probe is a failed one, rep1 rerun
    probes itself."""
    from test_run import SYSTEM, measurement
    m = measurement()

    def supervise(k: int) -> dict:
        return run.supervise({**m, "repetition": k}, SYSTEM, output=tmp_path / "raw" / f"rep{k}.json",
                             log_path=tmp_path / "logs" / f"rep{k}.log")
    r0 = supervise(0)
    assert r0["vendor_evidence"]["library"] == "onednn" and "source" not in r0["vendor_evidence"]
    r1 = supervise(1)
    assert r1["status"] == "ok" and r1["vendor_evidence"] == {**r0["vendor_evidence"], "source": r0["run_id"]}
    assert (r1["vendor_library"], r1["vendor_mismatch"]) == (r0["vendor_library"], r0["vendor_mismatch"])
    log = (tmp_path / "logs" / "rep1.log").read_text()
    assert f"--vendor-evidence-from {tmp_path / 'raw' / 'rep0.json'}" in log
    assert f"vendor evidence: onednn (the probe of {r0['run_id']})" in log
    assert flatten(r1)["vendor_evidence_source"] == r0["run_id"]
    write_record(tmp_path / "raw" / "rep0.json",
                 {**r0, "vendor_evidence": probing.failed_evidence("probe exited 1: test")})
    (tmp_path / "raw" / "rep1.json").unlink()
    again = supervise(1)
    assert again["vendor_evidence"]["library"] == "onednn" and "source" not in again["vendor_evidence"]


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_the_window_settles_after_the_first_step_or_before_any_window_step(warmup):
    """The probe child is waited for after the first warm-up step (which traces the step),
    or before the window when there is no warm-up: no later step runs beside it."""
    from archbench.workloads.training.strategies.base import Backend
    events = []

    def step(*batch):
        events.append("step")
        return 0.0
    from archbench.workloads.training.settings import TrainRun
    Backend(None, TrainRun(model="small_cnn", batch_per_process=1, output="unused.json")).window(
        step, iter(lambda: (), None), warmup=warmup, steps=2, batch_size=1,
        settle=lambda: events.append("settle"))
    assert events.count("settle") == 1
    assert events.index("settle") == min(warmup, 1)
    assert len(events) == warmup + 2 + 1


# ------------------------------------------------------------------ evidence of another configuration
def test_runs_that_probe_alike_share_a_key_and_others_do_not():
    """The key is the planned probe settings and the environment: a 2-rank Horovod run
    probes what the 1-process run with its per-process settings probes; another thread
    count or vendor flag does not, nor (at the framework's default threads) OMP_NUM_THREADS."""
    from test_run import measurement
    single = measurement()
    horovod = {**single, "strategy": "horovod", "processes_per_node": 2, "workers": 2,
               "experiment": "p", "measured_steps": 5}
    assert train.probe_key(single, {}) == train.probe_key(horovod, {})
    assert train.probe_key(single, {}) != train.probe_key({**single, "intra_threads": 2}, {})
    assert train.probe_key(single, {}) != train.probe_key({**single, "vendor_library_enabled": False}, {})
    assert train.probe_key(single, {}) != train.probe_key(single, {"KMP_BLOCKTIME": "0"})
    # the run tells its framework 1 thread: Snakemake's OMP_NUM_THREADS (a job's threads) is not read
    assert train.probe_key(single, {"OMP_NUM_THREADS": "1"}) == train.probe_key(horovod, {"OMP_NUM_THREADS": "2"})
    # Horovod's knobs do not reach the probe, one process without Horovod
    assert train.probe_key(single, {}) == train.probe_key(horovod, {"HOROVOD_CYCLE_TIME": "20"})
    default = {**single, "intra_threads": 0}
    assert train.probe_key(default, {"OMP_NUM_THREADS": "1"}) != train.probe_key(default, {"OMP_NUM_THREADS": "2"})


def raw_output(root: Path, experiment: str, config: str, *, system: str = "s") -> Path:
    """Where repetition 0 of ``config`` writes its record in the results layout."""
    return root / "raw" / system / experiment / config / "rep0.json"


def test_the_last_run_that_probed_with_a_key_is_found_by_the_systems_other_runs(tmp_path, monkeypatch,
                                                                                 capsys):
    settings = "--model small_cnn"
    first, other = raw_output(tmp_path, "e", "c1"), raw_output(tmp_path, "p", "c2")
    assert reuse.indexed_record(other, "k") is None  # nothing probed yet
    reuse.remember(first, "k", probed(0, library=None, error="probe exited 1: x", settings=settings))
    assert reuse.indexed_record(other, "k") is None  # a failed probe is not offered
    write_record(first, probed(0, settings=settings))
    reuse.remember(first, "k", probed(0, settings=settings))
    assert reuse.index_path(first, "k") == tmp_path / "raw" / "s" / reuse.PROBES_DIR / "k.json"
    assert reuse.indexed_record(other, "k") == first
    assert reuse.indexed_record(first, "k") is None  # never a run's own record
    assert reuse.indexed_record(other, "another key") is None
    assert reuse.indexed_record(raw_output(tmp_path.parent / "elsewhere", "p", "c2"), "k") is None
    reuse.remember(other, "k", probed(0, source="e/c1/rep0"))  # stated evidence: not a probe
    assert reuse.indexed_record(raw_output(tmp_path, "q", "c3"), "k") == first
    write_record(first, {**probed(0), "vendor_evidence": probing.failed_evidence("rerun, failed")})
    assert reuse.indexed_record(other, "k") is None  # its record no longer holds evidence
    reuse.index_path(first, "k").write_text("{truncated")
    assert reuse.indexed_record(other, "k") is None

    def refuse(*_args, **_kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(reuse, "atomic_write_text", refuse)  # no failure, only a later probe
    reuse.remember(other, "k", probed(0, settings=settings))
    assert "not written ([Errno 30] Read-only file system)" in capsys.readouterr().err
    assert reuse.index_path(tmp_path / "rep0.json", "k") is None  # outside the results layout
    reuse.remember(tmp_path / "rep0.json", "k", probed(0, settings=settings))  # writes nothing
    # the index is beside the experiments, where no listing of records looks
    from archbench.results.record_sets import record_paths
    assert record_paths(tmp_path / "raw") == [first]


def test_evidence_probed_with_other_settings_or_threads_is_not_stated(tmp_path, capsys):
    earlier = probed(0, settings="--model small_cnn --batch-per-process 4")
    path = raw_output(tmp_path, "e", "c")
    write_record(path, earlier)
    fields = {k: earlier[k] for k in reuse.SAME_FOR_EVIDENCE} | {"env": dict(earlier["env"])}
    assert reuse.shared_evidence(path, fields, settings="--model small_cnn --batch-per-process 8") is None
    assert "its probe's settings '--model small_cnn --batch-per-process 4'" in capsys.readouterr().err
    shared = reuse.shared_evidence(path, fields, settings="--model small_cnn --batch-per-process 4",
                                output=raw_output(tmp_path, "p", "c2"))
    assert shared["source"] == "e/c/rep0"  # another experiment's run is named with it
    assert reuse.shared_evidence(path, fields, output=raw_output(tmp_path, "e", "c2"))["source"] == "c/rep0"
    tuned = {**fields, "env": {**fields["env"], "HOROVOD_FUSION_THRESHOLD": "0"}}
    assert reuse.shared_evidence(path, tuned) is not None  # Horovod's knobs do not reach the probe
    threads = {**fields, "env": {**fields["env"], "OMP_NUM_THREADS": "2"}}
    assert reuse.shared_evidence(path, threads) is not None  # intra_threads 4: not read
    assert reuse.shared_evidence(path, {**threads, "intra_threads": 0}) is None  # the default threads: read
    assert "its intra_threads" in capsys.readouterr().err


def test_a_horovod_run_states_the_evidence_of_the_one_process_run_that_probed_alike(tmp_path):
    """Real runs through the supervisor in the results layout: a 1-process run probes; a
    2-rank Horovod run with its per-process settings, in another experiment, states that
    evidence without a probe of its own, naming the run; the vendor_evidence table counts
    the probe once in each experiment and says whose it is. A record the index names that
    no longer holds for the run is not stated: the run probes and is named in its place."""
    from test_run import SYSTEM, measurement
    single = measurement()
    horovod = {**measurement(), "experiment": "p", "strategy": "horovod", "processes_per_node": 2,
               "workers": 2, "global_batch": 8}
    horovod["config_id"] = "hvd2"

    def supervise(m: dict) -> dict:
        out = raw_output(tmp_path / "results", m["experiment"], m["config_id"], system="local")
        return run.supervise(m, SYSTEM, output=out, log_path=tmp_path / "logs" / f"{m['config_id']}.log")
    r0 = supervise(single)
    assert r0["vendor_evidence"]["library"] == "onednn" and "source" not in r0["vendor_evidence"]
    assert r0["vendor_evidence"]["settings"].startswith("--framework tensorflow --model small_cnn --batch-per-process 4")
    r1 = supervise(horovod)
    assert r1["status"] == "ok" and r1["workers"] == 2
    source = f"e/{r0['run_id']}"
    assert r1["vendor_evidence"] == {**r0["vendor_evidence"], "source": source}
    log = (tmp_path / "logs" / "hvd2.log").read_text()
    assert f"vendor evidence: onednn (the probe of {source})" in log
    table = build_table("vendor_evidence", records_to_frame([r0, r1]))
    assert table[["experiment", "n_probed", "n_shared", "library"]].values.tolist() == [
        ["e", 1, 0, "onednn"], ["p", 0, 1, "onednn"]]
    assert table["shared"].tolist()[1] == f"hvd2/rep0 from {source}"
    # the 1-process record, rerun with another vendor flag under the same name, no longer holds
    write_record(raw_output(tmp_path / "results", "e", single["config_id"], system="local"),
                 {**r0, "vendor_library_enabled": False})
    again = supervise(horovod)
    assert "source" not in again["vendor_evidence"] and again["vendor_evidence"]["library"] == "onednn"
    other = {**horovod, "experiment": "q"}
    assert supervise(other)["vendor_evidence"]["source"] == f"p/{again['run_id']}"


def test_the_table_names_the_configuration_or_experiment_a_probe_came_from():
    rows = [probed(0, settings="s"), probed(1, source="c/rep0"),
            {**probed(0, source="c/rep0"), "run_id": "d/rep0", "config_id": "d"},
            {**probed(1, source="other/c/rep0"), "run_id": "d/rep1", "config_id": "d"}]
    t = build_table("vendor_evidence", records_to_frame(rows))
    assert t["n_probed"].tolist() == [1] and t["n_shared"].tolist() == [3]
    assert t["shared"].tolist() == ["d/rep0 from c/rep0 | d/rep1 from other/c/rep0 | rep1 from rep0"]
