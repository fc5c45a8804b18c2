"""Provenance of a run: host, CPU model, framework version, git commit, Slurm job, times,
and the CUDA stack and GPUs a GPU run's framework ran with (a CPU run states none: its
tensors never met the CUDA libraries a CUDA build of its framework loads)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

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


def host_fields(device: str | None = None) -> dict[str, Any]:
    """Record fields describing where and from what code a run executes; the CUDA stack
    (:func:`accelerator_fields`) only for a run on ``device`` "gpu"."""
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
        **(accelerator_fields() if device == "gpu" else no_accelerator()),
    }


# NVIDIA wheels that TensorFlow's CUDA build (tensorflow[and-cuda]) loads its libraries from
CUDNN_WHEEL, NCCL_WHEEL = "nvidia-cudnn-cu12", "nvidia-nccl-cu12"


def no_accelerator() -> dict[str, Any]:
    """The accelerator fields of a process without TensorFlow's CUDA stack."""
    return {"cuda_version": None, "cudnn_version": None, "nccl_version": None, "gpu_models": []}


def nccl_version_text(code: int) -> str | None:
    """NCCL's ``NCCL_VERSION_CODE`` (what Horovod's ``nccl_built()`` returns) as X.Y.Z:
    X*10000 + Y*100 + Z since NCCL 2.9, X*1000 + Y*100 + Z before; None for 0 (no NCCL)."""
    if not code:
        return None
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def cuda_versions(build_info: Mapping, wheels: Mapping[str, str | None], horovod_nccl: int = 0) -> dict:
    """CUDA, cuDNN and NCCL versions of a TensorFlow process, all None on a CPU build.

    ``build_info``: ``tf.sysconfig.get_build_info()`` (a CUDA build has ``is_cuda_build``,
    ``cuda_version`` and the cuDNN major it was built with as ``cudnn_version``).
    ``wheels``: installed versions of :data:`CUDNN_WHEEL` and :data:`NCCL_WHEEL`, the
    libraries the process loads, preferred to the build's cuDNN major. ``horovod_nccl``:
    Horovod's ``nccl_built()``, the NCCL it was compiled with, when no NCCL wheel is there.
    """
    cuda = bool(build_info.get("is_cuda_build"))
    built_cudnn = str(build_info.get("cudnn_version") or "") or None
    nccl = wheels.get(NCCL_WHEEL) if cuda else None
    return {
        "cuda_version": (str(build_info.get("cuda_version") or "") or None) if cuda else None,
        "cudnn_version": (wheels.get(CUDNN_WHEEL) or built_cudnn) if cuda else None,
        "nccl_version": nccl or nccl_version_text(horovod_nccl),
    }


def gpu_models(tf) -> list[str]:
    """Names of the GPUs TensorFlow shows this process (``device_name`` of each physical
    GPU's details, e.g. "Tesla V100-SXM2-16GB"); [] on a CPU build or without GPUs."""
    names = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu) or {}
        names.append(str(details.get("device_name") or gpu.name))
    return names


def _wheel_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def accelerator_fields() -> dict[str, Any]:
    """Record fields ``cuda_version``, ``cudnn_version``, ``nccl_version`` and ``gpu_models``
    of this process, read from the PyTorch, or the TensorFlow (and Horovod), it has already
    imported: no import, no session; all empty in a process without either (the
    supervisor)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "version"):
        return torch_accelerators(torch)
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "sysconfig"):
        return no_accelerator()
    found = _tensorflow_accelerators(tf, sys.modules.get("horovod.tensorflow"))
    return {**found, "gpu_models": list(found["gpu_models"])}


def torch_accelerators(torch) -> dict[str, Any]:
    """CUDA (as the build's), cuDNN and NCCL versions PyTorch reports, and the GPUs it
    shows this process; all None on a CPU build."""
    try:
        cuda = torch.version.cuda
        if not cuda:
            return no_accelerator()
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        nccl = torch.cuda.nccl.version() if torch.distributed.is_nccl_available() else None
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
            if torch.cuda.is_available() else []
        return {"cuda_version": str(cuda), "cudnn_version": cudnn_text(cudnn),
                "nccl_version": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else None,
                "gpu_models": gpus}
    except Exception:  # noqa: BLE001 - provenance never fails a run
        return no_accelerator()


def cudnn_text(code: int | None) -> str | None:
    """cuDNN's version code as PyTorch reports it (92400 = 9.24.0; 8907 = 8.9.7) as X.Y.Z."""
    if not code:
        return None
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


@lru_cache(maxsize=2)
def _tensorflow_accelerators(tf, hvd) -> dict[str, Any]:
    try:
        horovod_nccl = int(hvd.nccl_built()) if hvd is not None else 0
    except Exception:  # noqa: BLE001 - a Horovod without its library: no NCCL to report
        horovod_nccl = 0
    try:
        fields = cuda_versions(tf.sysconfig.get_build_info(),
                               {w: _wheel_version(w) for w in (CUDNN_WHEEL, NCCL_WHEEL)}, horovod_nccl)
        return {**fields, "gpu_models": gpu_models(tf)}
    except Exception:  # noqa: BLE001 - provenance never fails a run
        return no_accelerator()
