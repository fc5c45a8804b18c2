"""Shared fixtures: the repository, a scratch copy of the workflow, and a bounded snakemake."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "config", "profiles", "containers", "report",
                  "data")


def in_ci() -> bool:
    """True under CI (CI=true): tests that could skip elsewhere must run there."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def tool_env(**extra: str) -> dict:
    """Environment whose PATH starts with this interpreter's bin (python, snakemake)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_USE_LEGACY_KERAS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra)
    return env


def default_signals() -> None:
    """A ``preexec_fn``: stop signals back to their defaults, as a terminal gives them,
    whatever the test runner ignores (a script's background job ignores SIGINT, nohup
    SIGHUP, and children inherit that)."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow (not results) into ``dest`` so runs do not touch the repository."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / part)
    shutil.copy2(REPO / "tests" / "campaigns" / "tiny.yaml", dest / "tiny.yaml")
    return dest


def snakemake(workdir: Path, *args: str, timeout: int = 600, env: dict | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir`` bounded by ``timeout`` seconds."""
    cmd = [sys.executable, "-m", "snakemake", *args]
    proc = subprocess.run(cmd, cwd=workdir, env=env or tool_env(), capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A scratch copy of the workflow with tests/campaigns/tiny.yaml as tiny.yaml."""
    return copy_workflow(tmp_path)


SLURM_SCRIPT = REPO / "scripts" / "slurm_cluster.sh"


@pytest.fixture(scope="session")
def slurm_env():
    """Bring the local cluster up (idempotent) and return the environment to reach it. A
    cluster this session started is stopped when it ends: its config stays linked at
    /etc/slurm otherwise, and with no controller answering, the Slurm plugin's `scontrol
    show config` (run whenever Snakemake loads it) makes every later snakemake call wait."""
    reason, started = None, False
    if os.geteuid() != 0:
        reason = "starting a local Slurm cluster needs root"
    else:
        started = subprocess.run(["bash", str(SLURM_SCRIPT), "status"], capture_output=True,
                                 timeout=120).returncode != 0
        up = subprocess.run(["bash", str(SLURM_SCRIPT), "up"], capture_output=True, text=True,
                            timeout=600)
        if up.returncode != 0:
            reason = f"scripts/slurm_cluster.sh up failed: {up.stderr.strip()[-2000:]}"
    if reason:
        if in_ci():
            pytest.fail(f"CI requires the Slurm integration test: {reason}")
        pytest.skip(reason)
    exports = subprocess.run(["bash", str(SLURM_SCRIPT), "env"], capture_output=True,
                             text=True, check=True).stdout
    extra = dict(line.removeprefix("export ").split("=", 1) for line in exports.splitlines()
                 if line.startswith("export "))
    yield tool_env(**{k: v.strip("'\"") for k, v in extra.items()})
    if started:
        subprocess.run(["bash", str(SLURM_SCRIPT), "down"], capture_output=True, timeout=120)


# Inputs the property tests tried, by kind and outcome; printed at the end of the run.
INPUTS_TRIED: dict[tuple[str, str], int] = {}


def count_input(kind: str, outcome: str) -> None:
    """Count one tried input of ``kind`` (campaign, system, import ...) as ``outcome``
    (accepted or rejected)."""
    INPUTS_TRIED[(kind, outcome)] = INPUTS_TRIED.get((kind, outcome), 0) + 1


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the count of tried inputs per kind (the malformed-input tests)."""
    kinds = sorted({kind for kind, _ in INPUTS_TRIED})
    if not kinds:
        return
    total = sum(INPUTS_TRIED.values())
    terminalreporter.write_line(f"inputs tried by the malformed-input tests: {total}")
    for kind in kinds:
        accepted = INPUTS_TRIED.get((kind, "accepted"), 0)
        rejected = INPUTS_TRIED.get((kind, "rejected"), 0)
        terminalreporter.write_line(f"  {kind}: {accepted + rejected} ({accepted} accepted, "
                                    f"{rejected} rejected with one line)")


# The image tests (marker `images`) run last; their builds start when collection ends, at
# idle priority, and run while the other tests do (tests/image_builds.py).
def pytest_collection_modifyitems(session, config, items) -> None:
    items.sort(key=lambda item: item.get_closest_marker("images") is not None)


def pytest_collection_finish(session) -> None:
    if session.config.option.collectonly:
        return
    import image_builds
    image_builds.SESSION.start({name for item in session.items for name in item.fixturenames})


def pytest_sessionfinish(session, exitstatus) -> None:
    import image_builds
    image_builds.SESSION.stop()
