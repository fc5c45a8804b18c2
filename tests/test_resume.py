"""Kill and resume: kill the workflow at several random points of the tiny campaign, in
the ways it dies in practice (SIGKILL, Ctrl-C or SIGTERM of Snakemake's whole process
group; SIGKILL of the Snakemake process alone), check that no process of it survives any
kill, resume, and check that every measurement exists exactly once, that no two benchmarks
ever ran at once, and that the tables match an uninterrupted run."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

import pandas as pd
import pytest
from conftest import copy_workflow, default_signals, snakemake, tool_env

from archbench.execute.lifeline import MARK, STOP_GRACE_S
from archbench.plan.campaign import load_campaign_file, raw_path
from archbench.workloads.training.vendor_evidence import reuse

pytestmark = pytest.mark.workflow

# How a run dies: (whom, signal). "group" is Snakemake's process group (its job shells and
# supervisors; a terminal's Ctrl-C sends SIGINT there), "snakemake" the main process alone.
KILLS = [("group", signal.SIGKILL), ("group", signal.SIGINT), ("snakemake", signal.SIGKILL),
         ("group", signal.SIGTERM)]
SEED = int(os.environ.get("ARCHBENCH_KILL_SEED", "20261122"))
COMMAND = [sys.executable, "-m", "snakemake", "--profile", "profiles/local",
           "--configfile", "tiny.yaml"]
# After a kill, every process of the benchmark (job shell, supervisor, lifeline, worker and
# its children) is gone within a few seconds: the supervisor gives the lifeline STOP_GRACE_S
# to kill the worker tree before it kills the tree itself (a TensorFlow worker under load
# took most of it once in CI), then ends; every other process of the run soon after.
BENCHMARK_GONE_WITHIN_S = ("-m archbench.", STOP_GRACE_S + 3)
ALL_GONE_WITHIN_S = ("", 30)


def processes_in(workdir: Path) -> dict[int, str]:
    """Live processes working inside ``workdir`` (Snakemake, job shells, supervisors,
    lifelines, workers and their children): {pid: command line}."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:  # a zombie has no cwd: it is dead
            cwd = os.readlink(f"/proc/{entry}/cwd")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cwd == str(workdir) or cwd.startswith(f"{workdir}/"):
            found[int(entry)] = cmdline.strip()
    return found


def start_and_kill(workdir: Path, whom: str, signum: int, extra_s: float) -> bool:
    """Start the workflow in its own session; once a benchmark runs, wait ``extra_s`` and
    send ``signum`` to ``whom``; assert that nothing of the run survives. False when the
    campaign finished before a benchmark started."""
    proc = subprocess.Popen(COMMAND, cwd=workdir, env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=default_signals)
    try:
        while not any(f"-m archbench.{w} " in c for c in processes_in(workdir).values()
                      for w in ("train", "kernels")):
            if proc.poll() is not None:
                return False
            time.sleep(0.1)
        time.sleep(extra_s)
        if whom == "group":
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        killed = time.monotonic()
        for what, within_s in BENCHMARK_GONE_WITHIN_S, ALL_GONE_WITHIN_S:
            while ((left := {p: c for p, c in processes_in(workdir).items() if what in c})
                   and time.monotonic() < killed + within_s):
                time.sleep(0.05)
            assert not left, f"alive {within_s} s after {whom} {signum!r}: {left}"
    finally:
        for pid in processes_in(workdir):  # a failed test leaves nothing running
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
    # the lock of a killed run stays behind, as after a crashed login node
    snakemake(workdir, "--unlock", "--configfile", "tiny.yaml", timeout=120)
    return True


def spans_in_logs(workdir: Path) -> set[tuple[dt.datetime, dt.datetime]]:
    """(start, end) of every worker tree in the worker logs, killed ones included, from the
    marks the supervisors and lifelines wrote (Snakemake deletes a job's logs before it
    reruns the job: collect them after each kill)."""
    spans = set()
    for log in sorted((workdir / "logs/run_measurement").rglob("*.worker.log")):
        start = None
        for m in MARK.finditer(log.read_text()):
            when = dt.datetime.fromisoformat(m[1])
            if m[2] == "start":
                assert start is None, f"{log}: a worker started before the last one ended"
                start = when
            elif start is not None:  # (an end alone: stopped before its worker started)
                spans.add((start, when))
                start = None
        assert start is None, f"{log}: a worker with no end"
    return spans


def assert_disjoint(spans: Iterable[tuple], what: str) -> None:
    spans = sorted(spans)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, f"two {what} overlap: one ended {end}, the next started {start}"


def key_columns(table: pd.DataFrame) -> pd.DataFrame:
    keys = ["system", "experiment", "config_id", "repetition", "status", "model",
            "intra_threads", "vendor_library_enabled", "throughput_unit"]
    return table[keys].sort_values(keys[:4]).reset_index(drop=True)


def test_kill_at_random_points_then_resume_loses_nothing(tmp_path):
    reference = copy_workflow(tmp_path / "reference")
    snakemake(reference, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)

    workdir = copy_workflow(tmp_path / "killed")
    rng = random.Random(SEED)
    extra = [rng.uniform(0.0, 8.0) for _ in KILLS]  # past a worker's start: TF import, steps, exit
    hit, spans = [], set()
    for (whom, signum), after in zip(KILLS, extra):
        hit.append(start_and_kill(workdir, whom, signum, after))
        spans |= spans_in_logs(workdir)
    snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)

    expected = {raw_path(m) for m in load_campaign_file(workdir / "tiny.yaml").measurements}
    raw = workdir / "results/raw"
    on_disk = {str(p.relative_to(workdir / "results")) for p in raw.rglob("*.json")
               if reuse.PROBES_DIR not in p.parts}
    assert on_disk == expected  # every measurement exactly once, nothing extra
    for index in raw.glob(f"*/{reuse.PROBES_DIR}/*.json"):  # each names a record
        named = index.parent.parent / json.loads(index.read_text())["record"]
        assert str(named.relative_to(workdir / "results")) in expected
    records = [json.loads((workdir / "results" / path).read_text()) for path in expected]
    assert all(r["status"] == "ok" for r in records)
    assert not list((workdir / "results/raw").rglob(".*.worker"))  # no scratch file left
    assert not list(workdir.glob("results/**/.*.tmp"))  # nor temporary file: removed or swept
    assert_disjoint([(dt.datetime.fromisoformat(r["start_time"]), dt.datetime.fromisoformat(r["end_time"]))
                     for r in records], "records' benchmark windows")
    spans |= spans_in_logs(workdir)
    assert len(spans) >= len(records)
    assert_disjoint(spans, "worker trees")

    killed = pd.read_csv(workdir / "results/tables/measurements.csv")
    uninterrupted = pd.read_csv(reference / "results/tables/measurements.csv")
    assert list(killed.columns) == list(uninterrupted.columns)
    assert killed["run_id"].is_unique
    pd.testing.assert_frame_equal(key_columns(killed), key_columns(uninterrupted))
    for table in sorted((reference / "results/tables").glob("*.csv")):
        other = pd.read_csv(workdir / "results/tables" / table.name)
        assert other.shape == pd.read_csv(table).shape, table.name
    print(f"kills: {[(w, signal.Signals(s).name, round(t, 1), h) for (w, s), t, h in zip(KILLS, extra, hit)]}; "
          f"worker trees: {len(spans)}; lost: none")
