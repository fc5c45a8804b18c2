"""Provenance of a run: host, CPU model, framework version, git commit, Slurm job, times."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

# Environment variables that change performance and belong in every record.
PERFORMANCE_ENV = (
    "TF_ENABLE_ONEDNN_OPTS", "TF_USE_LEGACY_KERAS", "OMP_NUM_THREADS", "KMP_BLOCKTIME",
    "KMP_AFFINITY", "KMP_SETTINGS", "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD",
    "ONEDNN_DEFAULT_FPMATH_MODE", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS",
)


def now() -> str:
    """Current UTC time, ISO 8601 with seconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (falls back to platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu\t", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def git_commit(directory: str | None = None) -> str | None:
    """The workflow's git commit (``ARCHBENCH_GIT_COMMIT`` wins), or None outside git."""
    if os.environ.get("ARCHBENCH_GIT_COMMIT"):
        return os.environ["ARCHBENCH_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=directory or Path(__file__).parent, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def config_hash(config: Any) -> str:
    """Stable short hash of a configuration (JSON with sorted keys)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def performance_env() -> dict[str, str]:
    """The performance-relevant environment variables that are set."""
    return {k: os.environ[k] for k in PERFORMANCE_ENV if k in os.environ}


def host_fields() -> dict[str, Any]:
    """Record fields describing where and from what code a run executes."""
    return {
        "arch": platform.machine(),
        "hosts": [socket.gethostname()],
        "cpu_model": cpu_model(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_nodes": os.environ.get("SLURM_JOB_NODELIST") or None,
        "git_commit": git_commit(),
        "env": performance_env(),
        "image": os.environ.get("ARCHBENCH_IMAGE", "host"),
        "image_sha256": os.environ.get("ARCHBENCH_IMAGE_SHA256") or None,
    }
