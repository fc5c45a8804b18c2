"""The worker's process tree never outlives its supervisor, however the supervisor ends:
real supervisors (``python -m archbench.run``) run a small real process tree, are killed,
and /proc must show none of the tree within seconds."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import default_signals, tool_env
from test_run import SYSTEM, measurement

from archbench.core.record import read_record
from archbench.execute import supervisor as run
from archbench.execute.lifeline import MARK

# A worker with the shapes of tree real workers have: a rank in its own process group (as
# mpirun starts them), a child in its own session (Horovod's middlemen), and an orphan
# that double-forked away (re-parented to the lifeline). It writes their pids and a scratch
# record, then sleeps, or exits at once with ``exit`` as its first argument.
TREE = r'''
import json, os, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
rank = subprocess.Popen(sleep, preexec_fn=lambda: os.setpgid(0, 0))
session = subprocess.Popen(sleep, start_new_session=True)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    orphan = os.fork()
    if orphan == 0:
        time.sleep(300)
        os._exit(0)
    os.write(w, str(orphan).encode())
    os._exit(0)
os.close(w)
orphan = int(os.read(r, 32))
pids = {"worker": os.getpid(), "lifeline": os.getppid(), "rank": rank.pid,
        "session": session.pid, "orphan": orphan}
scratch = sys.argv[-1] if "--output" in sys.argv else None
if scratch:
    open(scratch, "w").write("{partial")
tmp = os.environ["TREE_PIDS"] + ".tmp"
with open(tmp, "w") as f:
    json.dump(pids, f)
os.replace(tmp, os.environ["TREE_PIDS"])
if sys.argv[1:2] != ["exit"]:
    time.sleep(300)
'''

# A supervisor CLI whose worker argv comes from $TREE_WORKER (the rest is archbench.run).
SUPERVISOR = ("import json, os, sys; from archbench.execute import supervisor as run; "
              "run.worker_command = lambda m, s: json.loads(os.environ['TREE_WORKER']); "
              "sys.exit(run.main())")


def state(pid: int) -> str | None:
    """The /proc state letter of ``pid``; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2]


def alive(pid: int) -> bool:
    return state(pid) not in (None, "Z")


