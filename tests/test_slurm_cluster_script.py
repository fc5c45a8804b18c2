"""Cheap checks of scripts/slurm_cluster.sh that need no running cluster.

The real cluster test (up, srun, sbatch, sacct, down) lives with the Slurm tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm_cluster.sh"


def run(*args: str, state: Path, user: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, ARCHBENCH_SLURM_DIR=str(state))
    env.pop("SLURM_CONF", None)
    cmd = ["bash", str(SCRIPT), *args]
    if user:
        cmd = ["runuser", "-u", user, "--", "env", f"ARCHBENCH_SLURM_DIR={state}", *cmd]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_env_prints_slurm_conf_of_the_state_dir(tmp_path):
    out = run("env", state=tmp_path)
    assert out.returncode == 0
    assert out.stdout.strip() == f"export SLURM_CONF={tmp_path}/etc/slurm.conf"


def test_status_fails_without_a_cluster(tmp_path):
    assert run("status", state=tmp_path / "none").returncode != 0


def test_down_without_a_cluster_is_a_no_op(tmp_path):
    assert run("down", state=tmp_path / "none").returncode == 0


def test_unknown_command_prints_usage(tmp_path):
    out = run("restart", state=tmp_path)
    assert out.returncode == 2 and "usage" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root to switch user")
def test_up_refuses_non_root_with_exit_3(tmp_path):
    out = run("up", state=tmp_path, user="nobody")
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0 and "root" in out.stderr
