"""The host guard: one archbench benchmark at a time on a host; a guard left by a dead
process is taken over at once; the wait does not count against a run's time limit."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import tool_env
from test_lifeline import alive, start_supervisor
from test_run import measurement

from archbench.core.record import read_record
from archbench.execute import hostguard
from archbench.execute.lifeline import MARK

# A worker that notes when it ran (the supervisor appends --output SCRATCH), then sleeps.
TIMED = ("import sys, time; t0 = time.time(); time.sleep(float(sys.argv[1])); "
         "open(sys.argv[2], 'w').write(f'{t0} {time.time()}')")


@pytest.fixture(autouse=True)
def lock(tmp_path, monkeypatch):
    """A host guard of the test's own (not the host's)."""
    path = tmp_path / "host.lock"
    monkeypatch.setenv(hostguard.ENV, str(path))
    return path


def test_a_second_benchmark_waits_for_the_first_and_the_wait_is_not_its_time(tmp_path):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first, first_out = start_supervisor(first_dir, [sys.executable, "-c", TIMED, "4", str(first_dir / "ran")])
    time.sleep(1.5)  # the first holds the guard by now
    # 3 s allowed: counted from the start of the wait it would time out
    second, second_out = start_supervisor(second_dir, [sys.executable, "-c", TIMED, "0.5",
                                                       str(second_dir / "ran")],
                                          m=measurement(timeout_minutes=0.05))
    assert first.wait(timeout=60) == 0 and second.wait(timeout=60) == 0
    first_ran = [float(t) for t in (first_dir / "ran").read_text().split()]
    second_ran = [float(t) for t in (second_dir / "ran").read_text().split()]
    assert second_ran[0] >= first_ran[1]
    said = (second_dir / "supervisor.out").read_text()
    assert said.count("waiting for the host guard") == 1
    assert f"held by pid {first.pid} " in said and str(first_out) in said
    # no record from these workers: the run failed (exit 0, no record), it did not time out
    assert read_record(second_out)["status"] == "failed"
    # the spans the supervisors noted in the worker logs do not overlap either
    spans = [[dt.datetime.fromisoformat(m[1]) for m in MARK.finditer((d / "rep0.worker.log").read_text())]
             for d in (first_dir, second_dir)]
    assert spans[0][1] <= spans[1][0]


def test_a_supervisor_waiting_for_the_guard_can_be_stopped(tmp_path):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first, _ = start_supervisor(first_dir, [sys.executable, "-c", TIMED, "60", str(first_dir / "ran")])
    time.sleep(1.5)
    second, second_out = start_supervisor(second_dir, [sys.executable, "-c", TIMED, "0", str(second_dir / "ran")])
    try:
        while "waiting for the host guard" not in (second_dir / "supervisor.out").read_text():
            assert second.poll() is None
            time.sleep(0.05)
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=5) == 128 + signal.SIGINT
        assert not second_out.exists() and not (second_dir / "ran").exists()
        assert first.poll() is None  # the holder runs on
    finally:
        first.terminate()
        first.wait()
        second.kill()
        second.wait()


def test_a_guard_left_by_a_dead_holder_is_taken_over_at_once(tmp_path, lock):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from archbench.execute import hostguard\n"
         "with hostguard.held('dead.json'):\n    print('held', flush=True); time.sleep(300)"],
        env=tool_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    assert "dead.json" in lock.read_text()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    began = time.monotonic()
    with hostguard.held("mine.json"):
        assert time.monotonic() - began < 0.2  # no wait, not even one poll
        assert lock.read_text().startswith(f"pid {os.getpid()} ") and "mine.json" in lock.read_text()


def test_a_waiting_supervisor_names_the_holder_and_can_give_up(lock, capsys):
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid 4242 since then: results/raw/x/rep0.json\n")
    calls = []

    def give_up_on_the_third_look():
        calls.append(1)
        if len(calls) == 3:
            raise TimeoutError
    try:
        with pytest.raises(TimeoutError):
            with hostguard.held("mine.json", check=give_up_on_the_third_look, poll_s=0.01):
                pass
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert err.count("waiting for the host guard") == 1 and "pid 4242" in err


def test_the_lock_file_is_shared_with_other_users(lock):
    old = os.umask(0o077)
    try:
        with hostguard.held("mine.json"):
            pass
    finally:
        os.umask(old)
    assert lock.stat().st_mode & 0o777 == 0o644
    read_only = os.open(lock, os.O_RDONLY)  # how another user opens it
    try:
        fcntl.flock(read_only, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(read_only)


def test_the_guard_outlives_a_killed_supervisor_while_its_tree_lives(tmp_path, lock):
    """The worker tree keeps the guard after the supervisor is SIGKILLed, until the
    lifeline has killed it: a restarted run cannot start beside a dying one."""
    worker = [sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
              "time.sleep(300)", str(tmp_path / "up")]
    proc, _ = start_supervisor(tmp_path, worker)
    while not (tmp_path / "up").exists() or not (tmp_path / "up").read_text():
        time.sleep(0.05)
    worker_pid = int((tmp_path / "up").read_text())
    fd = os.open(lock, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc.kill()
        proc.wait()
        began = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)  # free once the lifeline has killed the tree
        assert time.monotonic() - began < 5
        assert not alive(worker_pid)
        assert "supervisor gone" in (tmp_path / "rep0.worker.log").read_text()
    finally:
        os.close(fd)
