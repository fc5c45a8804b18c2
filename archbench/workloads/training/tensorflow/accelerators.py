"""TensorFlow's CUDA-stack provenance (the ``accelerators`` of its registry entry): CUDA,
cuDNN and NCCL versions from TensorFlow's build info, the NVIDIA wheels it loads and
Horovod's NCCL, and the GPUs it shows this process."""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import metadata
from typing import Any, Mapping

from archbench.core.provenance import nccl_version_text, no_accelerator

# NVIDIA wheels that TensorFlow's CUDA build (tensorflow[and-cuda]) loads its libraries from
CUDNN_WHEEL, NCCL_WHEEL = "nvidia-cudnn-cu12", "nvidia-nccl-cu12"


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


def accelerator_fields() -> dict[str, Any] | None:
    """The CUDA stack of this process's TensorFlow (and Horovod), read from the modules it
    has imported (no import, no session); None when it has not imported TensorFlow."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "sysconfig"):
        return None
    found = _accelerators(tf, sys.modules.get("horovod.tensorflow"))
    return {**found, "gpu_models": list(found["gpu_models"])}


@lru_cache(maxsize=2)
def _accelerators(tf, hvd) -> dict[str, Any]:
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
