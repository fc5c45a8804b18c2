"""PyTorch's CUDA-stack provenance (the ``accelerators`` of its registry entry): the CUDA
its build was made with, the cuDNN and NCCL versions it reports, and the GPUs it shows
this process."""

from __future__ import annotations

import sys
from typing import Any

from archbench.core.provenance import no_accelerator


def accelerator_fields() -> dict[str, Any] | None:
    """The CUDA stack of the PyTorch this process has imported (None when it has not)."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "version"):
        return None
    return torch_accelerators(torch)


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
