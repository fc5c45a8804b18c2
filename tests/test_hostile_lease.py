"""A live run cannot be overwritten, whatever the second invocation passes: a second
supervisor respects the record's lease, `archbench run` refuses --nolock, and a run
refused by Snakemake's lock is told who holds it (and --unlock only once it is gone).
Real processes throughout: live supervisors, live holders, Snakemake itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import copy_workflow, default_signals, tool_env
from test_lifeline import SUPERVISOR
from test_run import SYSTEM, measurement

from archbench.core.record import read_record
from archbench.execute import holders, lease, runlock
from archbench.execute.holders import Holder

# A worker that says it started, then sleeps (the supervisor appends --output SCRATCH).
SLEEPER = "import sys, time; print('up' * 2, flush=True); time.sleep(float(sys.argv[1]))"


@pytest.fixture(autouse=True)
def own_host_guard(tmp_path, monkeypatch):
    """A host guard of the test's own: other benchmarks on this host do not delay it."""
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "host.lock"))


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def start_supervisor(work: Path, worker: list[str]) -> subprocess.Popen:
    """A real supervisor (``python -m archbench.run``'s main) of record work/raw/rep0.json,
    its worker ``worker``; its stderr is piped."""
    spec = json.dumps({"measurement": measurement(), "system": SYSTEM})
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, "--spec", spec, "--output", str(work / "raw/rep0.json"),
         "--log", str(work / "rep0.worker.log")],
        cwd=work, env=tool_env(TREE_WORKER=json.dumps(worker)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_signals)


def snapshot(work: Path) -> dict[str, bytes]:
    """Every file under ``work`` (the record's folder, the log) with its bytes."""
    return {str(p.relative_to(work)): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


# ---------------------------------------------------------------- a second supervisor

def test_a_second_supervisor_leaves_a_live_supervisors_record_log_and_worker_alone(tmp_path):
    live = start_supervisor(tmp_path, [sys.executable, "-c", SLEEPER, "60"])
    try:
        log = tmp_path / "rep0.worker.log"
        deadline = time.monotonic() + 60
        while "\nupup\n" not in (log.read_text() if log.exists() else ""):
            assert live.poll() is None and time.monotonic() < deadline, live.stderr.read()
            time.sleep(0.05)
        before = snapshot(tmp_path)
        second = start_supervisor(tmp_path, [sys.executable, "-c", "print('second worker')"])
        _, err = second.communicate(timeout=60)
        assert second.returncode == lease.EXIT_HELD
        line = one_line(err)
        assert line.startswith(f"archbench: {tmp_path / 'raw/rep0.json'}: being measured by pid {live.pid} on ")
        assert "(alive)" in line and "rep0.json.lease" in line
        assert snapshot(tmp_path) == before  # no record, the same log, the same lease
        assert live.poll() is None  # the live supervisor and its worker run on
    finally:
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=30)
    assert not lease.lease_path(tmp_path / "raw/rep0.json").exists()  # released as it ended


HELD = [  # a lease whose holder lives: the supervisor refuses, touching nothing
    ("a live process of this host", lambda: holders.this_process(), "(alive)"),
    ("another boot of this host's name, renewed a minute ago",
     lambda: replace(holders.this_process(), boot="another"), "(on another host or boot; lease renewed 6"),
    ("another host's, renewed a minute ago",
     lambda: Holder("node-elsewhere", 4242, "2026-01-01T00:00:00+00:00"),
     "(on another host or boot; lease renewed 6"),
]


@pytest.mark.parametrize("holder, said", [c[1:] for c in HELD], ids=[c[0] for c in HELD])
def test_a_live_holders_lease_is_respected(tmp_path, holder, said):
    record = tmp_path / "raw/rep0.json"
    path = lease.lease_path(record)
    path.parent.mkdir(parents=True)
    holder = holder()
    path.write_text(holder.to_text())
    os.utime(path, (time.time() - 60, time.time() - 60))
    (tmp_path / "rep0.worker.log").write_text("the live run's log\n")
    before = snapshot(tmp_path)
    second = start_supervisor(tmp_path, [sys.executable, "-c", "pass"])
    _, err = second.communicate(timeout=60)
    assert second.returncode == lease.EXIT_HELD
    line = one_line(err)
    assert line.startswith(f"archbench: {record}: being measured by {holder} {said}"), line
    assert line.endswith(f"this run leaves its record, log and worker alone (lease {path})")
    assert snapshot(tmp_path) == before


