"""GPU runs: one rank per GPU, bound from its local rank, and the devices a step really ran on.

A measurement asks for a device (``device: gpu`` or ``cpu``). Each rank of a GPU run calls
:func:`bind_gpu` before its framework loads: of the GPUs its node shows it (Slurm's gres
binding lists the node's allocated GPUs in ``CUDA_VISIBLE_DEVICES``), it keeps the one of
its local rank, as Horovod's examples do with ``visible_device_list``. A CPU run hides every
GPU. What a record states as its devices comes from the framework's placement of the
step's tensors (:func:`placed_devices` of TensorFlow's, the framework's own backend
elsewhere), never from the configuration; :func:`device_mismatch`
turns a GPU measurement whose step ran elsewhere into a failure.
"""

from __future__ import annotations

import os
import re
import sys

from archbench.core.fields import BY_NAME
from archbench.workloads.launch import local_rank

DEVICES = BY_NAME["device"].choices  # cpu, gpu
NO_GPU = "no GPU visible to TensorFlow"


class NoGPUError(RuntimeError):
    """A GPU measurement on a process that its framework shows no GPU."""


class DevicePlacementError(RuntimeError):
    """A GPU run whose measured step the framework placed elsewhere (never recorded as ok)."""

    def __init__(self, reason: str, devices: list[str]):
        super().__init__(reason)
        self.devices = devices


def no_gpu(framework: str) -> NoGPUError:
    """The error of a GPU run whose ``framework`` (its label, e.g. "PyTorch") sees no GPU."""
    return NoGPUError(f"no GPU visible to {framework} (CUDA_VISIBLE_DEVICES="
                      f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r})")


def visible_device_for(rank: int, inherited: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` of the rank with local rank ``rank``: the rank-th entry of
    the list the process inherited (the job's GPUs on this node), or ``rank`` itself when
    it inherited none. An inherited single entry (Slurm bound one GPU per task) is kept.
    Slurm's "NoDevFiles" (GPUs configured as counts without device files) lists none."""
    listed = [d.strip() for d in (inherited or "").split(",")
              if d.strip() and d.strip() != "NoDevFiles"]
    if not listed:
        return str(rank)
    if len(listed) == 1:
        return listed[0]
    return listed[rank % len(listed)]


def bind_gpu(device: str, env: dict | None = None) -> str:
    """Set ``CUDA_VISIBLE_DEVICES`` in ``env`` (default: this process's environment) for a
    rank of a ``device`` run and return it: one GPU by local rank, or none ("") for cpu.
    Call before the framework is imported."""
    env = os.environ if env is None else env
    value = visible_device_for(local_rank(), env.get("CUDA_VISIBLE_DEVICES")) if device == "gpu" else ""
    env["CUDA_VISIBLE_DEVICES"] = value
    if device == "gpu":  # each rank says which GPU it took (the worker log shows the binding)
        # one write: ranks sharing a stderr pipe must not interleave within the line
        sys.stderr.write(f"archbench.workloads.gpu: local rank {local_rank()} bound to CUDA_VISIBLE_DEVICES={value}\n")
        sys.stderr.flush()
    return value


def require_gpu(tf) -> list[str]:
    """The GPUs TensorFlow sees in this process; NoGPUError (reason :data:`NO_GPU`) if none."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        raise no_gpu("TensorFlow")
    return [gpu.name for gpu in gpus]


_DEVICE = re.compile(r"device:([A-Za-z_]+):(\d+)", re.IGNORECASE)


def short_device(name: str) -> str:
    """``/job:worker/replica:0/task:1/device:GPU:0`` as ``task1/GPU:0`` (``GPU:0`` without
    a task); a name without a device part is returned as it is."""
    found = _DEVICE.search(name or "")
    if not found:
        return name
    kind = f"{found.group(1).upper()}:{found.group(2)}"
    task = re.search(r"/task:(\d+)", name)
    return f"task{task.group(1)}/{kind}" if task and "/job:localhost" not in name else kind


def placed_devices(tensors) -> list[str]:
    """The devices TensorFlow placed ``tensors`` on (their ``.device``), short and sorted."""
    return sorted({short_device(t.device) for t in tensors if getattr(t, "device", "")})


def device_kind(name: str) -> str:
    """"gpu" or "cpu" (or the lower-cased kind) of a device name."""
    found = _DEVICE.search(name if "device:" in name.lower() else f"device:{name.split('/')[-1]}")
    return found.group(1).lower() if found else ""


def device_mismatch(device: str, devices: list[str]) -> str:
    """Why a run asking for ``device`` did not run there ("" when it did): a GPU run needs
    every placed device to be a GPU; a CPU run any GPU-free placement."""
    if not devices:
        return f"no device placement recorded for a {device} run"
    kinds = {device_kind(d) for d in devices}
    if device == "gpu" and kinds != {"gpu"}:
        return f"asked for GPUs, the step ran on {', '.join(devices)}"
    if device == "cpu" and "gpu" in kinds:
        return f"asked for CPUs, the step ran on {', '.join(devices)}"
    return ""


def unsupported_gpus(capability: float, built_for: list[float]) -> str:
    """Why GPUs of CUDA compute ``capability`` cannot run a TensorFlow built for the
    capabilities ``built_for`` ("" when they can, or nothing is known): older than the
    oldest it was built for. (Binary code runs on its own major version and later minors;
    PTX of the newest is compiled for newer GPUs, which therefore run too.)"""
    if not built_for or capability >= min(built_for):
        return ""
    return (f"its GPUs' compute capability {capability:.1f} is older than {min(built_for):.1f}, "
            f"the oldest the image's TensorFlow was built for: TensorFlow shows them no GPU "
            f"and every GPU measurement is recorded as '{NO_GPU}'")