def in_session(sid: int) -> list[int]:
    """Live processes of session ``sid``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry))
    return found


def survivors(pids: dict, within_s: float) -> list[int]:
    """Processes of the tree still alive after ``within_s`` seconds."""
    end = time.monotonic() + within_s
    while True:
        left = [p for p in pids.values() if alive(p)] + in_session(pids["lifeline"])
        if not left or time.monotonic() > end:
            return sorted(set(left))
        time.sleep(0.1)


def wait_for(path: Path, timeout_s: float = 60) -> dict:
    end = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)
    return json.loads(path.read_text())


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """(worker argv, pids file); the host guard in tmp_path, the tree killed at the end."""
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pids_file = tmp_path / "pids.json"
    monkeypatch.setenv("TREE_PIDS", str(pids_file))
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    yield [sys.executable, str(script)], pids_file
    if pids_file.exists():  # never leave sleepers behind, whatever the test did
        for pid in json.loads(pids_file.read_text()).values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def start_supervisor(tmp_path: Path, worker: list[str], m: dict | None = None,
                     launcher: list[str] | None = None) -> tuple[subprocess.Popen, Path]:
    """``python -m archbench.run`` (its worker ``worker``) in its own session, optionally
    under ``launcher`` (a command ending in a shell command string); (process, record path)."""
    out = tmp_path / "raw" / "rep0.json"
    spec = json.dumps({"measurement": m or measurement(), "system": SYSTEM})
    argv = [sys.executable, "-c", SUPERVISOR, "--spec", spec, "--output", str(out),
            "--log", str(tmp_path / "rep0.worker.log")]
    if launcher:
        argv = launcher[:-1] + [f"{launcher[-1]}{shlex.join(argv)} > {tmp_path / 'rep0.log'} 2>&1"]
    proc = subprocess.Popen(argv, env=tool_env(TREE_WORKER=json.dumps(worker)), cwd=tmp_path,
                            stdout=open(tmp_path / "supervisor.out", "w"),
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=default_signals)
    return proc, out


def scratch_of(out: Path) -> Path:
    return out.with_name(f".{out.name}.worker")


def test_supervisor_killed_alone_takes_the_tree_with_it(tmp_path, tree):
    worker, pids_file = tree
    proc, out = start_supervisor(tmp_path, worker)
    pids = wait_for(pids_file)
    proc.kill()  # SIGKILL: no handler runs in the supervisor
    proc.wait()
    assert survivors(pids, within_s=5) == []
    assert not out.exists()
    log = (tmp_path / "rep0.worker.log").read_text()
    assert [m[2] for m in MARK.finditer(log)] == ["start", "end"]
    assert "supervisor gone" in log


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopped_supervisor_kills_the_tree_and_writes_no_record(tmp_path, tree, signum):
    worker, pids_file = tree
    proc, out = start_supervisor(tmp_path, worker)
    pids = wait_for(pids_file)
    assert scratch_of(out).exists()
    os.killpg(proc.pid, signum)  # as a terminal's Ctrl-C reaches the foreground group
    assert proc.wait(timeout=15) == 128 + signum
    assert survivors(pids, within_s=0) == []  # gone before the supervisor exited
    assert not out.exists() and not scratch_of(out).exists()
    said = (tmp_path / "supervisor.out").read_text()
    assert f"stopped by {signal.Signals(signum).name}; no record written" in said


def test_supervisor_whose_launcher_died_stops(tmp_path, tree):
    """Snakemake runs a job as ``bash -c '... > log'``; when Snakemake alone is killed the
    shell lives on, and the supervisor must notice that its launcher is gone."""
    worker, pids_file = tree
    launcher = [sys.executable, "-c", "import subprocess, sys; subprocess.run(['bash', '-c', sys.argv[1]])",
                "set -euo pipefail; "]
    proc, out = start_supervisor(tmp_path, worker, launcher=launcher)
    pids = wait_for(pids_file)
    supervisor = int(Path(f"/proc/{pids['lifeline']}/stat").read_text().rsplit(")", 1)[1].split()[1])
    proc.kill()
    proc.wait()
    assert survivors({**pids, "supervisor": supervisor}, within_s=5) == []
    assert not out.exists() and not scratch_of(out).exists()
    assert "stopped by SIGHUP" in (tmp_path / "rep0.log").read_text()


def test_a_lifeline_killed_alone_leaves_the_supervisor_to_clean_up(tmp_path, tree):
    """The supervisor kills what is left of the lifeline's session (the worker, ranks in
    their own process groups) and notes the end the lifeline could not."""
    worker, pids_file = tree
    proc, out = start_supervisor(tmp_path, worker)
    pids = wait_for(pids_file)
    os.kill(pids["lifeline"], signal.SIGKILL)
    assert proc.wait(timeout=15) == 0  # a record of the killed run
    assert survivors({k: pids[k] for k in ("lifeline", "worker", "rank")}, within_s=0) == []
    log = (tmp_path / "rep0.worker.log").read_text()
    assert [m[2] for m in MARK.finditer(log)] == ["start", "end"]
    assert "worker end (exit -9)" in log
    assert read_record(out)["status"] == "oom"  # as any SIGKILL without a word in the log


def test_leftovers_die_with_the_worker(tmp_path, tree):
    worker, pids_file = tree
    code, _ = run.run_worker(worker + ["exit"], env=tool_env(), timeout_s=60,
                             log_path=tmp_path / "w.log")
    assert code == 0
    assert survivors(json.loads(pids_file.read_text()), within_s=0) == []


def test_timeout_kills_the_whole_tree(tmp_path, tree):
    worker, pids_file = tree
    code, _ = run.run_worker(worker, env=tool_env(), timeout_s=3, log_path=tmp_path / "w.log")
    assert code is None
    assert survivors(json.loads(pids_file.read_text()), within_s=0) == []
    log = (tmp_path / "w.log").read_text()
    assert [m[2] for m in MARK.finditer(log)] == ["start", "end"]
    assert "end (stopped by SIGTERM: worker tree killed)" in log


@pytest.mark.parametrize("code", [0, 7, -signal.SIGKILL, -signal.SIGSEGV, -signal.SIGTERM])
def test_the_workers_exit_status_passes_through(tmp_path, code):
    """The supervisor classifies runs by the worker's status (failures.exit_failure)."""
    body = f"sys.exit({code})" if code >= 0 else f"os.kill(os.getpid(), {-code})"
    got, text = run.run_worker([sys.executable, "-c", f"import os, sys; print('x'); {body}"],
                               env=tool_env(), timeout_s=60, log_path=tmp_path / "w.log")
    assert got == code
    assert text.split() == ["$", sys.executable, "-c", *f"import os, sys; print('x'); {body}".split(), "x"]


def tree_of(root: int) -> dict[int, tuple[int, str]]:
    """{pid: (process group, command line)} of every live descendant of ``root``."""
    table = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[2]), cmdline)
    found, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, pgid, cmdline) in table.items():
            if ppid == parent:
                found[pid] = (pgid, cmdline)
                todo.append(pid)
    return found


@pytest.mark.horovod
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_a_killed_supervisor_takes_real_horovod_ranks_with_it(tmp_path, monkeypatch, controller):
    """mpirun starts each rank in a process group of its own, horovodrun in a session of
    its own: a killpg of the worker's group would miss them, the lifeline does not."""
    from test_distributed import horovod_ready
    horovod_ready()
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    monkeypatch.setenv("OMPI_MCA_rmaps_base_oversubscribe", "1")
    m = measurement(strategy="horovod", processes_per_node=2, workers=2, global_batch=8,
                    tuning={"horovod_controller": controller})
    spec = json.dumps({"measurement": m, "system": SYSTEM})
    proc = subprocess.Popen([sys.executable, "-m", "archbench.run", "--spec", spec, "--output",
                             str(tmp_path / "rep0.json"), "--log", str(tmp_path / "w.log")],
                            env=tool_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=default_signals)
    tree: dict = {}
    try:
        end = time.monotonic() + 120
        while len(ranks := {p: g for p, (g, c) in tree_of(proc.pid).items()
                            if c.startswith(f"{sys.executable} -m archbench.train")}) < 2:
            assert proc.poll() is None and time.monotonic() < end, "the ranks never started"
            time.sleep(0.1)
        tree = tree_of(proc.pid)
        lifeline = next(p for p, (_, c) in tree.items() if "archbench.execute.lifeline" in c)
        assert all(group != lifeline for group in ranks.values())  # not in the worker's group
        proc.kill()
        proc.wait()
        assert survivors({str(p): p for p in tree} | {"lifeline": lifeline}, within_s=5) == []
    finally:  # a failed test leaves nothing running
        proc.kill()
        for pid in set(tree) | set(tree_of(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