AWAY = Holder("node-elsewhere", 4242, "2026-01-01")
STALE = [  # a lease whose holder is gone (or that names none): taken over, the run goes on
    ("a dead pid of this host", lambda: replace(holders.this_process(), pid=dead_pid()), 0),
    ("a reused pid (another start)", lambda: replace(holders.this_process(), started=1), 0),
    ("another boot of this host's name, untouched 20 minutes",
     lambda: replace(holders.this_process(), boot="gone"), 1200),
    ("another host's, untouched 20 minutes", lambda: AWAY, 1200),
    ("another host's, renewed in a year", lambda: AWAY, -365 * 86400),
    ("not JSON", lambda: "{half a lease", 0),
    ("empty", lambda: "", 0),
    ("a list", lambda: "[1, 2]", 0),
    ("pid 0", lambda: '{"host": "vm", "pid": 0, "since": "x"}', 0),
    ("pid 2**80", lambda: '{"host": "vm", "pid": %d, "since": "x"}' % 2**80, 0),
    ("pid a string", lambda: '{"host": "vm", "pid": "1", "since": "x"}', 0),
    ("a host of two lines", lambda: '{"host": "a\\nb", "pid": 1, "since": "x"}', 0),
    ("binary", lambda: "\udcff\x00\x01", 0),
]


@pytest.mark.parametrize("content, age_s", [c[1:] for c in STALE], ids=[c[0] for c in STALE])
def test_a_stale_lease_is_taken_over(tmp_path, content, age_s):
    record = tmp_path / "raw/rep0.json"
    path = lease.lease_path(record)
    path.parent.mkdir(parents=True)
    given = content()
    path.write_text(given if isinstance(given, str) else given.to_text(), errors="surrogateescape")
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    run = start_supervisor(tmp_path, [sys.executable, "-c", "pass"])
    _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert f"archbench: {path}: stale lease of " in err and " taken over" in err
    assert read_record(record)["status"] == "failed"  # the worker left no record: its run failed
    assert not path.exists() and not list(path.parent.glob(".*.tmp"))


def test_a_lease_that_cannot_be_read_is_one_line(tmp_path):
    record = tmp_path / "raw/rep0.json"
    lease.lease_path(record).mkdir(parents=True)
    run = start_supervisor(tmp_path, [sys.executable, "-c", "pass"])
    _, err = run.communicate(timeout=60)
    assert run.returncode == lease.EXIT_HELD
    assert one_line(err) == (f"archbench: {record}: its lease {lease.lease_path(record)} cannot be "
                             "read (is a directory): remove it: this run leaves its record, log and "
                             "worker alone")
    assert not record.exists()


def test_two_takers_of_one_stale_lease_one_wins(tmp_path):
    """Taking over is serialised: of two supervisors finding one stale lease, one holds it."""
    record = tmp_path / "rep0.json"
    path = lease.lease_path(record)
    path.write_text(replace(holders.this_process(), pid=dead_pid()).to_text())
    first = lease.take(record)
    with pytest.raises(lease.Held):
        lease.take(record)
    first.release()
    assert not path.exists()


# ---------------------------------------------------------------- archbench run, snakemake

def archbench(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archbench", *args], cwd=work,
                          env=tool_env(), capture_output=True, text=True, timeout=120)


def lock(work: Path, holder: Holder | None) -> None:
    """Snakemake's lock files in ``work`` as a run leaves them, named by ``holder``."""
    locks = work / runlock.LOCKS
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.output.lock").write_text("results/tables/measurements.csv\n")
    if holder is not None:
        text = holder if isinstance(holder, str) else holder.to_text()
        (locks / f"{runlock.HOLDER_PREFIX}x.1.json").write_text(text)


def me() -> Holder:
    return holders.this_process()


def gone() -> Holder:
    return replace(me(), pid=dead_pid())


def elsewhere() -> Holder:
    return Holder("node-elsewhere", 4242, "2026-01-01T00:00:00+00:00")


