"""Nothing another invocation does can change what a live run measures: each job runs the
spec its own run planned (an immutable file named by its digest), and a supervisor runs a
spec only if it still hashes to that name and belongs to its record."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import copy_workflow, default_signals, snakemake, tool_env

from archbench.execute.specfiles import digest, read_spec, spec_text, write_specs

pytestmark = pytest.mark.workflow

CAMPAIGN = """\
campaign: race
systems: [local]
defaults:
  repetitions: {repetitions}
  timeout_minutes: 5
experiments:
  kernels:
    type: kernel
    kernels: [matmul]
    sizes: [1024]
    tile_sizes: [256]
    workers: [1]
    steps: {steps}
"""
LIVE_STEPS, OTHER_STEPS = 30, 5


def records(workdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((workdir / "results/raw").rglob("rep*.json"))]


def test_a_refused_run_with_other_settings_changes_nothing_a_live_run_measures(tmp_path):
    """A live campaign; while it runs, the same campaign (same name) with other settings is
    started, with and without --nolock, and refused by the lock's holder (named). Every
    record has the live run's settings and its log, and the live run's plan is then complete."""
    work = copy_workflow(tmp_path / "wf")
    (work / "live.yaml").write_text(CAMPAIGN.format(repetitions=6, steps=LIVE_STEPS))
    (work / "other.yaml").write_text(CAMPAIGN.format(repetitions=6, steps=OTHER_STEPS))
    live = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile", "live.yaml"],
        cwd=work, env=tool_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 300
        while not list((work / "results/raw").rglob("rep*.json")):
            assert live.poll() is None, f"the live run ended before its first record:\n{live.stdout.read()}"
            assert time.monotonic() < deadline, "no record within 300 s"
            time.sleep(0.2)
        refused = snakemake(work, "--profile", "profiles/local", "--configfile", "other.yaml",
                            check=False)
        unlocked = snakemake(work, "--profile", "profiles/local", "--configfile", "other.yaml",
                             "--nolock", check=False)
        out, _ = live.communicate(timeout=600)
    finally:
        live.kill()
    assert live.returncode == 0, out[-3000:]
    # each refused in one line; the first names the live run (its pid, alive), neither says --unlock
    text = refused.stdout + refused.stderr
    assert refused.returncode != 0 and f"holds Snakemake's lock: pid {live.pid} on " in text, text[-3000:]
    assert ", alive: wait for it to end" in text and "--unlock" not in text
    text = unlocked.stdout + unlocked.stderr
    assert unlocked.returncode != 0 and "archbench: --nolock refused" in text, text[-3000:]
    done = records(work)
    assert len(done) == 6
    assert [r["measured_steps"] for r in done] == [LIVE_STEPS] * 6, "a record was measured with the refused run's settings"
    assert all(r["status"] == "ok" for r in done)
    assert all(Path(work, r["log_path"]).exists() for r in done), "a refused run deleted a live run's log"
    # the refused run's plan landed in files of its own; the live run's are intact
    for spec_file in (work / "results/specs/race").iterdir():
        assert digest(spec_file.read_text()) == spec_file.stem
    plan = snakemake(work, "--profile", "profiles/local", "--configfile", "live.yaml", "-n")
    assert "Nothing to be done" in plan.stdout + plan.stderr


# ---------------------------------------------------------------- the supervisor's check

SPEC = {"measurement": {"system": "local", "experiment": "e", "config_id": "c", "repetition": 0,
                        "kind": "kernel"}, "system": {}}
RECORD = "results/raw/local/e/c/rep0.json"


def test_a_spec_file_is_named_by_its_digest_and_never_rewritten(tmp_path):
    text = spec_text(SPEC)
    assert write_specs([text, text], tmp_path) == 1
    path = tmp_path / f"{digest(text)}.json"
    before = path.stat().st_mtime_ns
    assert write_specs([text], tmp_path) == 0
    assert path.stat().st_mtime_ns == before
    assert read_spec(path, RECORD) == SPEC


@pytest.mark.parametrize("change, message", [
    (lambda p: p.write_text(p.read_text().replace('"kernel"', '"train"')), "altered"),
    (lambda p: p.write_text(p.read_text()[:-5]), "altered"),
    (lambda p: p.unlink(), "unreadable spec file"),
])
def test_the_supervisor_refuses_an_altered_or_missing_spec(tmp_path, change, message):
    write_specs([spec_text(SPEC)], tmp_path)
    path = tmp_path / f"{digest(spec_text(SPEC))}.json"
    change(path)
    proc = subprocess.run([sys.executable, "-m", "archbench.run", "--spec-file", str(path),
                           "--output", str(tmp_path / RECORD), "--log", str(tmp_path / "w.log")],
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode != 0 and message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / RECORD).exists()


def test_the_supervisor_refuses_another_records_spec(tmp_path):
    write_specs([spec_text(SPEC)], tmp_path)
    path = tmp_path / f"{digest(spec_text(SPEC))}.json"
    proc = subprocess.run([sys.executable, "-m", "archbench.run", "--spec-file", str(path),
                           "--output", str(tmp_path / "results/raw/local/e/c/rep1.json"),
                           "--log", str(tmp_path / "w.log")],
                          capture_output=True, text=True, env=tool_env(), timeout=120)
    assert proc.returncode != 0 and "the spec of raw/local/e/c/rep0.json" in proc.stderr
    assert "Traceback" not in proc.stderr
