"""Storage faults end cleanly: a full or read-only results directory stops a run with one
line naming the path and the cause, before any benchmark starts and without a traceback,
and leaves no temporary file behind; what killed writers leave is swept at the next start.

The disks are real: a small tmpfs filled to the last page, a read-only bind mount. Mounting
needs root: elsewhere these tests skip, under CI they must run."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import copy_workflow, in_ci, snakemake, tool_env
from test_run import SYSTEM, measurement

from archbench.core import storage
from archbench.core.files import HOST, STALE_AFTER_S, atomic_path, sweep_temporary, writer_of
from archbench.execute import supervisor as run

RECORD = "results/raw/local/e/c/rep0.json"
FULL = "no space left on device (errno 28): free space and rerun"
READ_ONLY = "read-only file system (errno 30): make it writable and rerun"


class Mounts:
    """Mounts made for one test, all unmounted when it ends."""

    def __init__(self) -> None:
        self.points: list[Path] = []

    def tmpfs(self, path: Path, size: str = "256k") -> Path:
        """An empty tmpfs of ``size`` at ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        self.mount(path, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
        return path

    def full(self, path: Path) -> Path:
        """A tmpfs at ``path`` with no page left (one file, ``filler``, holds them all)."""
        fill(self.tmpfs(path))
        return path

    def read_only(self, path: Path) -> Path:
        """``path`` bound onto itself read-only."""
        path.mkdir(parents=True, exist_ok=True)
        self.mount(path, "--bind", str(path), str(path))
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)],
                                 capture_output=True, text=True)
        assert remount.returncode == 0, remount.stderr
        return path

    def mount(self, point: Path, *args: str) -> None:
        proc = subprocess.run(["mount", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            skip_or_fail(f"mount {' '.join(args)} failed: {proc.stderr.strip()}")
        self.points.append(point)

    def unmount_all(self) -> None:
        for point in reversed(self.points):
            if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(point)], capture_output=True)
        self.points.clear()


def skip_or_fail(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI requires the storage fault tests: {reason}")
    pytest.skip(reason)


@pytest.fixture
def mounts():
    if os.geteuid() != 0:
        skip_or_fail("mounting a tmpfs or a read-only bind mount needs root")
    made = Mounts()
    try:
        yield made
    finally:
        made.unmount_all()


def fill(directory: Path) -> None:
    """Write ``directory/filler`` until its file system has no page left."""
    with open(directory / "filler", "wb", buffering=0) as handle:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    handle.write(bytes(chunk))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def fault_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("archbench:")]


@pytest.mark.parametrize("fault, cause", [("full", FULL), ("read_only", READ_ONLY)],
                         ids=["full", "read_only"])
def test_the_supervisor_refuses_before_its_benchmark_in_one_line(tmp_path, mounts, fault, cause):
    results = getattr(mounts, fault)(tmp_path / "results")
    before = files_under(results)
    spec = json.dumps({"measurement": measurement(), "system": SYSTEM})
    proc = subprocess.run([sys.executable, "-m", "archbench.run", "--spec", spec, "--output",
                           RECORD, "--log", "logs/rep0.worker.log"],
                          cwd=tmp_path, env=tool_env(), capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == storage.EXIT_UNWRITABLE, output
    assert output.splitlines() == [f"archbench: {RECORD}: {cause}"]
    assert not (tmp_path / "logs/rep0.worker.log").exists()  # no worker started
    assert files_under(results) == before  # no record, probe or temporary file


def test_a_disk_filled_during_the_benchmark_stops_the_run_in_one_line(tmp_path, mounts,
                                                                      monkeypatch, capsys):
    """The worker trains, then finds no room for its record: it says so in one line and the
    supervisor ends in one line too, with no failure record (none could be written)."""
    raw = mounts.tmpfs(tmp_path / "raw", size="2m")
    worker = run.worker_command(measurement(), SYSTEM)
    fills_then_trains = (f"import os, sys\nwith open({str(raw / 'filler')!r}, 'wb', buffering=0) as f:\n"
                         "    try:\n        while True: f.write(bytes(4096))\n    except OSError: pass\n"
                         f"os.execv(sys.executable, {worker!r} + sys.argv[1:])")
    monkeypatch.setattr(run, "worker_command", lambda m, s: [sys.executable, "-c", fills_then_trains])
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "guard.lock"))  # no wait for others
    out, log = raw / "rep0.json", tmp_path / "logs" / "rep0.worker.log"
    spec = json.dumps({"measurement": measurement(), "system": SYSTEM})
    code = run.main(["--spec", spec, "--output", str(out), "--log", str(log)])
    captured = capsys.readouterr()
    assert code == storage.EXIT_UNWRITABLE
    assert fault_lines(captured.out + captured.err) == [f"archbench: {out}: {FULL}"]
    assert "Traceback" not in captured.out + captured.err
    worker_said = fault_lines(log.read_text())
    assert worker_said == [f"archbench: {raw}/.rep0.json.worker: {FULL}"], log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()
    assert files_under(raw) == ["filler"]  # no record, scratch or temporary file


