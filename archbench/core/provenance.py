"""Provenance of a run: host, CPU model and its reduced-precision ISA, framework version,
git commit, Slurm job, times, and the CUDA stack and GPUs a GPU run's framework ran with
(a CPU run states none: its tensors never met the CUDA libraries a CUDA build of its
framework loads)."""

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
from typing import Any, Callable

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


# The CPU features that decide which reduced-precision kernels a node can run natively, by
# the /proc/cpuinfo line that lists them: x86_64 ``flags`` (AVX2 / AVX-512, AVX512_BF16 on
# Cooper Lake and Zen 4+, AMX on Sapphire Rapids+, AVX512_FP16), aarch64 ``Features``
# (Advanced SIMD, SVE/SVE2, BF16 and SVE-BF16 on Graviton3/4, Grace, Neoverse V1/V2/N2;
# I8MM): linux arch/x86/include/asm/cpufeatures.h, Documentation/arch/arm64/elf_hwcaps.rst
CPU_ISA_FLAGS = {
    "flags": ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"),
    "Features": ("asimd", "sve", "sve2", "bf16", "svebf16", "i8mm"),
}


def cpu_isa_of(cpuinfo: str) -> list[str] | None:
    """The relevant ISA features (:data:`CPU_ISA_FLAGS`) a /proc/cpuinfo text lists for its
    first CPU, sorted; None when it has no ``flags`` or ``Features`` line to read them from
    (an empty list: a line naming none of them, e.g. a Zen 2 without AVX-512 reads [avx2])."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        wanted = CPU_ISA_FLAGS.get(key.strip()) if sep else None
        if wanted is not None:
            present = set(value.split())
            return sorted(flag for flag in wanted if flag in present)
    return None


# aarch64: the same features as the kernel hands this process (getauxval AT_HWCAP = 16,
# AT_HWCAP2 = 26; linux arch/arm64/include/uapi/asm/hwcap.h), which is what an emulator
# (qemu-user) offers, where /proc/cpuinfo would describe the host
HWCAP_BITS = {"asimd": (16, 1), "sve": (16, 22), "sve2": (26, 1), "svebf16": (26, 12),
              "i8mm": (26, 13), "bf16": (26, 14)}


def cpu_isa_of_hwcaps(hwcap: int, hwcap2: int) -> list[str]:
    """The aarch64 features of :data:`HWCAP_BITS` set in ``hwcap`` / ``hwcap2``, sorted."""
    words = {16: hwcap, 26: hwcap2}
    return sorted(name for name, (word, bit) in HWCAP_BITS.items() if words[word] >> bit & 1)


def _hwcaps() -> tuple[int, int] | None:
    """(AT_HWCAP, AT_HWCAP2) of this process, None where libc cannot say."""
    try:
        import ctypes
        getauxval = ctypes.CDLL(None).getauxval
        getauxval.restype = ctypes.c_ulong
        getauxval.argtypes = [ctypes.c_ulong]
        return int(getauxval(16)), int(getauxval(26))
    except (OSError, AttributeError):
        return None


@lru_cache(maxsize=1)
def cpu_isa(path: str = "/proc/cpuinfo") -> list[str] | None:
    """This node's relevant ISA features, None where they cannot be read: on aarch64 the
    kernel's hwcaps for this process (:func:`cpu_isa_of_hwcaps`), elsewhere
    :func:`cpu_isa_of` of its /proc/cpuinfo; None on the other architectures (ppc64le:
    its /proc/cpuinfo lists no such features, and under qemu-user it is the host's)."""
    machine = platform.machine()
    if machine in ("aarch64", "arm64"):
        caps = _hwcaps()
        if caps is not None:
            return cpu_isa_of_hwcaps(*caps)
    elif machine not in ("x86_64", "AMD64", "i686"):
        return None
    try:
        return cpu_isa_of(Path(path).read_text())
    except OSError:
        return None


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
        "cpu_isa": list(cpu_isa()) if cpu_isa() is not None else None,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_nodes": os.environ.get("SLURM_JOB_NODELIST") or None,
        "git_commit": git_commit(),
        "env": performance_env(),
        "image": os.environ.get("ARCHBENCH_IMAGE", "host"),
        "image_sha256": os.environ.get("ARCHBENCH_IMAGE_SHA256") or None,
        **(accelerator_fields() if device == "gpu" else no_accelerator()),
    }


def no_accelerator() -> dict[str, Any]:
    """The accelerator fields of a process without a CUDA stack."""
    return {"cuda_version": None, "cudnn_version": None, "nccl_version": None, "gpu_models": []}


def nccl_version_text(code: int) -> str | None:
    """NCCL's ``NCCL_VERSION_CODE`` (what Horovod's ``nccl_built()`` returns) as X.Y.Z:
    X*10000 + Y*100 + Z since NCCL 2.9, X*1000 + Y*100 + Z before; None for 0 (no NCCL)."""
    if not code:
        return None
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


# Where this process's CUDA stack is read from: each a function returning the fields of
# :func:`no_accelerator` as the framework it has imported reports them, or None (it has
# imported none). The training frameworks' registry adds its own when
# ``archbench.workloads`` is imported (core imports no layer above it).
ACCELERATOR_SOURCES: list[Callable[[], dict[str, Any] | None]] = []


def accelerator_fields() -> dict[str, Any]:
    """Record fields ``cuda_version``, ``cudnn_version``, ``nccl_version`` and ``gpu_models``
    of this process, read from the framework it has already imported (through
    :data:`ACCELERATOR_SOURCES`): no import, no session; all empty in a process without
    one (the supervisor)."""
    for source in ACCELERATOR_SOURCES:
        found = source()
        if found is not None:
            return {**found, "gpu_models": list(found["gpu_models"])}
    return no_accelerator()