CLI = [  # (id, archbench arguments, holder of Snakemake's lock or "none", what the line says)
    ("--nolock", ["run", "--nolock"], None, "--nolock refused"),
    ("--nolock abbreviated", ["run", "--nolo"], None, "--nolock refused"),
    ("--nolock in a dry run", ["run", "-n", "--nolock"], None, "--nolock refused"),
    ("paper --nolock", ["paper", "--nolock"], None, "--nolock refused"),
    ("--nolock while another run holds the lock", ["run", "--nolock"], me, "--nolock refused"),
    ("run while a live run holds the lock", ["run"], me, "holds Snakemake's lock: pid"),
    ("paper while a live run holds the lock", ["paper"], me, "holds Snakemake's lock: pid"),
    ("--unlock of a live run", ["run", "--unlock"], me, "--unlock refused: pid"),
    ("--unlock abbreviated, of a live run", ["run", "--unl"], me, "--unlock refused: pid"),
    ("run after a dead run", ["run"], gone, "which is gone: run `archbench run --unlock`"),
    ("run while another host's run holds it", ["run"], elsewhere, "cannot be told from"),
    ("run while an unnamed run holds it", ["run"], "none", "did not name its process"),
    ("a holder naming pid 2**80", ["run"], lambda: '{"host": "vm", "pid": %d, "since": "x"}' % 2**80,
     "did not name its process"),
    ("a holder of two lines", ["run"], lambda: '{"host": "a\\nb", "pid": 1, "since": "x"}',
     "did not name its process"),
]


@pytest.mark.parametrize("args, holder, said", [c[1:] for c in CLI], ids=[c[0] for c in CLI])
def test_archbench_refuses_in_one_line_and_changes_nothing(tmp_path, args, holder, said):
    work = copy_workflow(tmp_path / "wf")
    record = work / "results/raw/local/e/c/rep0.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    if holder is not None:
        lock(work, None if holder == "none" else holder())
    before = snapshot(work / "results"), snapshot(work / ".snakemake") if holder else {}
    proc = archbench(work, *args)
    line = one_line(proc.stderr)
    assert proc.returncode == 1 and said in line, line
    if holder is me and "--nolock" not in args:  # who, since when, alive; never --unlock then
        assert f"pid {os.getpid()} on " in line and ", alive" in line and "archbench run --unlock" not in line
    assert (snapshot(work / "results"), snapshot(work / ".snakemake") if holder else {}) == before


def test_plan_with_nolock_is_a_dry_run_and_not_refused(tmp_path):
    assert runlock.refusal(tmp_path) is None
    from archbench.cli import lock_refusal
    assert lock_refusal("plan", ["--nolock"], tmp_path) is None
    lock(tmp_path, me())
    assert lock_refusal("run", ["-n"], tmp_path) is None  # a dry run takes no lock


SNAKEMAKE = [  # Snakemake called directly: rules/common.smk refuses as archbench does
    ("--nolock", ["--nolock"], None, "--nolock refused"),
    ("nolock set by a profile", ["--profile", "profiles/nolock"], None, "--nolock refused"),
    ("a run while a live run holds the lock", [], me, "holds Snakemake's lock: pid"),
    ("--unlock of a live run", ["--unlock"], me, "--unlock refused: pid"),
]


@pytest.mark.workflow
@pytest.mark.parametrize("args, holder, said", [c[1:] for c in SNAKEMAKE], ids=[c[0] for c in SNAKEMAKE])
def test_snakemake_itself_refuses_in_one_line(tmp_path, args, holder, said):
    work = copy_workflow(tmp_path / "wf")
    (work / "profiles/nolock").mkdir()
    (work / "profiles/nolock/config.yaml").write_text(
        (work / "profiles/local/config.yaml").read_text() + "\nnolock: True\n")
    if holder is not None:
        lock(work, holder())
    locks = snapshot(work / ".snakemake") if holder else {}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/local",
                           "--configfile", "tiny.yaml", *args], cwd=work, env=tool_env(),
                          capture_output=True, text=True, timeout=300)
    said_lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("archbench:")]
    assert proc.returncode != 0 and len(said_lines) == 1 and said in said_lines[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not [p for d in ("logs", "results") for p in (work / d).rglob("*") if p.is_file()]
    if holder:
        assert {k: v for k, v in snapshot(work / ".snakemake").items() if "locks" in k} == \
            {k: v for k, v in locks.items() if "locks" in k}


@pytest.mark.workflow
def test_snakemake_unlock_of_a_dead_run_unlocks(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    lock(work, gone())
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/local",
                           "--configfile", "tiny.yaml", "--unlock"], cwd=work, env=tool_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert runlock.lock_files(work) == [] and runlock.holders(work) == []