def test_a_kernel_worker_with_no_room_for_its_record_says_so_in_one_line(tmp_path, mounts):
    raw = mounts.full(tmp_path / "raw")
    out = raw / "rec.json"
    proc = subprocess.run([sys.executable, "-m", "archbench.kernels", "fft", "--size", "1000",
                           "--output", str(out)], env=tool_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == storage.EXIT_UNWRITABLE, proc.stderr[-3000:]
    assert fault_lines(proc.stderr) == [f"archbench: {out}: {FULL}"]
    assert "Traceback" not in proc.stderr
    assert files_under(raw) == ["filler"]


@pytest.mark.workflow
@pytest.mark.parametrize("fault, cause", [("full", FULL), ("read_only", READ_ONLY)],
                         ids=["full", "read_only"])
def test_a_campaign_on_a_full_or_read_only_results_stops_in_one_line(tmp_path, mounts, fault, cause):
    workdir = copy_workflow(tmp_path / "wf")
    results = getattr(mounts, fault)(workdir / "results")
    before = files_under(results)
    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     check=False, timeout=120)
    assert proc.returncode != 0
    assert fault_lines(proc.stdout + proc.stderr) == [f"archbench: results: {cause}"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "run_measurement" not in proc.stdout + proc.stderr
    assert not (workdir / "logs").exists()  # no job started
    assert files_under(results) == before
    # a dry run writes nothing: it still plans the campaign
    dry = snakemake(workdir, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml",
                    "--quiet", "rules", timeout=120)
    assert "run_measurement" in dry.stdout


@pytest.mark.workflow
def test_a_dry_run_with_a_read_only_snakemake_dir_stops_in_one_line(tmp_path, mounts):
    """Snakemake writes .snakemake/ even on a dry run (and fails there with a traceback):
    archbench says so first, in one line."""
    workdir = copy_workflow(tmp_path / "wf")
    mounts.read_only(workdir / ".snakemake")
    proc = snakemake(workdir, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     check=False, timeout=120)
    assert proc.returncode != 0
    assert fault_lines(proc.stdout + proc.stderr) == [f"archbench: .snakemake: {READ_ONLY}"]
    assert "Traceback" not in proc.stderr


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_temporary_files_name_their_writer_and_dead_writers_are_swept(tmp_path):
    with atomic_path(tmp_path / "a.json") as tmp:
        assert writer_of(tmp.name) == (HOST, os.getpid())
        tmp.write_text("{}")
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "b.json") as tmp:
        tmp.write_text("{")
        raise RuntimeError("the block failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]

    figures = tmp_path / "results" / "figures"
    figures.mkdir(parents=True)
    dead, old = dead_pid(), time.time() - STALE_AFTER_S - 60
    names = {"dead": f".x.png@{HOST}.{dead}.abcd1234.tmp",
             "live": f".x.pdf@{HOST}.{os.getpid()}.abcd1234.tmp",
             "other host": ".x.svg@elsewhere.1.abcd1234.tmp",
             "other host, old": ".y.svg@elsewhere.1.abcd1234.tmp",
             "unnamed": ".z.png.k3j4h5_q.tmp",
             "unnamed, old": ".z.pdf.k3j4h5_q.tmp",
             "not temporary": "x.png"}
    for what, name in names.items():
        (figures / name).touch()
        if "old" in what:
            os.utime(figures / name, (old, old))
    removed = sweep_temporary([tmp_path / "results", tmp_path / "logs"])
    assert sorted(p.name for p in removed) == sorted(
        names[w] for w in ("dead", "other host, old", "unnamed, old"))
    assert sorted(p.name for p in figures.iterdir()) == sorted(
        names[w] for w in ("live", "other host", "unnamed", "not temporary"))


@pytest.mark.workflow
def test_the_next_start_sweeps_what_a_killed_regeneration_left(workflow_copy):
    figures = workflow_copy / "results" / "figures"
    figures.mkdir(parents=True)
    dead = figures / f".thread_scaling.png@{HOST}.{dead_pid()}.abcd1234.tmp"
    live = figures / f".thread_scaling.pdf@{HOST}.{os.getpid()}.abcd1234.tmp"
    dead.touch()
    live.touch()
    proc = snakemake(workflow_copy, "results/plan/tiny.md", "--profile", "profiles/local",
                     "--configfile", "tiny.yaml", timeout=120)
    assert not dead.exists() and live.exists()
    assert (f"archbench: removed 1 temporary file(s) of interrupted writes: "
            f"results/figures/{dead.name}") in proc.stderr
    assert (workflow_copy / "results/plan/tiny.md").exists()


def test_a_fault_is_told_in_one_line_and_read_back_from_a_worker_log():
    fault = storage.Unwritable("results/raw/r.json", OSError(errno.EDQUOT, "Disk quota exceeded"))
    line = "archbench: results/raw/r.json: disk quota exceeded (errno 122): free space and rerun"
    assert str(fault) == line and fault.errno == errno.EDQUOT and isinstance(fault, OSError)
    told = storage.reported_fault(f"vendor evidence: onednn\n{line}\narchbench.train: done\n")
    assert (told.filename, told.errno) == ("results/raw/r.json", errno.EDQUOT)
    assert storage.reported_fault("archbench: waiting for the host guard x, held by y") is None

    def refused() -> int:
        raise fault
    assert storage.exit_status(refused) == storage.EXIT_UNWRITABLE
    with pytest.raises(FileNotFoundError):  # not a storage fault: raised as it is
        storage.exit_status(lambda: open("/nonexistent/x") and 0)
