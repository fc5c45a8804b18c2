"""Kill and resume: SIGKILL the whole workflow (snakemake, supervisors, benchmarks) at
several random points of the tiny campaign, resume, and check that every measurement
exists exactly once and the tables match an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow, snakemake, tool_env

from archbench.campaign import load_campaign_file, raw_path

pytestmark = pytest.mark.workflow

KILL_POINTS = 4
SEED = int(os.environ.get("ARCHBENCH_KILL_SEED", "20261122"))
COMMAND = [sys.executable, "-m", "snakemake", "--profile", "profiles/local",
           "--configfile", "tiny.yaml"]


def start_and_kill(workdir: Path, after_s: float) -> None:
    """Start the workflow in its own session and SIGKILL the whole group after ``after_s``."""
    proc = subprocess.Popen(COMMAND, cwd=workdir, env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # the lock of a killed run stays behind, as after a crashed login node
    snakemake(workdir, "--unlock", "--configfile", "tiny.yaml", timeout=120)


def key_columns(table: pd.DataFrame) -> pd.DataFrame:
    keys = ["system", "experiment", "config_id", "repetition", "status", "model",
            "intra_threads", "vendor_library_enabled", "throughput_unit"]
    return table[keys].sort_values(keys[:4]).reset_index(drop=True)


def test_kill_at_random_points_then_resume_loses_nothing(tmp_path):
    reference = copy_workflow(tmp_path / "reference")
    snakemake(reference, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)

    workdir = copy_workflow(tmp_path / "killed")
    rng = random.Random(SEED)
    kill_times = sorted(rng.uniform(2.0, 30.0) for _ in range(KILL_POINTS))
    for after in kill_times:
        start_and_kill(workdir, after)
    snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)

    expected = {raw_path(m) for m in load_campaign_file(workdir / "tiny.yaml").measurements}
    on_disk = {str(p.relative_to(workdir / "results")) for p in (workdir / "results/raw").rglob("*.json")}
    assert on_disk == expected  # every measurement exactly once, nothing extra
    for path in expected:
        assert json.loads((workdir / "results" / path).read_text())["status"] == "ok"

    killed = pd.read_csv(workdir / "results/tables/measurements.csv")
    uninterrupted = pd.read_csv(reference / "results/tables/measurements.csv")
    assert list(killed.columns) == list(uninterrupted.columns)
    assert killed["run_id"].is_unique
    pd.testing.assert_frame_equal(key_columns(killed), key_columns(uninterrupted))
    for table in sorted((reference / "results/tables").glob("*.csv")):
        other = pd.read_csv(workdir / "results/tables" / table.name)
        assert other.shape == pd.read_csv(table).shape, table.name
    print(f"kill points (s): {[round(t, 1) for t in kill_times]}; lost: none")
